/**
 * The `/scim/v2/*` family: the deprovision-only SCIM 2.0 facade (docs/scim.md, normative; base
 * hardening set, no CORS, hidden from the OpenAPI snapshot). It never provisions and never reads
 * users; it is the engine's only surface that handles PATCH or DELETE.
 *
 * - Gate (onRequest, before any body is read): without SCIM_BEARER_TOKEN every path answers 503
 *   text/plain `scim not enabled` (fail closed); with it, `Authorization: Bearer <token>` is
 *   compared in constant time (digests), and anything else is the engine's 401 text/plain
 *   `unauthorised`.
 * - `PATCH /scim/v2/Users/<id>`: a PatchOp whose every operation sets `active` to false (Okta's
 *   and Entra ID's forms, patch-op.ts) deprovisions `<id>`; any other change (activating, another
 *   attribute, removing `active`), alone or mixed with active false, is refused whole with 400 and
 *   the RFC 7644 `scimType`, changing nothing.
 * - `DELETE /scim/v2/Users/<id>`: deprovisions `<id>`.
 * - Deprovisioning (deprovision.ts): `<id>` names subjects by the provider's immutable user id
 *   (after the `#` of an SSO subject), an exact engine subject (percent-encoded in the path) or an
 *   email; their role grants, sign-in factors, pending invites and sessions go (a live cookie is
 *   refused on its next request). 204 when something was held; 404 `Resource <id> not found`
 *   when nothing was (sessions the id could name are ended even then); 409, changing nothing,
 *   when it would remove the last owner.
 * - Every other method or path under `/scim/v2/` answers a SCIM error: 501 for the SCIM endpoints
 *   this facade does not implement (`/Users` reads and creates, PUT, `/Groups`, `/Me`, `/Bulk`,
 *   `/.search`, `/ServiceProviderConfig`, `/Schemas`, `/ResourceTypes`), 404 for other paths.
 * - Bodies: `application/scim+json` or `application/json`, at most 64 KiB; a malformed, oversized
 *   or otherwise typed body is 400 `invalidSyntax` (no 413 or 415, as elsewhere in the engine).
 * - Errors are `application/scim+json` `{ schemas: [Error URN], status: '<code>', scimType?, detail }`
 *   (RFC 7644 §3.12); an internal fault is 500 with no detail beyond `internal error`.
 *
 * Audit: each authenticated PATCH or DELETE on a user writes one `scim-deprovision` event, actor
 * `{ email: null, subject: null, method: 'scim-bearer' }`, role null, target the SCIM id: outcome
 * `applied` (also when nothing matched) with `op`, `subjects`, `roles`, `sessions`, `factors`;
 * `refused` with `op` and `reason` (`last-owner`, or the PatchOp refusal); `failed` with `op`,
 * `reason: 'state'` when the store failed part-way (answered 500; sessions are ended first, and a
 * retry is idempotent). The bearer and the request body are never recorded or logged.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerOf, createAdminTokenChecker } from '../../auth/admin-token.ts';
import { sendUnauthorised } from '../../plugins/replies.ts';
import { deprovision, planDeprovision } from './deprovision.ts';
import { readDeprovisionPatch, type ScimType } from './patch-op.ts';

export const SCIM_ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const SCIM_CONTENT_TYPE = 'application/scim+json';
const BODY_LIMIT = 64 * 1024;
const MAX_ID_LENGTH = 512;
const SCIM_ACTOR = { email: null, subject: null, method: 'scim-bearer' } as const;
const ONLY_DEPROVISION =
  'this SCIM service only deprovisions users: PATCH /Users/<id> setting active to false, or DELETE /Users/<id>';
/** SCIM endpoints (RFC 7644 §3.2) the facade answers 501 for, rather than 404. */
const SCIM_ENDPOINT =
  /^\/scim\/v2\/(?:users|groups|me|bulk|\.search|serviceproviderconfig|schemas|resourcetypes)(?:[/?]|$)/i;

/** A SCIM error response (RFC 7644 §3.12). */
export function sendScimError(
  reply: FastifyReply,
  status: number,
  detail: string,
  scimType?: ScimType,
): FastifyReply {
  return reply
    .code(status)
    .type(SCIM_CONTENT_TYPE)
    .send(
      JSON.stringify({
        schemas: [SCIM_ERROR_SCHEMA],
        status: String(status),
        ...(scimType ? { scimType } : {}),
        detail,
      }),
    );
}

type Op = 'patch' | 'delete';

export default async function scimFamily(app: FastifyInstance): Promise<void> {
  const token = app.config.scimBearerToken;
  // Same constant-time digest comparison as the admin token, with its own secret.
  const checker = createAdminTokenChecker(token, false);

  // This plugin is its own encapsulation context: the parser, hook and error handler below apply
  // to /scim/v2 only.
  app.addContentTypeParser(
    SCIM_CONTENT_TYPE,
    { parseAs: 'string', bodyLimit: BODY_LIMIT },
    app.getDefaultJsonParser('error', 'error'),
  );

  app.addHook('onRequest', async (request, reply) => {
    if (!checker.configured)
      return reply.code(503).type('text/plain; charset=utf-8').send('scim not enabled');
    const presented = bearerOf(request.headers.authorization);
    if (typeof presented !== 'string' || !checker.matches(presented)) return sendUnauthorised(reply);
  });

  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const code = error.code ?? '';
    if (code.startsWith('FST_ERR_CTP_') || error instanceof SyntaxError || error.validation)
      return sendScimError(
        reply,
        400,
        'the request body must be SCIM JSON of at most 64 KiB',
        'invalidSyntax',
      );
    request.log.error({ requestId: request.id, fault: code || error.name }, 'scim fault');
    return sendScimError(reply, 500, 'internal error');
  });

  const audit = (
    request: FastifyRequest,
    id: string,
    outcome: 'applied' | 'refused' | 'failed',
    detail: Record<string, unknown>,
  ) =>
    app.audit.append({
      action: 'scim-deprovision',
      actor: { ...SCIM_ACTOR },
      role: null,
      sourceAddress: request.ip ?? null,
      outcome,
      target: id.slice(0, 256),
      detail,
    });

  /** Deprovisions `id` and answers: 204, 404 (nothing held) or 409 (last owner). */
  const deprovisionUser = async (request: FastifyRequest, reply: FastifyReply, id: string, op: Op) => {
    const plan = await planDeprovision(app, id);
    if (plan.lastOwner) {
      await audit(request, id, 'refused', { op, reason: 'last-owner', subjects: plan.held.length });
      return sendScimError(
        reply,
        409,
        'this user is the last owner of the engine: grant owner to someone else first',
      );
    }
    let counts: Awaited<ReturnType<typeof deprovision>>;
    try {
      counts = await deprovision(app, plan);
    } catch (err) {
      // Part may be done (sessions end first); the provider retries, and a retry is idempotent.
      await audit(request, id, 'failed', { op, reason: 'state', subjects: plan.held.length });
      throw err;
    }
    await audit(request, id, 'applied', { op, ...counts });
    request.log.info({ scim: op, ...counts }, 'scim deprovision');
    if (counts.subjects === 0) return sendScimError(reply, 404, `Resource ${id} not found`);
    return reply.code(204).send();
  };

  const userId = (
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
  ): string | null => {
    const id = request.params.id;
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      sendScimError(reply, 404, 'Resource not found');
      return null;
    }
    return id;
  };

  const route = { bodyLimit: BODY_LIMIT, schema: { hide: true } };

  app.patch<{ Params: { id: string } }>('/scim/v2/Users/:id', route, async (request, reply) => {
    const id = userId(request, reply);
    if (id === null) return reply;
    const verdict = readDeprovisionPatch(request.body);
    if (!verdict.ok) {
      await audit(request, id, 'refused', { op: 'patch', reason: verdict.reason });
      return sendScimError(reply, 400, verdict.detail, verdict.scimType);
    }
    return deprovisionUser(request, reply, id, 'patch');
  });

  app.delete<{ Params: { id: string } }>('/scim/v2/Users/:id', route, async (request, reply) => {
    const id = userId(request, reply);
    if (id === null) return reply;
    return deprovisionUser(request, reply, id, 'delete');
  });

  // Everything else under /scim/v2: never a provisioning or a read.
  app.all('/scim/v2/*', route, async (request, reply) => {
    if (SCIM_ENDPOINT.test(request.url)) return sendScimError(reply, 501, ONLY_DEPROVISION);
    return sendScimError(reply, 404, 'no such SCIM endpoint');
  });
}
