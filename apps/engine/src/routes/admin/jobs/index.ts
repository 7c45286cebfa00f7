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
 * same transaction (config-changes/apply.ts).
 *
 * Configuration dual control (docs/config-control.md): while `config.approval.enabled` is on, an
 * upsert or delete is checked (`ifMatchRev`, cadence capability) on a probe that writes nothing
 * and answered 202 `{ pending: true, changeId, ... }`; the bulk cap drops to 10 and a held item's
 * outcome is `pending` with its `changeId`. The admin token cannot propose (403 `no-subject`).
 * Every applied write appends a signed configuration version (config-changes/history.ts).
 */
import { forbiddenBody } from '@coffer/authz';
import type { JobPrecondition, JobRecord, State } from '@coffer/state';
import type { FastifyInstance } from 'fastify';
import { Compile } from 'typebox/compile';
import type { RequestAuditEvent } from '../../../audit/index.ts';
import {
  applyJobDelete,
  applyJobUpsert,
  bulkCap,
  probeJobDelete,
  probeJobUpsert,
  propose,
  readPolicy,
  recordConfigVersion,
  type VersionInput,
} from '../../../config-changes/index.ts';
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
import { sendStateUnavailable } from '../../../plugins/replies.ts';
import { runObjects } from '../../../runs/view.ts';
import { ifMatchRevOf, refusalBody } from './preconditions.ts';

type UpsertResult =
  | {
      status: 200;
      body: { ok: true; id: string; configRev: number; created: boolean; job: JobConfig };
      /** For the audit event only (names, never values). */
      changedFields: string[];
    }
  | {
      status: 202;
      body: {
        ok: true;
        pending: true;
        changeId: string;
        status: 'pending';
        kind: 'job-upsert';
        id: string;
        baseRev: number | null;
        changedFields: string[];
        expiresAt: string;
      };
    }
  | { status: 403; body: ReturnType<typeof forbiddenBody> | NoSubjectBody }
  | { status: 409; body: ReturnType<typeof refusalBody> };

/** Under config approval, a write needs a proposer with a stable subject (docs/config-control.md). */
interface NoSubjectBody {
  error: string;
  refusal: 'no-subject';
}
const NO_SUBJECT: NoSubjectBody = {
  error:
    'configuration approval is on: changes are proposed by a signed-in person; the admin token has no subject',
  refusal: 'no-subject',
};

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

/** The actor of a configuration version or pending change (never a token). */
export function personOf(caller: EngineCaller) {
  const method = caller.method === 'session' ? (caller.session?.kind ?? 'session') : caller.method;
  return { subject: caller.subject, email: caller.email, method };
}

/**
 * One upsert (config-changes/apply.ts owns the write). Without the approval policy it is applied
 * and its configuration version appended; with the policy on, the `ifMatchRev` precondition and
 * the cadence capability are checked on a probe that writes nothing and the change is held as a
 * pending change (202) for a second person.
 */
async function upsert(
  app: FastifyInstance,
  caller: EngineCaller,
  body: UpsertBody,
  approvalOn: boolean,
): Promise<UpsertResult> {
  const state = app.state;
  const sent = ifMatchRevOf(body);
  const job = normaliseJob(body);
  if (approvalOn) {
    if (caller.subject === null) return { status: 403, body: NO_SUBJECT };
    const probe = await probeJobUpsert(state, caller.authz, job, sent);
    if (!probe.ok)
      return probe.status === 403
        ? { status: 403, body: forbiddenBody('scheduledtest.config', caller.authz) }
        : { status: 409, body: refusalBody(probe.precondition, sent) };
    const change = await propose(state, {
      kind: 'job-upsert',
      target: job.id,
      baseRev: probe.baseRev,
      changedFields: probe.changedFields,
      config: job,
      proposedBy: personOf(caller),
      hasIfMatchRev: sent !== undefined,
      ...(sent !== undefined ? { ifMatchRev: sent } : {}),
    });
    return {
      status: 202,
      body: {
        ok: true,
        pending: true,
        changeId: change.id,
        status: 'pending',
        kind: 'job-upsert',
        id: job.id,
        baseRev: change.baseRev,
        changedFields: change.changedFields,
        expiresAt: change.expiresAt,
      },
    };
  }
  const r = await applyJobUpsert(state, caller.authz, job, sent);
  if (!r.ok)
    return r.status === 403
      ? { status: 403, body: forbiddenBody('scheduledtest.config', caller.authz) }
      : { status: 409, body: refusalBody(r.precondition, sent) };
  const result = r.result;
  if (result.outcome !== 'unchanged')
    await appendVersion(app, {
      kind: 'job-upsert',
      target: job.id,
      actor: personOf(caller),
      configRev: result.job.configRev,
      changedFields: result.changedFields,
      config: result.job.config,
    });
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
}

/** Appends a configuration version; a history fault is logged and never undoes the write. */
async function appendVersion(app: FastifyInstance, input: VersionInput): Promise<void> {
  try {
    await recordConfigVersion({ state: app.state, signer: app.keys.signer }, input);
  } catch (err) {
    app.log.error({ code: (err as { code?: string }).code ?? 'ERR_UNKNOWN' }, 'config history append failed');
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
  if (result.status === 202) {
    const { changeId, changedFields } = result.body;
    return {
      action: 'config-change-proposed',
      outcome: 'queued',
      target: changeId,
      detail: { kind: 'job-upsert', jobId: id, changedFields },
    };
  }
  if (result.status === 403 && 'refusal' in result.body)
    return { action: 'job-upsert', outcome: 'refused', target: id, detail: { reason: 'no-subject' } };
  const reason = result.status === 403 ? 'capability' : result.body.precondition.reason;
  const detail =
    result.status === 403 && 'required' in result.body
      ? { reason, required: result.body.required }
      : { reason };
  return { action: 'job-upsert', outcome: 'refused', target: id, detail };
}

/** The config-approval policy now; a store fault is thrown (the route answers 502). */
const approvalOn = async (app: FastifyInstance) => (await readPolicy(app.state, 'config-approval')).enabled;

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
      let on: boolean;
      try {
        on = await approvalOn(app);
      } catch {
        return sendStateUnavailable(reply);
      }
      const result = await upsert(app, request.caller!, request.body, on);
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
      let on: boolean;
      try {
        on = await approvalOn(app);
      } catch {
        return sendStateUnavailable(reply);
      }
      const cap = bulkCap(on, MAX_BATCH);
      if (items.length > cap) {
        await app.audit.forRequest(request, {
          action: 'job-bulk',
          outcome: 'refused',
          detail: { reason: 'max-batch', items: items.length, maxBatch: cap },
        });
        return reply.code(400).send({
          error: on
            ? `batch too large (at most ${cap} jobs while configuration approval is on)`
            : `batch too large (at most ${cap} jobs)`,
          maxBatch: cap,
        });
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
          const result = await upsert(app, request.caller!, item as UpsertBody, on);
          await app.audit.forRequest(request, upsertAudit((item as UpsertBody).id, result));
          if (result.status === 202) {
            outcomes.push({ index, id, outcome: 'pending', changeId: result.body.changeId });
          } else if (result.status === 200) {
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
      const count = (what: string) =>
        outcomes.filter((o) => (o as { outcome: string }).outcome === what).length;
      const applied = count('applied');
      const pending = count('pending');
      const errors = items.length - applied - pending;
      await app.audit.forRequest(request, {
        action: 'job-bulk',
        outcome:
          errors === 0
            ? pending > 0
              ? 'queued'
              : 'applied'
            : errors === items.length
              ? 'refused'
              : 'failed',
        detail: { items: items.length, applied, pending, errors, maxBatch: cap },
      });
      return { ok: errors === 0, applied, pending, failed: errors, maxBatch: cap, outcomes };
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
      const id = request.body.id;
      const caller = request.caller!;
      let on: boolean;
      try {
        on = await approvalOn(app);
      } catch {
        return sendStateUnavailable(reply);
      }
      const refused = async (precondition: JobPrecondition) => {
        await app.audit.forRequest(request, {
          action: 'job-delete',
          outcome: 'refused',
          target: id,
          detail: { reason: precondition.reason },
        });
        return reply.code(409).send(refusalBody(precondition, ifMatchRev));
      };
      if (on) {
        // Dual control: checked now (and again at apply), held for a second person.
        if (caller.subject === null) {
          await app.audit.forRequest(request, {
            action: 'job-delete',
            outcome: 'refused',
            target: id,
            detail: { reason: 'no-subject' },
          });
          return reply.code(403).send(NO_SUBJECT);
        }
        const probe = await probeJobDelete(app.state, id, ifMatchRev);
        if (!probe.ok) return refused(probe.precondition);
        const change = await propose(app.state, {
          kind: 'job-delete',
          target: id,
          baseRev: probe.baseRev,
          changedFields: [],
          config: null,
          proposedBy: personOf(caller),
          hasIfMatchRev: ifMatchRev !== undefined,
          ...(ifMatchRev !== undefined ? { ifMatchRev } : {}),
        });
        await app.audit.forRequest(request, {
          action: 'config-change-proposed',
          outcome: 'queued',
          target: change.id,
          detail: { kind: 'job-delete', jobId: id, changedFields: [] },
        });
        return reply.code(202).send({
          ok: true,
          pending: true,
          changeId: change.id,
          status: 'pending',
          kind: 'job-delete',
          id,
          baseRev: probe.baseRev,
          expiresAt: change.expiresAt,
        });
      }
      const r = await applyJobDelete(app.state, id, ifMatchRev);
      if (!r.ok) return refused(r.precondition);
      const result = r.result;
      await appendVersion(app, {
        kind: 'job-delete',
        target: result.id,
        actor: personOf(caller),
        configRev: result.deletedRev,
        changedFields: [],
        config: null,
      });
      await app.audit.forRequest(request, {
        action: 'job-delete',
        outcome: 'applied',
        target: result.id,
        detail: { deletedRev: result.deletedRev },
      });
      return { ok: true, id: result.id, deletedRev: result.deletedRev };
    },
  );
}
