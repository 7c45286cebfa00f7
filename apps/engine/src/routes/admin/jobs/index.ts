/**
 * The jobs routes (specification "Jobs and runs"): `GET /admin/jobs` (any authenticated caller),
 * `POST /admin/jobs` (`job.write`, whole-object upsert with `ifMatchRev`), `POST /admin/jobs/bulk`
 * (`job.write`, continue-on-error, index-aligned outcomes, at most MAX_BATCH items or the whole
 * batch is refused with `maxBatch`) and `POST /admin/jobs/delete` (`job.delete`, `deletedRev`).
 *
 * Every POST runs: authentication -> capability gate -> per-caller rate limit -> validation ->
 * handler. The `ifMatchRev` precondition is decided by @coffer/state inside the write's
 * transaction (preconditions.ts maps its refusals to 409), and a change of the restore-test
 * cadence additionally needs `scheduledtest.config`, checked against the stored value inside that
 * same transaction (see `upsert`).
 */
import { can, forbiddenBody } from '@coffer/authz';
import { isStateError, type JobRecord, type State } from '@coffer/state';
import type { FastifyInstance } from 'fastify';
import { Compile } from 'typebox/compile';
import type { RequestAuditEvent } from '../../../audit/index.ts';
import { checkJobSource, inlineFieldRefusal, type JobRefusal } from '../../../connections/resolve.ts';
import {
  BulkBody,
  DeleteBody,
  type JobConfig,
  MAX_BATCH,
  normaliseJob,
  UpsertBody,
} from '../../../jobs/index.ts';
import type { EngineCaller } from '../../../plugins/auth.ts';
import { runObjects } from '../../../runs/view.ts';
import { ifMatchRevOf, refusalBody } from './preconditions.ts';

type UpsertResult =
  | {
      status: 200;
      body: { ok: true; id: string; configRev: number; created: boolean; job: JobConfig };
      /** For the audit event only (names, never values). */
      changedFields: string[];
    }
  | { status: 403; body: ReturnType<typeof forbiddenBody> }
  | { status: 409; body: ReturnType<typeof refusalBody> };

/**
 * One row of `GET /admin/jobs`: the job, its `configRev` and its state. `lastRun` is the newest run
 * of the job's history ring (any status, in flight included) as the run object of docs/runs.md,
 * or null when the job has not run (or its ring was dropped).
 */
async function jobRow(state: State, job: JobRecord) {
  const enabled = job.config.enabled !== false;
  const [newest] = await state.runs.listForJob(job.id, { limit: 1 });
  const lastRun = newest === undefined ? null : ((await runObjects(state, [newest]))[0] ?? null);
  return { ...job.config, id: job.id, configRev: job.configRev, state: { paused: !enabled, lastRun } };
}

const cadenceOf = (config: Record<string, unknown> | undefined): number | null =>
  (config?.restoreTestCadenceSeconds as number | null | undefined) ?? null;

/** Thrown by the cadence guard inside the write's transaction; answered 403. */
class CadenceRefused extends Error {}

/**
 * One upsert. A caller without `scheduledtest.config` may write a job only when the write leaves
 * the restore-test cadence as stored. That comparison runs inside the store's write transaction
 * (the `guard` of jobs.upsert), so a concurrent change cannot slip in between the check and the
 * write, and the caller's own `ifMatchRev` is the only precondition: a write without the key is
 * applied with no base check (the key-absent row of the precondition table).
 */
async function upsert(state: State, caller: EngineCaller, body: UpsertBody): Promise<UpsertResult> {
  const sent = ifMatchRevOf(body);
  const job = normaliseJob(body);
  const config = job;
  const mayChangeCadence = can(caller.authz, 'scheduledtest.config');
  const guard = mayChangeCadence
    ? undefined
    : (stored: Record<string, unknown> | null | 'unreadable') => {
        // An unreadable record's cadence is unknown: only a caller who may change it replaces it.
        if (stored === 'unreadable' || cadenceOf(stored ?? undefined) !== job.restoreTestCadenceSeconds)
          throw new CadenceRefused();
      };
  try {
    const result = await state.jobs.upsert(config, { ifMatchRev: sent, ...(guard ? { guard } : {}) });
    return {
      status: 200,
      body: {
        ok: true,
        id: job.id,
        configRev: result.job.configRev,
        created: result.outcome === 'created' || result.outcome === 'recreated',
        job,
      },
      changedFields: result.changedFields,
    };
  } catch (err) {
    if (err instanceof CadenceRefused) {
      return { status: 403, body: forbiddenBody('scheduledtest.config', caller.authz) };
    }
    if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition) {
      return { status: 409, body: refusalBody(err.precondition, sent) };
    }
    throw err;
  }
}

const checkItem = Compile(UpsertBody);

function itemError(item: unknown): string | null {
  if (checkItem.Check(item)) return null;
  const first = checkItem.Errors(item)[0];
  if (!first) return 'invalid job';
  const at = first.instancePath || '';
  if (first.keyword === 'additionalProperties') return `job${at} has an unknown property`;
  return `job${at} ${first.message}`;
}

/** The `job-upsert` audit event of one upsert result (docs/audit.md "Action names"). */
function upsertAudit(id: string, result: UpsertResult): RequestAuditEvent {
  if (result.status === 200) {
    const { configRev, created } = result.body;
    return {
      action: 'job-upsert',
      outcome: 'applied',
      target: id,
      detail: { configRev, created, changedFields: result.changedFields },
    };
  }
  const reason = result.status === 403 ? 'capability' : result.body.precondition.reason;
  const detail = result.status === 403 ? { reason, required: result.body.required } : { reason };
  return { action: 'job-upsert', outcome: 'refused', target: id, detail };
}

/**
 * Where a job's source may not point (connections.ts checks): the data dir and every key or
 * configuration file of the engine, wherever the deployment put them.
 */
function protectedPaths(app: FastifyInstance): string[] {
  const c = app.config;
  return [c.dataDir, c.signerKeyFile, c.operationalKeyFile, c.tls?.keyFile, c.connections.file].filter(
    (p): p is string => typeof p === 'string',
  );
}

/** The refusal of a validated job's source (unknown connection, path of the engine's), or null. */
function sourceRefusal(app: FastifyInstance, body: UpsertBody): JobRefusal | null {
  return checkJobSource(body.source as { type: string }, app.config.connections, protectedPaths(app));
}

function refusalAudit(id: string, refusal: JobRefusal): RequestAuditEvent {
  return { action: 'job-upsert', outcome: 'refused', target: id, detail: { reason: refusal.code } };
}

export default async function jobsRoutes(app: FastifyInstance): Promise<void> {
  const writeGate = [app.requireCapability('job.write'), app.rateLimitCaller];

  app.get(
    '/jobs',
    {
      schema: {
        summary: 'List jobs with their state and configRev',
        operationId: 'listJobs',
        tags: ['admin', 'jobs'],
      },
    },
    async () => {
      const state = app.state;
      const jobs = await state.jobs.list();
      return { jobs: await Promise.all(jobs.map((job) => jobRow(state, job))) };
    },
  );

  app.post<{ Body: UpsertBody }>(
    '/jobs',
    {
      onRequest: writeGate,
      // Before schema validation: an old inline source gets a refusal that says what replaced it.
      preValidation: async (request, reply) => {
        const inline = inlineFieldRefusal((request.body as { source?: unknown } | undefined)?.source);
        if (inline) return reply.code(400).send(inline);
      },
      config: { capability: 'job.write', audit: { action: 'job-upsert' } },
      schema: {
        summary: 'Create or replace a job (whole object; optional ifMatchRev)',
        operationId: 'upsertJob',
        tags: ['admin', 'jobs'],
        body: UpsertBody,
      },
    },
    async (request, reply) => {
      const refused = sourceRefusal(app, request.body);
      if (refused) {
        await app.audit.forRequest(request, refusalAudit(request.body.id, refused));
        return reply.code(400).send(refused);
      }
      const result = await upsert(app.state, request.caller!, request.body);
      await app.audit.forRequest(request, upsertAudit(request.body.id, result));
      return reply.code(result.status).send(result.body);
    },
  );

  app.post<{ Body: BulkBody }>(
    '/jobs/bulk',
    {
      onRequest: writeGate,
      config: { capability: 'job.write', audit: { action: 'job-bulk' } },
      bodyLimit: 4 * 1024 * 1024,
      schema: {
        summary: 'Upsert many jobs (continue-on-error, index-aligned outcomes)',
        operationId: 'bulkUpsertJobs',
        tags: ['admin', 'jobs'],
        body: BulkBody,
      },
    },
    async (request, reply) => {
      const items = request.body.jobs as unknown[];
      if (items.length > MAX_BATCH) {
        await app.audit.forRequest(request, {
          action: 'job-bulk',
          outcome: 'refused',
          detail: { reason: 'max-batch', items: items.length, maxBatch: MAX_BATCH },
        });
        return reply
          .code(400)
          .send({ error: `batch too large (at most ${MAX_BATCH} jobs)`, maxBatch: MAX_BATCH });
      }
      const outcomes: unknown[] = [];
      for (const [index, item] of items.entries()) {
        const id = typeof (item as { id?: unknown }).id === 'string' ? (item as { id: string }).id : null;
        const inline = inlineFieldRefusal((item as { source?: unknown }).source);
        if (inline) {
          outcomes.push({ index, id, outcome: 'error', ...inline });
          continue;
        }
        const invalid = itemError(item);
        if (invalid) {
          outcomes.push({ index, id, outcome: 'error', error: invalid });
          continue;
        }
        const refused = sourceRefusal(app, item as UpsertBody);
        if (refused) {
          await app.audit.forRequest(request, refusalAudit((item as UpsertBody).id, refused));
          outcomes.push({ index, id, outcome: 'error', ...refused });
          continue;
        }
        try {
          const result = await upsert(app.state, request.caller!, item as UpsertBody);
          await app.audit.forRequest(request, upsertAudit((item as UpsertBody).id, result));
          if (result.status === 200) {
            outcomes.push({
              index,
              id,
              outcome: 'applied',
              configRev: result.body.configRev,
              created: result.body.created,
            });
          } else if (result.status === 409) {
            outcomes.push({ index, id, outcome: 'error', ...result.body });
          } else {
            outcomes.push({ index, id, outcome: 'error', ...result.body });
          }
        } catch (err) {
          request.log.error({ index, fault: (err as { code?: string }).code ?? 'error' }, 'bulk item failed');
          outcomes.push({ index, id, outcome: 'error', error: 'internal error' });
        }
      }
      const applied = outcomes.filter((o) => (o as { outcome: string }).outcome === 'applied').length;
      await app.audit.forRequest(request, {
        action: 'job-bulk',
        outcome: applied === items.length ? 'applied' : applied === 0 ? 'refused' : 'failed',
        detail: { items: items.length, applied, errors: items.length - applied },
      });
      return { ok: applied === items.length, applied, failed: items.length - applied, outcomes };
    },
  );

  app.post<{ Body: DeleteBody }>(
    '/jobs/delete',
    {
      onRequest: [app.requireCapability('job.delete'), app.rateLimitCaller],
      config: { capability: 'job.delete', audit: { action: 'job-delete' } },
      schema: {
        summary: 'Delete a job (optional ifMatchRev; null refused); archives are kept',
        operationId: 'deleteJob',
        tags: ['admin', 'jobs'],
        body: DeleteBody,
      },
    },
    async (request, reply) => {
      const ifMatchRev = ifMatchRevOf(request.body);
      try {
        const result = await app.state.jobs.delete(request.body.id, { ifMatchRev });
        await app.audit.forRequest(request, {
          action: 'job-delete',
          outcome: 'applied',
          target: result.id,
          detail: { deletedRev: result.deletedRev },
        });
        return { ok: true, id: result.id, deletedRev: result.deletedRev };
      } catch (err) {
        if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition) {
          await app.audit.forRequest(request, {
            action: 'job-delete',
            outcome: 'refused',
            target: request.body.id,
            detail: { reason: err.precondition.reason },
          });
          return reply.code(409).send(refusalBody(err.precondition, ifMatchRev));
        }
        throw err;
      }
    },
  );
}
