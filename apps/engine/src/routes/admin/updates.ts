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
 * Outcomes: 200 `{ outcome, step, passed, record, ... }` for `no-update`, `dry-run`, `uploaded`
 * and settled outcomes; a refusal is 409 `{ error, outcome: 'refused', code, step, passed, record }`
 * (400 for a request the lifecycle calls malformed: ERR_UPDATE_INVALID_ARGUMENT,
 * ERR_UPDATE_UNKNOWN_COMPONENT, ERR_UPDATE_RAMP_CONSOLE). Audit details are docs/audit.md's for
 * each action (versions, components, outcomes, the refusal code or step); never the deploy token.
 */
import type { ComponentName } from '@coffer/update';
import { isUpdateError } from '@coffer/update';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { DEPLOY_TOKEN_HEADER, mintDeployToken, takeDeployToken } from '../../updates/deploy-token.ts';
import { isInputCode, type UpdateResult } from '../../updates/service.ts';

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

  /** The reply for a result: 200 for every outcome but a refusal (409, or 400 for bad input). */
  const send = (reply: FastifyReply, r: UpdateResult) => {
    const body = {
      outcome: r.outcome,
      step: r.step,
      code: r.code,
      passed: r.passed,
      record: r.record,
      ...(r.orchestrator ? { orchestrator: r.orchestrator } : {}),
    };
    if (r.outcome !== 'refused') return reply.code(200).send({ ...body, message: r.message });
    return reply
      .code(isInputCode(r.code) ? 400 : 409)
      .send({ error: r.message ?? 'update refused', ...body });
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
    let r: UpdateResult;
    try {
      r = await app.updates.apply({
        dryRun,
        ...(body.components !== undefined ? { components: body.components } : {}),
        ...(body.allowDowngrade !== undefined ? { allowDowngrade: body.allowDowngrade } : {}),
        ...(body.readBack !== undefined ? { readBack: body.readBack } : {}),
        ...(ramp ? { percentage: body.percentage! } : {}),
      });
    } catch (e) {
      r = thrown(e);
    }
    const target = r.record?.to.engine ?? null;
    await app.audit.forRequest(request, {
      action,
      outcome: r.outcome === 'refused' ? 'refused' : 'applied',
      target,
      detail: ramp
        ? { percent: body.percentage ?? null, settled: false }
        : {
            dryRun,
            components: r.record?.components ?? body.components ?? null,
            outcome: r.outcome,
            reason: r.code ?? (r.outcome === 'refused' ? r.step : null),
          },
    });
    return send(reply, r);
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
