/**
 * Control-plane recovery (specification "Control-plane recovery"; docs/control-plane.md is
 * normative for the bodies):
 * - `GET /admin/control-plane/status` (any authenticated caller, the bare admin token included,
 *   before any owner exists): `{ recoveryNeeded, reasons, empty, counts, signerFingerprint,
 *   breakGlassKey, staged }`.
 * - `GET /admin/control-plane/export-download` (`access.policy`): the signed export, built on
 *   demand; `?sealed=1`: the sealed artefact (409 without a break-glass key). Audited
 *   `control-plane-export`. An export that would carry a plaintext secret is refused (409, `path`).
 * - `POST /admin/control-plane/restore`, `restore-sealed`, `apply-staged`: the bare admin token
 *   only (a session, even one made from the token, or a person: 403), then the per-caller rate
 *   limit; restore needs an empty engine (409). Audited `control-plane-restore` and
 *   `control-plane-apply-staged`.
 * - `POST /admin/control-plane/import`, `import-sealed` (`access.policy`, then the rate limit):
 *   verified against the operator-supplied signer public key; no authority, no policy, no run
 *   history; jobs of another signer arrive disabled; existing ids reported, never overwritten.
 *   Audited `control-plane-import`.
 */

import { sha384Digest } from '@coffer/crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { type TSchema, Type } from 'typebox';
import { bodyOf, ControlPlaneService, type Refusal, summaryOf } from '../../control-plane/index.ts';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden } from '../../plugins/replies.ts';
import { personOf } from './jobs/index.ts';

/** Exports carry whole run-history rings; 32 MiB holds thousands of jobs. */
export const CONTROL_PLANE_BODY_LIMIT = 32 * 1024 * 1024;

const Signed = {
  v: Type.Optional(Type.Literal(1)),
  kind: Type.Optional(Type.Literal('coffer-control-plane-signed-export')),
  signerFingerprint: Type.Optional(Type.String({ maxLength: 200 })),
  export: Type.String({ minLength: 2, maxLength: CONTROL_PLANE_BODY_LIMIT }),
  signature: Type.String({ minLength: 1, maxLength: 16384 }),
};
const Sealed = {
  sealed: Type.Object({}, { additionalProperties: true }),
  plaintext: Type.Object({}, { additionalProperties: true }),
};
const RestoreBody = Type.Object(Signed, { additionalProperties: false });
const SealedBody = Type.Object(Sealed, { additionalProperties: false });
const SignerKey = Type.String({ minLength: 32, maxLength: 16384 });
const ImportBody = Type.Object({ ...Signed, signerPublicKey: SignerKey }, { additionalProperties: false });
const ImportSealedBody = Type.Object(
  { ...Sealed, signerPublicKey: SignerKey },
  { additionalProperties: false },
);
const ExportQuery = Type.Object(
  { sealed: Type.Optional(Type.Union(['0', '1', 'true', 'false'].map((v) => Type.Literal(v)))) },
  { additionalProperties: false },
);

type SignedBody = { export: string; signature: string };

function refuse(reply: FastifyReply, r: Refusal): FastifyReply {
  return reply
    .code(r.status)
    .send(r.path === undefined ? { error: r.error } : { error: r.error, path: r.path });
}

export default async function controlPlaneRoutes(app: FastifyInstance): Promise<void> {
  const service = new ControlPlaneService({
    state: app.state,
    keys: app.keys,
    config: app.config,
    destinations: app.destinations,
  });

  /** Audits a refusal (reason and JSON path, never a value) and sends it. */
  const refuseAudited = async (
    request: FastifyRequest,
    reply: FastifyReply,
    action:
      | 'control-plane-export'
      | 'control-plane-restore'
      | 'control-plane-apply-staged'
      | 'control-plane-import',
    r: Refusal,
    sealed?: boolean,
  ): Promise<FastifyReply> => {
    await app.audit.forRequest(request, {
      action,
      outcome: 'refused',
      target: null,
      detail: {
        ...(sealed === undefined ? {} : { sealed }),
        reason: r.error,
        ...(r.path ? { path: r.path } : {}),
      },
    });
    return refuse(reply, r);
  };
  await service.recordBirth().catch((err: unknown) => {
    app.log.warn({ code: (err as { code?: string }).code }, 'control-plane birth marker not written');
  });
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'control-plane'] },
  });
  /** A POST route's options: its gate, then `meta`'s schema with the body added. */
  const posting = <G extends object>(gate: G, summary: string, operationId: string, body: TSchema) => ({
    ...gate,
    schema: { ...meta(summary, operationId).schema, body },
  });

  /** The bare admin token only: no session (not even one made from the token), no person. */
  const bareTokenOnly = async (request: FastifyRequest, reply: FastifyReply) => {
    if (reply.sent) return;
    const caller = request.caller;
    if (caller?.method !== 'admin-token') {
      await app.audit.forRequest(request, {
        action: request.url.includes('apply-staged') ? 'control-plane-apply-staged' : 'control-plane-restore',
        outcome: 'refused',
        target: null,
        detail: { reason: 'bare admin token only' },
      });
      return void sendForbidden(reply, 'bare admin token', caller ? roleName(caller.role) : 'none');
    }
  };
  const bare = { onRequest: [bareTokenOnly, app.rateLimitCaller], bodyLimit: CONTROL_PLANE_BODY_LIMIT };
  const policyGate = {
    onRequest: [app.requireCapability('access.policy'), app.rateLimitCaller],
    config: { capability: 'access.policy' as const, audit: { action: 'control-plane-import' as const } },
    bodyLimit: CONTROL_PLANE_BODY_LIMIT,
  };

  app.get(
    '/control-plane/status',
    meta(
      'Whether control-plane recovery is needed, why, and whether the engine is empty',
      'getControlPlaneStatus',
    ),
    async () => service.status(),
  );

  app.get<{ Querystring: { sealed?: string } }>(
    '/control-plane/export-download',
    {
      onRequest: app.requireCapability('access.policy'),
      config: { capability: 'access.policy', audit: { action: 'control-plane-export' } },
      schema: {
        summary: 'Download a signed (or sealed) control-plane export built now',
        operationId: 'getControlPlaneExportDownload',
        tags: ['admin', 'control-plane'],
        querystring: ExportQuery,
      },
    },
    async (request, reply) => {
      const sealed = request.query.sealed === '1' || request.query.sealed === 'true';
      const built = sealed ? await service.buildSealed() : await service.buildSigned();
      if (!built.ok) return refuseAudited(request, reply, 'control-plane-export', built, sealed);
      const summary = summaryOf(built.doc);
      const body = 'sealed' in built ? built.sealed : built.signed;
      const bodyHash = 'sealed' in built ? built.sealed.header.bodyHash : sha384Digest(bodyOf(built.signed));
      await app.audit.forRequest(request, {
        action: 'control-plane-export',
        outcome: 'applied',
        target: null,
        detail: { sealed, bodyHash, jobs: summary.jobs },
      });
      const stamp = built.doc.exportedAt.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
      reply.header(
        'content-disposition',
        `attachment; filename="coffer-control-plane-${stamp}${sealed ? '.sealed' : ''}.json"`,
      );
      reply.header('cache-control', 'no-store');
      return body;
    },
  );

  const restoreReply = async (
    request: FastifyRequest,
    reply: FastifyReply,
    result: Awaited<ReturnType<ControlPlaneService['restore']>>,
    sealed: boolean,
  ) => {
    if (!result.ok) return refuseAudited(request, reply, 'control-plane-restore', result, sealed);
    const { doc, configuration } = result;
    await app.audit.forRequest(request, {
      action: 'control-plane-restore',
      outcome: 'applied',
      target: null,
      detail: { sealed, signerFingerprint: doc.signerFingerprint, jobs: configuration.jobs.length },
    });
    const s = summaryOf(doc);
    return {
      ok: true,
      sealed,
      signerFingerprint: doc.signerFingerprint,
      exportedAt: doc.exportedAt,
      applied: {
        jobs: configuration.jobs,
        channels: configuration.channels.applied,
        rules: configuration.rules.applied,
        policies: configuration.policies,
        pins: configuration.pins,
        runs: result.runs,
      },
      historyFailures: result.historyFailures,
      staged: {
        resume: { jobs: doc.slices.resume.jobs.length, runs: s.runs },
        authority: { members: s.members, customRoles: s.customRoles },
      },
      next: 'POST /admin/control-plane/apply-staged',
    };
  };

  app.post<{ Body: SignedBody }>(
    '/control-plane/restore',
    posting(
      bare,
      'Restore a signed control-plane export into this empty engine (bare admin token)',
      'postControlPlaneRestore',
      RestoreBody,
    ),
    async (request, reply) => restoreReply(request, reply, await service.restore(request.body, false), false),
  );

  app.post<{ Body: { sealed: unknown; plaintext: unknown } }>(
    '/control-plane/restore-sealed',
    posting(
      bare,
      'Restore a sealed export with its plaintext opened off-engine (bare admin token)',
      'postControlPlaneRestoreSealed',
      SealedBody,
    ),
    async (request, reply) =>
      restoreReply(
        request,
        reply,
        await service.restoreSealed(request.body.sealed, request.body.plaintext),
        true,
      ),
  );

  app.post(
    '/control-plane/apply-staged',
    {
      ...bare,
      ...meta(
        'Re-verify and apply the staged resume and authority slices (bare admin token)',
        'postControlPlaneApplyStaged',
      ),
    },
    async (request, reply) => {
      const result = await service.applyStaged();
      if (!result.ok) return refuseAudited(request, reply, 'control-plane-apply-staged', result);
      await app.audit.forRequest(request, {
        action: 'control-plane-apply-staged',
        outcome: 'applied',
        target: null,
        detail: { jobs: result.doc.slices.resume.jobs.length, members: result.members },
      });
      return {
        ok: true,
        applied: {
          resume: { jobs: result.doc.slices.resume.jobs.length, runs: result.runs },
          authority: { members: result.members, customRoles: result.customRoles, policies: result.policies },
        },
      };
    },
  );

  const importReply = async (
    request: FastifyRequest,
    reply: FastifyReply,
    result: Awaited<ReturnType<ControlPlaneService['import']>>,
    sealed: boolean,
  ) => {
    if (!result.ok) return refuseAudited(request, reply, 'control-plane-import', result, sealed);
    const { doc, configuration, sameSigner } = result;
    const disabled = configuration.jobs.filter((j) => j.outcome === 'imported' && !j.enabled).length;
    await app.audit.forRequest(request, {
      action: 'control-plane-import',
      outcome: 'applied',
      target: null,
      detail: { sealed, signerFingerprint: doc.signerFingerprint, jobs: configuration.jobs.length, disabled },
    });
    return {
      ok: true,
      sealed,
      signerFingerprint: doc.signerFingerprint,
      sameSigner,
      heldByApproval: result.heldByApproval,
      historyFailures: result.historyFailures,
      items: configuration.jobs,
      channels: configuration.channels,
      rules: configuration.rules,
      ignored: ['authority', 'resume', 'policies', 'retention'],
    };
  };

  app.post<{ Body: SignedBody & { signerPublicKey: string } }>(
    '/control-plane/import',
    posting(
      policyGate,
      "Import another engine's signed export (no authority; foreign jobs disabled)",
      'postControlPlaneImport',
      ImportBody,
    ),
    async (request, reply) =>
      importReply(
        request,
        reply,
        await service.import(request.body, request.body.signerPublicKey, false, personOf(request.caller!)),
        false,
      ),
  );

  app.post<{ Body: { sealed: unknown; plaintext: unknown; signerPublicKey: string } }>(
    '/control-plane/import-sealed',
    posting(
      policyGate,
      "Import another engine's sealed export with its plaintext opened off-engine",
      'postControlPlaneImportSealed',
      ImportSealedBody,
    ),
    async (request, reply) =>
      importReply(
        request,
        reply,
        await service.importSealed(
          request.body.sealed,
          request.body.plaintext,
          request.body.signerPublicKey,
          personOf(request.caller!),
        ),
        true,
      ),
  );
}
