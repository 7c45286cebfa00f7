/**
 * The Updates routes (specification "Updates" and "Update lifecycle"; docs/updates.md "Engine
 * routes", normative for bodies and statuses):
 * - `GET /admin/updates` (any authenticated caller): the channel check. Unconfigured answers
 *   `configured: false`; a channel that fails verification answers `verified: false` with its
 *   `code`; never an error status for a channel problem.
 * - `GET /admin/update/status` (`job.read`): the persisted record, floors, last accepted channel.
 * - `POST /admin/update/deploy-token` (`keys.ceremony`, step-up): mints the one-shot deploy token,
 *   shown once (updates/deploy-token.ts).
 * - `POST /admin/update/apply`, `settle`, `rollback`, `ramp`, `ramp/settle` (`keys.ceremony`,
 *   step-up, rate-limited, audited as `update-apply`, `update-settle`, `update-rollback`,
 *   `update-ramp`). A live apply or ramp (`dryRun: false`) and `ramp/settle` need the deploy token
 *   in `x-engine-deploy-token`, taken (used up) before anything else runs: 403
 *   `{ error: 'deploy token required', deployTokenRequired: true }` otherwise.
 * - `GET /admin/update/policy` (`job.read`) and `POST /admin/update/policy` (an owner, step-up):
 *   the update-approval policy (updates/approval.ts). A live apply (or, under `all`, a live ramp)
 *   that needs a second owner is queued as the owner action `update-apply` after its deploy token
 *   was taken and its approved-path dry run passed: 202 `{ outcome: 'queued', approval }`;
 *   lowering the policy from `all` is the owner action `update-policy` (202). Apply and ramp
 *   replies carry `approvalRequired`.
 * Outcomes: 200 `{ outcome, step, passed, record, ... }` for `no-update`, `dry-run`, `uploaded`
 * and settled outcomes; a refusal is 409 `{ error, outcome: 'refused', code, step, passed, record }`
 * (400 for a request the lifecycle calls malformed: ERR_UPDATE_INVALID_ARGUMENT,
 * ERR_UPDATE_UNKNOWN_COMPONENT, ERR_UPDATE_RAMP_CONSOLE). Audit details are docs/audit.md's for
 * each action (versions, components, outcomes, the refusal code or step); never the deploy token.
 */

import { isOwner } from '@coffer/authz';
import type { ApprovalRecord } from '@coffer/state';
import type { ComponentName } from '@coffer/update';
import { isUpdateError } from '@coffer/update';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden, sendStateUnavailable } from '../../plugins/replies.ts';
import {
  applyUnderPolicy,
  type PolicyDecision,
  queuedUpdate,
  readUpdatePolicy,
  resultBody,
  resultStatus,
  type UpdateApproval,
  type UpdateRequest,
  updateAuditDetail,
  writeUpdatePolicy,
} from '../../updates/approval.ts';
import { DEPLOY_TOKEN_HEADER, mintDeployToken, takeDeployToken } from '../../updates/deploy-token.ts';
import type { UpdateResult } from '../../updates/service.ts';
import { queueAudited } from './owner-actions.ts';

const Component = Type.Union([Type.Literal('engine'), Type.Literal('console')]);
const ReadBack = Type.Union([Type.Literal('warn'), Type.Literal('enforce')]);
const ApplyBody = Type.Object(
  {
    dryRun: Type.Optional(Type.Boolean()),
    components: Type.Optional(Type.Array(Component, { minItems: 1, maxItems: 2, uniqueItems: true })),
    allowDowngrade: Type.Optional(Type.Boolean()),
    readBack: Type.Optional(ReadBack),
  },
  { additionalProperties: false },
);
const RampBody = Type.Object(
  {
    percentage: Type.Integer({ minimum: 1, maximum: 100 }),
    dryRun: Type.Optional(Type.Boolean()),
    components: Type.Optional(Type.Array(Component, { minItems: 1, maxItems: 2, uniqueItems: true })),
    allowDowngrade: Type.Optional(Type.Boolean()),
    readBack: Type.Optional(ReadBack),
  },
  { additionalProperties: false },
);
const SettleBody = Type.Object(
  { verdict: Type.Union([Type.Literal('alive'), Type.Literal('dead'), Type.Literal('undecided')]) },
  { additionalProperties: false },
);
const RampSettleBody = Type.Object(
  { verdict: Type.Union([Type.Literal('alive'), Type.Literal('dead')]) },
  { additionalProperties: false },
);
const RollbackBody = Type.Object({ component: Type.Optional(Component) }, { additionalProperties: false });
const PolicyBody = Type.Object(
  { approval: Type.Union([Type.Literal('migrations'), Type.Literal('all')]) },
  { additionalProperties: false },
);

interface ApplyInput {
  dryRun?: boolean;
  components?: ComponentName[];
  allowDowngrade?: boolean;
  readBack?: 'warn' | 'enforce';
  percentage?: number;
}

export default async function updateRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string, body?: unknown) => ({
    schema: { summary, operationId, tags: ['admin', 'updates'], ...(body ? { body } : {}) },
  });
  const write = (action: 'update-apply' | 'update-settle' | 'update-rollback' | 'update-ramp') => ({
    onRequest: [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller],
    config: { capability: 'keys.ceremony' as const, audit: { action } },
    // A request without a body means the defaults (`{}`): a dry run, every component.
    preValidation: async (request: FastifyRequest) => {
      if (request.body === undefined || request.body === null) request.body = {};
    },
  });

  /**
   * The reply for a result: 200 for every outcome but a refusal (409, or 400 for bad input) and
   * `restarting` (202: accepted, and the engine restarts into the promoted program after this
   * reply).
   */
  const send = (reply: FastifyReply, r: UpdateResult, extra: Record<string, unknown> = {}) => {
    const { message, ...body } = resultBody(r);
    if (r.outcome !== 'refused') return reply.code(resultStatus(r)).send({ ...body, message, ...extra });
    return reply.code(resultStatus(r)).send({ error: message ?? 'update refused', ...body, ...extra });
  };

  /** An UpdateError thrown before the machine ran (bad request, wrong record shape): a refusal. */
  const thrown = (e: unknown): UpdateResult => {
    if (!isUpdateError(e)) throw e;
    return { outcome: 'refused', step: null, code: e.code, message: e.message, passed: [], record: null };
  };

  /** Takes the deploy token; false (and the 403 sent) when absent, wrong, used or expired. */
  const deployToken = async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    if (await takeDeployToken(app.state, request.headers[DEPLOY_TOKEN_HEADER], Date.now())) return true;
    request.log.info({ gate: 'deploy-token' }, 'deploy token refused');
    reply.code(403).send({ error: 'deploy token required', deployTokenRequired: true });
    return false;
  };

  app.get('/updates', meta('Check the update channel', 'getUpdates'), async () => app.updates.check());

  app.get(
    '/update/status',
    {
      onRequest: app.requireCapability('job.read'),
      config: { capability: 'job.read' as const },
      ...meta('The update lifecycle state and persisted outcome', 'getUpdateStatus'),
    },
    async () => app.updates.status(),
  );

  app.get(
    '/update/policy',
    {
      onRequest: app.requireCapability('job.read'),
      config: { capability: 'job.read' as const },
      ...meta('The update-approval policy and the updates awaiting a second owner', 'getUpdatePolicy'),
    },
    async (_request, reply) => {
      try {
        const policy = await readUpdatePolicy(app.state);
        const now = Date.now();
        const rows = await app.state.approvals.list({ kind: 'owner-action', status: ['pending'] });
        const pending = [];
        for (const r of rows) {
          const detail = r.detail as { action?: string; params?: unknown };
          const q = detail.action === 'update-apply' ? queuedUpdate(detail.params) : null;
          if (q === null || (r.expiresAt !== null && Date.parse(r.expiresAt) <= now)) continue;
          pending.push({
            id: r.id,
            kind: q.kind,
            version: q.version,
            to: q.to,
            channel: q.channel,
            percentage: q.percentage,
            requestedBy: r.requestedBy,
            requestedByEmail: r.requestedByEmail,
            requestedAt: r.requestedAt,
            expiresAt: r.expiresAt,
          });
        }
        return { ...policy, pending };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Body: { approval: UpdateApproval } }>(
    '/update/policy',
    {
      onRequest: [
        async (request: FastifyRequest, reply: FastifyReply) => {
          const caller = request.caller!;
          if (!isOwner(caller.authz)) sendForbidden(reply, 'owner', roleName(caller.role));
        },
        app.requireStepUp,
        app.rateLimitCaller,
      ],
      ...meta(
        'Set the update-approval policy (an owner; lowering it waits for a second owner)',
        'putUpdatePolicy',
        PolicyBody,
      ),
    },
    async (request, reply) => {
      const approval = request.body.approval;
      try {
        const previous = (await readUpdatePolicy(app.state)).approval;
        if (previous === 'all' && approval === 'migrations') {
          // Lowering the policy is itself an owner action (as disarming the owner-action gate).
          const queued = await queueAudited(app, request, 'update-policy', { approval });
          return reply.code(202).send({
            ownerActionQueued: true,
            id: queued.id,
            status: 'pending',
            expiresAt: queued.expiresAt,
            approval: previous,
            requested: approval,
          });
        }
        await writeUpdatePolicy(app.state, approval, request.caller!.subject ?? 'admin-token');
        await app.audit.forRequest(request, {
          action: 'owner-action-gate',
          outcome: 'applied',
          target: 'update-approval',
          detail: { updateApproval: approval, previous },
        });
        return { ok: true, approval, previous };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/update/deploy-token',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller],
      config: { capability: 'keys.ceremony' as const },
      ...meta('Mint the one-shot deploy token (shown once)', 'postUpdateDeployToken'),
    },
    async (request) => {
      const minted = await mintDeployToken(app.state, Date.now());
      request.log.info({ update: 'deploy-token-minted' }, 'deploy token minted');
      return {
        token: minted.token,
        header: DEPLOY_TOKEN_HEADER,
        expiresAt: new Date(minted.expiresAt).toISOString(),
      };
    },
  );

  const applyOrRamp = async (request: FastifyRequest, reply: FastifyReply, ramp: boolean) => {
    const body = (request.body ?? {}) as ApplyInput;
    const dryRun = body.dryRun ?? true;
    const action = ramp ? 'update-ramp' : 'update-apply';
    if (!dryRun && !(await deployToken(request, reply))) {
      await app.audit.forRequest(request, {
        action,
        outcome: 'refused',
        target: null,
        detail: ramp
          ? { percent: body.percentage ?? null, settled: false }
          : { dryRun, components: body.components ?? null, outcome: 'refused', reason: 'deploy-token' },
      });
      return reply;
    }
    // The update-approval policy (updates/approval.ts); unreadable counts as `all` (fail closed).
    let approval: UpdateApproval;
    try {
      approval = (await readUpdatePolicy(app.state)).approval;
    } catch {
      approval = 'all';
    }
    const input: UpdateRequest = {
      dryRun,
      ...(body.components !== undefined ? { components: body.components } : {}),
      ...(body.allowDowngrade !== undefined ? { allowDowngrade: body.allowDowngrade } : {}),
      ...(body.readBack !== undefined ? { readBack: body.readBack } : {}),
      ...(ramp ? { percentage: body.percentage! } : {}),
    };
    let d: PolicyDecision;
    try {
      d = await applyUnderPolicy(app.updates, input, approval);
    } catch (e) {
      d = { result: thrown(e), approvalRequired: false, queue: null };
    }
    const kind = ramp ? 'ramp' : 'apply';
    const r = d.result;
    if (d.queue !== null) {
      // A live request the policy holds for a second owner: queued, not carried out.
      const q = d.queue;
      let queued: ApprovalRecord;
      try {
        queued = await queueAudited(app, request, 'update-apply', { ...q });
      } catch {
        return sendStateUnavailable(reply);
      }
      await app.audit.forRequest(request, {
        action,
        outcome: 'queued',
        target: q.to.engine ?? null,
        detail: updateAuditDetail(kind, false, r, {
          percentage: q.percentage,
          approval: queued.id,
          outcome: 'queued',
          reason: null,
        }),
      });
      const { message: _dry, ...checked } = resultBody(r);
      return reply.code(202).send({
        ...checked,
        outcome: 'queued',
        step: 'approval',
        message: `a second owner approves this ${kind} (POST /admin/owner-actions/${queued.id}/approve)`,
        approvalRequired: true,
        ownerActionQueued: true,
        approval: {
          id: queued.id,
          action: 'update-apply',
          status: 'pending',
          requestedAt: queued.requestedAt,
          expiresAt: queued.expiresAt,
          kind: q.kind,
          version: q.version,
          to: q.to,
          channel: q.channel,
        },
      });
    }
    await app.audit.forRequest(request, {
      action,
      outcome: r.outcome === 'refused' ? 'refused' : 'applied',
      target: r.record?.to.engine ?? null,
      detail: updateAuditDetail(kind, dryRun, r, {
        components: body.components ?? null,
        percentage: body.percentage ?? null,
      }),
    });
    return send(reply, r, { approvalRequired: d.approvalRequired });
  };

  app.post(
    '/update/apply',
    {
      ...write('update-apply'),
      ...meta('Apply the recommended release (dry run by default)', 'postUpdateApply', ApplyBody),
    },
    async (request, reply) => applyOrRamp(request, reply, false),
  );

  app.post(
    '/update/ramp',
    {
      ...write('update-ramp'),
      ...meta('Gradual rollout of the engine (dry run by default)', 'postUpdateRamp', RampBody),
    },
    async (request, reply) => applyOrRamp(request, reply, true),
  );

  app.post<{ Body: { verdict: 'alive' | 'dead' | 'undecided' } }>(
    '/update/settle',
    {
      ...write('update-settle'),
      ...meta('Settle a promoted update with a canary verdict', 'postUpdateSettle', SettleBody),
    },
    async (request, reply) => {
      let r: UpdateResult;
      try {
        r = await app.updates.settle(request.body.verdict);
      } catch (e) {
        r = thrown(e);
      }
      await app.audit.forRequest(request, {
        action: 'update-settle',
        outcome: r.outcome === 'refused' ? 'refused' : 'applied',
        target: r.record?.to.engine ?? null,
        detail: { outcome: r.outcome },
      });
      return send(reply, r);
    },
  );

  app.post<{ Body: { verdict: 'alive' | 'dead' } }>(
    '/update/ramp/settle',
    {
      ...write('update-ramp'),
      ...meta('Settle a gradual rollout (needs the deploy token)', 'postUpdateRampSettle', RampSettleBody),
    },
    async (request, reply) => {
      if (!(await deployToken(request, reply))) {
        await app.audit.forRequest(request, {
          action: 'update-ramp',
          outcome: 'refused',
          target: null,
          detail: { percent: null, settled: false },
        });
        return reply;
      }
      let r: UpdateResult;
      try {
        r = await app.updates.settleRamp(request.body.verdict);
      } catch (e) {
        r = thrown(e);
      }
      await app.audit.forRequest(request, {
        action: 'update-ramp',
        outcome: r.outcome === 'refused' ? 'refused' : 'applied',
        target: r.record?.to.engine ?? null,
        detail: {
          percent: r.record?.ramp?.percentage ?? null,
          settled: r.outcome !== 'refused',
        },
      });
      return send(reply, r);
    },
  );

  app.post<{ Body: { component?: ComponentName } }>(
    '/update/rollback',
    {
      ...write('update-rollback'),
      ...meta('Roll back the last update, or one component', 'postUpdateRollback', RollbackBody),
    },
    async (request, reply) => {
      const component = request.body?.component;
      let r: UpdateResult;
      try {
        r = await app.updates.rollback(component);
      } catch (e) {
        r = thrown(e);
      }
      await app.audit.forRequest(request, {
        action: 'update-rollback',
        outcome: r.outcome === 'refused' ? 'refused' : 'applied',
        target: component ?? 'all',
        detail: {
          from: r.record ? (component ? (r.record.to[component] ?? null) : r.record.to) : null,
          to: r.record ? (component ? (r.record.from[component] ?? null) : r.record.from) : null,
        },
      });
      return send(reply, r);
    },
  );
}
