/**
 * The admin support routes (specification "Status, setup, support and policy"; docs/pull-api.md):
 *
 * - `GET /admin/support` (`posture.read`): vendor sealing key presence (and its public
 *   fingerprint), the engine signer's fingerprint, and each scope's redacted credential state:
 *   client id, grantedBy, grantedAt, expiry, expired flag and the pull trail. Never a secret or
 *   verifier.
 * - `GET /admin/support/bundle` (`posture.read`): a fresh bundle as a download.
 * - `POST /admin/support/bundle` (`posture.read`, rate-limited): generates a bundle, folding in an
 *   optional bounded ring of browser errors (at most 50, each message at most 1 KiB) that are
 *   scrubbed, placed in the bundle and then discarded (never stored or logged). A body over
 *   BUNDLE_BODY_LIMIT is refused with 400 before it is read.
 * - `POST /admin/support/credentials` (owner only; 403 `required: 'owner'` otherwise): mints the
 *   scope's pull credential (replacing an existing one); the secret is in this reply only.
 * - `POST /admin/support/credentials/delete` (owner only): revokes by scope.
 *
 * Every mint, revoke, refusal and bundle generation is an audit event; the secret never is. A mint
 * also raises the `credential-minted` notification event (src/events.ts: scope, client id, expiry;
 * never the secret); under owner-action dual control, when the second owner approves it.
 */
import { forbiddenBody, isOwner } from '@coffer/authz';
import type { PullScope } from '@coffer/state';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type Static, Type } from 'typebox';
import { type BrowserErrorInput, generateBundle, MAX_BROWSER_ERRORS } from '../../bundle/index.ts';
import { queuedIfArmed } from '../admin/owner-actions.ts';
import { credentialView, mintCredential, PULL_SCOPES } from './grants.ts';

/** Largest `POST /admin/support/bundle` body: 50 entries of 1 KiB plus framing. */
export const BUNDLE_BODY_LIMIT = 64 * 1024;

const Scope = Type.Union(PULL_SCOPES.map((s) => Type.Literal(s)));
const MintBody = Type.Object(
  {
    scope: Scope,
    lifetimeSeconds: Type.Optional(Type.Number({ minimum: 0, description: 'clamped to [60 s, max]' })),
  },
  { additionalProperties: false },
);
type MintBody = Static<typeof MintBody>;
const RevokeBody = Type.Object({ scope: Scope }, { additionalProperties: false });
type RevokeBody = Static<typeof RevokeBody>;
const BrowserError = Type.Object(
  {
    message: Type.String({ maxLength: 1024 }),
    at: Type.Optional(Type.String({ maxLength: 64 })),
    source: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);
const BundleBody = Type.Object(
  { browserErrors: Type.Optional(Type.Array(BrowserError, { maxItems: MAX_BROWSER_ERRORS })) },
  { additionalProperties: false },
);
type BundleBody = Static<typeof BundleBody>;

export default async function supportRoutes(app: FastifyInstance): Promise<void> {
  const ctx = app;
  const postureRead = app.requireCapability('posture.read');

  /** Owner-only gate: 403 with `required: 'owner'`, recorded as a refusal of `action`. */
  const ownerOnly =
    (action: 'credential-mint' | 'credential-revoke') =>
    async (request: FastifyRequest, reply: FastifyReply) => {
      const caller = request.caller;
      if (!caller) return; // authentication already answered
      if (isOwner(caller.authz)) return;
      reply.code(403).send(forbiddenBody('owner', caller.authz));
      await app.audit.forRequest(request, {
        action,
        outcome: 'refused',
        detail: { reason: 'owner-only', required: 'owner' },
      });
    };

  app.get(
    '/support',
    {
      onRequest: postureRead,
      config: { capability: 'posture.read' },
      schema: {
        summary: 'Support posture and redacted pull credential state',
        operationId: 'getSupport',
        tags: ['admin', 'support'],
      },
    },
    async () => {
      const now = new Date();
      const grants = await Promise.all(PULL_SCOPES.map((s) => ctx.state.credentials.get(s)));
      return {
        vendorSealingKey: {
          present: ctx.keys.support !== null,
          fingerprint: ctx.keys.support?.fingerprint ?? null,
        },
        signer: { present: Boolean(ctx.keys.signer), fingerprint: ctx.keys.signer?.fingerprint ?? null },
        bundleKind: ctx.keys.support ? 'engine-support-bundle-sealed' : 'engine-support-bundle-signed',
        credentials: PULL_SCOPES.map((scope, i) => credentialView(scope, grants[i] ?? null, now)),
      };
    },
  );

  const bundleReply = async (request: FastifyRequest, reply: FastifyReply, errors?: BrowserErrorInput[]) => {
    const head = await app.audit.log.head();
    const { bundle, facts } = await generateBundle(ctx, head.seq, errors);
    await app.audit.forRequest(request, {
      action: 'support-bundle-generate',
      outcome: 'applied',
      detail: facts,
    });
    return reply
      .header('content-disposition', `attachment; filename="coffer-support-bundle-${Date.now()}.json"`)
      .type('application/json')
      .send(JSON.stringify(bundle));
  };

  app.get(
    '/support/bundle',
    {
      onRequest: postureRead,
      config: { capability: 'posture.read', audit: { action: 'support-bundle-generate' } },
      schema: {
        summary: 'Download a fresh support bundle',
        operationId: 'getSupportBundle',
        tags: ['admin', 'support'],
      },
    },
    (request, reply) => bundleReply(request, reply),
  );

  app.post<{ Body: BundleBody }>(
    '/support/bundle',
    {
      onRequest: [postureRead, app.rateLimitCaller],
      bodyLimit: BUNDLE_BODY_LIMIT,
      config: { capability: 'posture.read', audit: { action: 'support-bundle-generate' } },
      schema: {
        summary: 'Generate a support bundle (optional bounded browser error ring, then discarded)',
        operationId: 'generateSupportBundle',
        tags: ['admin', 'support'],
        body: BundleBody,
      },
    },
    (request, reply) =>
      bundleReply(request, reply, (request.body?.browserErrors ?? []) as BrowserErrorInput[]),
  );

  app.post<{ Body: MintBody }>(
    '/support/credentials',
    {
      onRequest: [ownerOnly('credential-mint'), app.requireStepUp, app.rateLimitCaller],
      schema: {
        summary: 'Mint a pull credential for one scope (secret shown once; replaces the scope grant)',
        operationId: 'mintPullCredential',
        tags: ['admin', 'support'],
        body: MintBody,
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      const scope = request.body.scope as PullScope;
      // Under owner-action dual control a second owner carries it out (202 ownerActionQueued).
      const params = {
        scope,
        ...(request.body.lifetimeSeconds === undefined
          ? {}
          : { lifetimeSeconds: request.body.lifetimeSeconds }),
      };
      if (await queuedIfArmed(app, request, reply, 'credential-mint', params)) return reply;
      const minted = await mintCredential(ctx.state, scope, request.body.lifetimeSeconds, caller.email);
      await app.audit.forRequest(request, {
        action: 'credential-mint',
        outcome: 'applied',
        target: scope,
        detail: {
          scope,
          expiresAt: minted.expiresAt,
          lifetimeSeconds: minted.lifetimeSeconds,
          replaced: minted.replaced,
        },
      });
      app.events.raise({
        name: 'credential-minted',
        jobId: null,
        detail: {
          scope,
          clientId: minted.clientId,
          expiresAt: minted.expiresAt,
          lifetimeSeconds: minted.lifetimeSeconds,
          replaced: minted.replaced,
          by: caller.subject ?? 'admin-token',
          viaOwnerAction: false,
        },
      });
      return {
        ok: true,
        scope,
        clientId: minted.clientId,
        secret: minted.secret,
        credential: `${minted.clientId}.${minted.secret}`,
        expiresAt: minted.expiresAt,
        lifetimeSeconds: minted.lifetimeSeconds,
        grantedBy: minted.grantedBy,
        replaced: minted.replaced,
      };
    },
  );

  app.post<{ Body: RevokeBody }>(
    '/support/credentials/delete',
    {
      onRequest: [ownerOnly('credential-revoke'), app.rateLimitCaller],
      schema: {
        summary: 'Revoke the pull credential of one scope',
        operationId: 'revokePullCredential',
        tags: ['admin', 'support'],
        body: RevokeBody,
      },
    },
    async (request) => {
      const scope = request.body.scope as PullScope;
      const existed = await ctx.state.credentials.delete(scope);
      await app.audit.forRequest(request, {
        action: 'credential-revoke',
        outcome: 'applied',
        target: scope,
        detail: { scope, existed },
      });
      return { ok: true, scope, revoked: existed };
    },
  );
}
