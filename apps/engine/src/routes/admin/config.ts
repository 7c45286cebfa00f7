/**
 * Configuration dual control and history (specification "Pending changes", "Control-plane
 * recovery" `GET /admin/config/history` and `/admin/config/version`, "Restore"
 * `GET /admin/retention-prune/approvals`; docs/config-control.md):
 * - `GET /admin/config/approval-policy` (`posture.read`): both policies, the bulk cap now, and
 *   pending policy lowerings;
 * - `POST /admin/config/approval-policy`, `POST /admin/retention-prune/approval-policy`
 *   (`keys.ceremony`, step-up) `{ enabled }`: turning a policy on applies at once (it only makes
 *   things stricter; config approval needs two people who hold `job.write`, else 409); turning it
 *   off while on is itself a pending change (`policy-disable`, 202) that another owner approves;
 * - `GET /admin/config/changes` (`posture.read`, `?status=`): pending and decided changes;
 * - `POST /admin/config/changes/<id>/approve`: a person with a subject other than the proposer's,
 *   holding the change's write capability (re-read at the commit point); a `policy-disable`
 *   needs an owner and step-up. `/reject`: the proposer (withdraw) or a holder of that capability;
 * - `GET /admin/retention-prune/approvals` (any auth): the pending prune approvals;
 * - `GET /admin/config/history` (`posture.read`, `?limit=&before=`), `GET /admin/config/version`
 *   (`posture.read`, `?id=`): the signed, hash-chained versions; a break is reported in the body.
 * Every proposal, approval (refusals at the commit point included) and rejection is audited.
 */
import { forbiddenBody } from '@coffer/authz';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  type ApproveResult,
  approve,
  type ChangeDeps,
  type ConfigChange,
  checkChain,
  effectiveStatus,
  getChange,
  holds,
  listChanges,
  listPrunes,
  listVersions,
  MAX_BATCH_UNDER_APPROVAL,
  POLICY_ACTIONS,
  type PolicyName,
  policyAction,
  policyOf,
  propose,
  readPolicy,
  recordConfigVersion,
  recordFault,
  reject,
  requiredFor,
  type StoredVersion,
  signatureValid,
  versionKey,
  writePolicy,
} from '../../config-changes/index.ts';
import { checkJobSource } from '../../connections/resolve.ts';
import { MAX_BATCH } from '../../jobs/index.ts';
import { roleName } from '../../plugins/auth.ts';
import { sendBadRequest, sendStateUnavailable } from '../../plugins/replies.ts';
import { roleMembers } from '../../state/index.ts';
import { personOf } from './jobs/index.ts';
import { refusalBody } from './jobs/preconditions.ts';

const STATUSES = ['pending', 'applied', 'rejected', 'refused', 'expired'] as const;
const HISTORY_DEFAULT = 50;
const HISTORY_MAX = 500;

/** The public view of a change (job configurations hold no secret; names of fields, never old values). */
function view(c: ConfigChange) {
  return {
    id: c.id,
    kind: c.kind,
    target: c.target,
    status: effectiveStatus(c),
    proposedBy: c.proposedBy,
    proposedAt: c.proposedAt,
    expiresAt: c.expiresAt,
    ...(Object.hasOwn(c, 'ifMatchRev') ? { ifMatchRev: c.ifMatchRev } : {}),
    baseRev: c.baseRev,
    changedFields: c.changedFields,
    config: c.config,
    decidedBy: c.decidedBy ?? null,
    decidedAt: c.decidedAt ?? null,
    reason: c.reason ?? null,
    configRev: c.configRev ?? null,
    version: c.version ?? null,
  };
}

const jobIdOf = (c: ConfigChange) => (c.kind === 'policy-disable' ? null : c.target);

const positiveInt = (v: unknown): number | null =>
  typeof v === 'string' && /^[1-9][0-9]{0,14}$/.test(v) ? Number(v) : null;

export default async function configRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'config'] },
  });
  const read = [app.requireCapability('posture.read')];
  const deps = (): ChangeDeps => ({
    state: app.state,
    signer: app.keys.signer,
    destinations: app.destinations,
    log: app.log,
    checkSource: (job) => {
      const c = app.config;
      const paths = [
        c.dataDir,
        c.signerKeyFile,
        c.operationalKeyFile,
        c.tls?.keyFile,
        c.connections.file,
      ].filter((p): p is string => typeof p === 'string');
      return checkJobSource(job.source as { type: string }, c.connections, paths);
    },
  });

  // -------------------------------------------------------------------------------------------
  // Policies

  app.get(
    '/config/approval-policy',
    {
      onRequest: read,
      config: { capability: 'posture.read' as const },
      ...meta('The configuration and retention-prune approval policies', 'getConfigApprovalPolicy'),
    },
    async (_request, reply) => {
      try {
        const config = await readPolicy(app.state, 'config-approval');
        const prune = await readPolicy(app.state, 'retention-prune-approval');
        const pending = (await listChanges(app.state))
          .filter((c) => c.kind === 'policy-disable' && effectiveStatus(c) === 'pending')
          .map(view);
        return {
          configApproval: config,
          retentionPruneApproval: prune,
          maxBatch: config.enabled ? MAX_BATCH_UNDER_APPROVAL : MAX_BATCH,
          pending,
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  /** Sets one policy; turning it off while on is held for another owner. */
  async function setPolicy(
    request: FastifyRequest<{ Body: { enabled: boolean } }>,
    reply: FastifyReply,
    name: PolicyName,
  ) {
    const caller = request.caller!;
    const enabled = request.body.enabled;
    const action = POLICY_ACTIONS[name];
    try {
      const previous = await readPolicy(app.state, name);
      if (previous.enabled === enabled) {
        await app.audit.forRequest(request, {
          action,
          outcome: 'applied',
          detail: { enabled, changed: false },
        });
        return { ok: true, enabled, changed: false };
      }
      if (!enabled) {
        const change = await propose(app.state, {
          kind: 'policy-disable',
          target: name,
          baseRev: null,
          changedFields: ['enabled'],
          config: { policy: name, enabled: false },
          proposedBy: personOf(caller),
          hasIfMatchRev: false,
        });
        await app.audit.forRequest(request, {
          action: 'config-change-proposed',
          outcome: 'queued',
          target: change.id,
          detail: { kind: 'policy-disable', jobId: null, policy: name, changedFields: ['enabled'] },
        });
        await app.audit.forRequest(request, {
          action,
          outcome: 'queued',
          target: change.id,
          detail: { enabled: false },
        });
        return reply.code(202).send({
          ok: true,
          pending: true,
          changeId: change.id,
          status: 'pending',
          kind: 'policy-disable',
          enabled: true,
          requested: false,
          expiresAt: change.expiresAt,
        });
      }
      if (name === 'config-approval') {
        // Without two people who may write jobs, no change could ever be approved.
        const writers = (await roleMembers(app.state)).filter((m) => holds({ role: m.role }, 'job.write'));
        if (writers.length < 2) {
          await app.audit.forRequest(request, {
            action,
            outcome: 'refused',
            detail: { enabled: true, reason: 'too-few-writers', writers: writers.length },
          });
          return reply.code(409).send({
            error: 'configuration approval needs at least two people who hold job.write',
            writers: writers.length,
          });
        }
      }
      const value = await writePolicy(app.state, name, true, caller.subject ?? 'admin-token');
      try {
        await recordConfigVersion(
          { state: app.state, signer: app.keys.signer },
          {
            kind: action,
            target: name,
            actor: personOf(caller),
            configRev: null,
            changedFields: ['enabled'],
            config: { policy: name, enabled: value.enabled },
          },
        );
      } catch (err) {
        request.log.error(
          { code: (err as { code?: string }).code ?? 'ERR_UNKNOWN' },
          'config history append failed',
        );
      }
      await app.audit.forRequest(request, {
        action,
        outcome: 'applied',
        detail: { enabled: true, changed: true },
      });
      return { ok: true, enabled: true, changed: true };
    } catch {
      return sendStateUnavailable(reply);
    }
  }

  const policyBody = {
    type: 'object',
    required: ['enabled'],
    additionalProperties: false,
    properties: { enabled: { type: 'boolean' } },
  } as const;
  const ownerGate = [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller];

  app.post<{ Body: { enabled: boolean } }>(
    '/config/approval-policy',
    {
      onRequest: ownerGate,
      config: { capability: 'keys.ceremony' as const, audit: { action: 'config-approval-policy' } },
      schema: {
        summary: 'Turn configuration approval on (at once) or off (held for another owner)',
        operationId: 'setConfigApprovalPolicy',
        tags: ['admin', 'config'],
        body: policyBody,
      },
    },
    (request, reply) => setPolicy(request, reply, 'config-approval'),
  );

  app.post<{ Body: { enabled: boolean } }>(
    '/retention-prune/approval-policy',
    {
      onRequest: ownerGate,
      config: { capability: 'keys.ceremony' as const, audit: { action: 'retention-prune-approval-policy' } },
      schema: {
        summary:
          'Put retention prunes under dual control (at once) or take them out (held for another owner)',
        operationId: 'setRetentionPruneApprovalPolicy',
        tags: ['admin', 'config'],
        body: policyBody,
      },
    },
    (request, reply) => setPolicy(request, reply, 'retention-prune-approval'),
  );

  // -------------------------------------------------------------------------------------------
  // Pending changes

  app.get<{ Querystring: { status?: string } }>(
    '/config/changes',
    {
      onRequest: read,
      config: { capability: 'posture.read' as const },
      ...meta('Pending and decided configuration changes, newest first', 'listConfigChanges'),
    },
    async (request, reply) => {
      const wanted = request.query.status;
      if (wanted !== undefined && !(STATUSES as readonly string[]).includes(wanted))
        return sendBadRequest(reply, `status must be one of ${STATUSES.join(', ')}`);
      try {
        const all = (await listChanges(app.state)).map(view);
        return { changes: wanted === undefined ? all : all.filter((c) => c.status === wanted) };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.get(
    '/retention-prune/approvals',
    { ...meta('Retention prunes waiting for a second person', 'listRetentionPruneApprovals') },
    async (_request, reply) => {
      try {
        const policy = await readPolicy(app.state, 'retention-prune-approval');
        const approvals = (await listPrunes(app.state)).map((c) => {
          const destinations = (c.config as { destinations: Record<string, string[]> }).destinations;
          return {
            id: c.id,
            job: c.target,
            status: effectiveStatus(c),
            plannedAt: c.proposedAt,
            expiresAt: c.expiresAt,
            destinations,
            runs: new Set(Object.values(destinations).flat()).size,
          };
        });
        return { enabled: policy.enabled, approvals };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  /** The audit detail of a decision on `c`. */
  const decisionDetail = (c: ConfigChange, extra: Record<string, unknown> = {}) => ({
    kind: c.kind,
    jobId: jobIdOf(c),
    ...(c.kind === 'policy-disable' ? { policy: policyOf(c) } : {}),
    ...extra,
  });

  app.post<{ Params: { id: string } }>(
    '/config/changes/:id/approve',
    {
      onRequest: [app.rateLimitCaller],
      ...meta('Approve and apply a pending configuration change (another person)', 'approveConfigChange'),
    },
    async (request, reply) => {
      const caller = request.caller!;
      let change: ConfigChange | null;
      try {
        change = await getChange(app.state, request.params.id);
      } catch {
        return sendStateUnavailable(reply);
      }
      if (change === null) return reply.code(404).send({ error: 'no such configuration change' });
      const required = requiredFor(change);
      const refuse = async (status: number, body: object, reason: string) => {
        await app.audit.forRequest(request, {
          action: 'config-change-approved',
          outcome: 'refused',
          target: change.id,
          detail: decisionDetail(change, { reason }),
        });
        return reply.code(status).send(body);
      };
      if (caller.subject === null)
        return refuse(
          403,
          {
            error: 'the admin token has no subject: a signed-in person approves',
            required,
            have: 'admin-token',
          },
          'no-subject',
        );
      if (change.proposedBy.subject === caller.subject)
        return refuse(403, { error: 'maker is not checker: another person approves' }, 'maker-is-checker');
      if (!holds(caller.authz, required))
        return refuse(
          403,
          required === 'owner'
            ? { error: 'forbidden', required: 'owner', have: roleName(caller.role) }
            : forbiddenBody(required, caller.authz),
          'capability',
        );
      if (change.kind === 'policy-disable') {
        await app.requireStepUp(request, reply);
        if (reply.sent) return reply;
      }
      let result: ApproveResult;
      try {
        result = await approve(deps(), change, personOf(caller));
      } catch (err) {
        request.log.error(
          { code: (err as { code?: string }).code ?? 'ERR_UNKNOWN' },
          'config change approve failed',
        );
        return sendStateUnavailable(reply);
      }
      const approver = { subject: caller.subject, email: caller.email };
      switch (result.outcome) {
        case 'not-pending':
          return reply
            .code(409)
            .send({ error: 'the configuration change is not pending', id: change.id, status: result.status });
        case 'forbidden':
          return refuse(
            403,
            required === 'owner'
              ? { error: 'forbidden', required: 'owner', have: roleName(caller.role) }
              : {
                  error: 'forbidden',
                  required: result.required,
                  have: roleName(caller.role),
                  atCommit: true,
                },
            'capability',
          );
        case 'refused': {
          await app.audit.forRequest(request, {
            action: 'config-change-approved',
            outcome: 'refused',
            target: change.id,
            approver,
            detail: decisionDetail(change, { reason: result.reason }),
          });
          const pre = result.detail as { reason?: string } | undefined;
          const isPrecondition =
            pre !== undefined && typeof pre === 'object' && 'currentRev' in (pre as object) && pre.reason;
          return reply.code(409).send({
            ...(isPrecondition
              ? refusalBody(
                  result.detail as Parameters<typeof refusalBody>[0],
                  Object.hasOwn(change, 'ifMatchRev') ? change.ifMatchRev : undefined,
                )
              : { error: `the change cannot be applied now (${result.reason})` }),
            id: change.id,
            status: 'refused',
            reason: result.reason,
            ...(result.reason === 'capability' && result.detail ? { detail: result.detail } : {}),
          });
        }
        case 'applied': {
          const c = result.change;
          await app.audit.forRequest(request, {
            action: 'config-change-approved',
            outcome: 'applied',
            target: c.id,
            approver,
            detail: decisionDetail(c, {
              configRev: c.configRev ?? null,
              ...(result.prune ? { pruned: result.prune.pruned.length } : {}),
            }),
          });
          if (c.kind === 'job-upsert' || c.kind === 'job-delete')
            await app.audit.forRequest(request, {
              action: c.kind,
              outcome: 'applied',
              target: c.target,
              approver,
              detail:
                c.kind === 'job-upsert'
                  ? { configRev: c.configRev ?? null, changedFields: c.changedFields, approval: c.id }
                  : { deletedRev: c.configRev ?? null, approval: c.id },
            });
          const pa = policyAction(c);
          if (c.kind === 'policy-disable' && pa)
            await app.audit.forRequest(request, {
              action: pa,
              outcome: 'applied',
              target: c.id,
              approver,
              detail: { enabled: false, changed: true },
            });
          return {
            ok: true,
            id: c.id,
            status: 'applied',
            kind: c.kind,
            target: c.target,
            configRev: c.configRev ?? null,
            version: result.version?.id ?? null,
            ...(result.prune ? { pruned: result.prune.pruned, held: result.prune.held ?? null } : {}),
          };
        }
      }
    },
  );

  app.post<{ Params: { id: string } }>(
    '/config/changes/:id/reject',
    {
      onRequest: [app.rateLimitCaller],
      ...meta('Reject (or withdraw) a pending configuration change', 'rejectConfigChange'),
    },
    async (request, reply) => {
      const caller = request.caller!;
      try {
        const change = await getChange(app.state, request.params.id);
        if (change === null) return reply.code(404).send({ error: 'no such configuration change' });
        const own = caller.subject !== null && change.proposedBy.subject === caller.subject;
        const required = requiredFor(change);
        if (!own && !holds(caller.authz, required)) {
          await app.audit.forRequest(request, {
            action: 'config-change-rejected',
            outcome: 'refused',
            target: change.id,
            detail: decisionDetail(change, { reason: 'capability', required }),
          });
          return reply
            .code(403)
            .send(
              required === 'owner'
                ? { error: 'forbidden', required: 'owner', have: roleName(caller.role) }
                : forbiddenBody(required, caller.authz),
            );
        }
        const rejected = await reject(deps(), change, personOf(caller));
        if (rejected === null)
          return reply.code(409).send({
            error: 'the configuration change is not pending',
            id: change.id,
            status: effectiveStatus(change),
          });
        await app.audit.forRequest(request, {
          action: 'config-change-rejected',
          outcome: 'applied',
          target: change.id,
          detail: decisionDetail(change, own ? { withdrawn: true } : {}),
        });
        return { ok: true, id: change.id, status: 'rejected' };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  // -------------------------------------------------------------------------------------------
  // History

  app.get<{ Querystring: { limit?: string; before?: string } }>(
    '/config/history',
    {
      onRequest: read,
      config: { capability: 'posture.read' as const },
      ...meta(
        'Signed configuration versions, newest first, with the chain head and check',
        'getConfigHistory',
      ),
    },
    async (request, reply) => {
      const q = request.query;
      const limit = q.limit === undefined ? HISTORY_DEFAULT : positiveInt(q.limit);
      if (limit === null || limit > HISTORY_MAX)
        return sendBadRequest(reply, `limit must be an integer from 1 to ${HISTORY_MAX}`);
      const before = q.before === undefined ? null : positiveInt(q.before);
      if (q.before !== undefined && before === null)
        return sendBadRequest(reply, 'before must be a positive integer version id');
      try {
        const all = await listVersions(app.state);
        const chain = await checkChain(app.state, app.keys.signer.publicKey, all);
        const ids = [...all.keys()].filter((id) => before === null || id < before).sort((a, b) => b - a);
        const page = ids.slice(0, limit);
        const versions = page.map((id) => {
          const v = all.get(id) as StoredVersion;
          const fault = recordFault(v, id, app.keys.signer.publicKey);
          return { ...(v?.record ?? { id }), verified: fault === null, ...(fault ? { fault } : {}) };
        });
        const more = ids.length > limit;
        return {
          head: chain.head,
          chain: {
            ok: chain.ok,
            checked: chain.checked,
            ...(chain.ok ? {} : { brokenAt: chain.brokenAt, reason: chain.reason }),
          },
          versions,
          nextBefore: more ? page[page.length - 1] : null,
          signer: { fingerprint: app.keys.signer.fingerprint },
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.get<{ Querystring: { id?: string } }>(
    '/config/version',
    {
      onRequest: read,
      config: { capability: 'posture.read' as const },
      ...meta('One signed configuration version with the configuration it recorded', 'getConfigVersion'),
    },
    async (request, reply) => {
      const id = positiveInt(request.query.id);
      if (id === null) return sendBadRequest(reply, 'id must be a positive integer version id');
      let stored: unknown;
      try {
        stored = await app.state.settings.get(versionKey(id));
      } catch {
        return sendStateUnavailable(reply);
      }
      if (stored === undefined) return reply.code(404).send({ error: 'no such configuration version' });
      const v = stored as StoredVersion;
      const fault = recordFault(v, id, app.keys.signer.publicKey);
      return {
        record: v.record ?? null,
        config: v.config ?? null,
        signature: v.signature ?? null,
        signer: v.signer ?? null,
        verification: {
          ok: fault === null,
          signature:
            typeof v.signature === 'string' && v.record
              ? signatureValid(v, app.keys.signer.publicKey)
              : false,
          ...(fault ? { fault } : {}),
          context: 'coffer/config-version/v1',
        },
      };
    },
  );
}
