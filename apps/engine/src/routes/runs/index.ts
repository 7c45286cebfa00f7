/**
 * The runs routes (specification "Jobs and runs"; docs/runs.md): `POST /admin/trigger`
 * (`run.trigger`), `GET /admin/history` (any authenticated caller), `GET /admin/runs/at`
 * (`job.read`), `GET /admin/replication`, `GET /admin/destination`, `GET /admin/jobs/roster-hygiene`
 * (any authenticated caller), `POST /admin/jobs/reconcile-roster` (`keys.ceremony`) and
 * `GET /admin/cost/estate-size` (`job.read`).
 *
 * Every POST runs: authentication -> capability gate -> per-caller rate limit -> validation ->
 * handler, exactly as the jobs routes do. Replies carry reasons from the closed list, cause
 * digests and store descriptions, never raw messages, credentials or record names.
 */
import type { State } from '@coffer/state';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { CanaryHistory } from '../../canary/history.ts';
import { ID_PATTERN, jobDestinations } from '../../jobs/index.ts';
import { REASON_RUN_FAILED } from '../../runs/reasons.ts';
import { RECLAIM_REFUSAL } from '../../runs/reclaim-marker.ts';
import { RETENTION_SETTING_PREFIX } from '../../runs/retention.ts';
import { STAND_DOWN_PREFIX } from '../../runs/service.ts';
import { runObject, runObjects } from '../../runs/view.ts';
import { inReadSlot } from '../restore/shared.ts';

const Id = Type.String({ pattern: ID_PATTERN });
const TriggerBody = Type.Object({ id: Id }, { additionalProperties: false });
const HistoryQuery = Type.Object({ id: Type.Optional(Id) });
const JobQuery = Type.Object({ id: Id }, { additionalProperties: false });
const AtQuery = Type.Object({ job: Type.Optional(Type.String()), at: Type.Optional(Type.String()) });
const ReplicationQuery = Type.Object({ id: Type.Optional(Id) });

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

async function countersOf(state: State, jobId?: string) {
  return state.runs.counters(jobId);
}

export default async function runsRoutes(app: FastifyInstance): Promise<void> {
  const state = app.state;

  app.post<{ Body: { id: string } }>(
    '/trigger',
    {
      onRequest: [app.requireCapability('run.trigger'), app.rateLimitCaller],
      config: { capability: 'run.trigger', audit: { action: 'run-trigger', targetField: 'id' } },
      schema: {
        summary: 'Run a job now; the reply carries the run id (409 when a run is in flight)',
        operationId: 'triggerRun',
        tags: ['admin', 'runs'],
        body: TriggerBody,
      },
    },
    async (request, reply) => {
      const id = request.body.id;
      const result = await app.runs.trigger(id, 'manual');
      const refused = (reason: string, detail: Record<string, unknown> = {}) =>
        app.audit.forRequest(request, {
          action: 'run-trigger',
          outcome: 'refused',
          target: id,
          detail: { reason, ...detail },
        });
      switch (result.kind) {
        case 'started':
          await app.audit.forRequest(request, {
            action: 'run-trigger',
            outcome: 'applied',
            target: id,
            detail: { runId: result.runId },
          });
          return { ok: true, id, runId: result.runId, status: 'running' };
        case 'in-flight':
          await refused('in-flight', { runId: result.runId });
          return reply.code(409).send({ error: 'job has a run in flight', id, runId: result.runId });
        case 'reclaiming':
          await refused('reclaiming');
          return reply.code(409).send({ error: RECLAIM_REFUSAL, id });
        case 'paused':
          await refused('paused');
          return reply.code(409).send({ error: 'job is paused', id });
        default:
          await refused('not-found');
          return reply.code(404).send({ error: 'job not found' });
      }
    },
  );

  app.get<{ Querystring: { id?: string } }>(
    '/history',
    {
      schema: {
        summary: "One job's run history ring (?id=), or all rings with their counters",
        operationId: 'runHistory',
        tags: ['admin', 'runs'],
        querystring: HistoryQuery,
      },
    },
    async (request, reply) => {
      const id = request.query.id;
      if (id !== undefined) {
        const job = await state.jobs.get(id);
        const ring = await state.runs.listForJob(id);
        if (!job && ring.length === 0) return reply.code(404).send({ error: 'job not found' });
        return { id, runs: await runObjects(state, ring), ...(await countersOf(state, id)) };
      }
      const ids = new Set((await state.jobs.list()).map((j) => j.id));
      for (const r of await state.runs.listByStatus(['running', 'parked'])) ids.add(r.jobId);
      const jobs = [];
      for (const jobId of [...ids].sort()) {
        jobs.push({ id: jobId, runs: await runObjects(state, await state.runs.listForJob(jobId)) });
      }
      return { jobs, ...(await countersOf(state)) };
    },
  );

  app.get<{ Querystring: { job?: string; at?: string } }>(
    '/runs/at',
    {
      onRequest: [app.requireCapability('job.read')],
      config: { capability: 'job.read' },
      schema: {
        summary: 'The latest successful run at or before a time, or a miss with the retained window',
        operationId: 'runAt',
        tags: ['admin', 'runs'],
        querystring: AtQuery,
      },
    },
    async (request, reply) => {
      const { job, at } = request.query;
      if (!job || !new RegExp(ID_PATTERN).test(job))
        return reply.code(400).send({ error: 'job is required' });
      if (!at || !RFC3339.test(at) || Number.isNaN(Date.parse(at)))
        return reply.code(400).send({ error: 'at must be an RFC 3339 time' });
      const when = new Date(Date.parse(at)).toISOString();
      const run = await state.runs.latestOk(job, when);
      if (run) {
        const prev = run.prevRunId ? await state.runs.get(run.prevRunId) : null;
        return { found: true, job, at: when, run: runObject(run, prev) };
      }
      return { found: false, job, at: when, window: await state.runs.window(job) };
    },
  );

  app.get<{ Querystring: { id?: string } }>(
    '/replication',
    {
      schema: {
        summary: 'Per-destination copy state of each job (?id= for one job)',
        operationId: 'replication',
        tags: ['admin', 'runs'],
        querystring: ReplicationQuery,
      },
    },
    async (request, reply) => {
      const all = await state.jobs.list();
      const jobs = request.query.id === undefined ? all : all.filter((j) => j.id === request.query.id);
      if (request.query.id !== undefined && jobs.length === 0)
        return reply.code(404).send({ error: 'job not found' });
      const out = [];
      for (const j of jobs) {
        const dests = jobDestinations(j.config);
        const ring = await state.runs.listForJob(j.id);
        const latest = ring[0] ?? null;
        out.push({
          id: j.id,
          destinations: dests.map((d) => {
            // Runs recorded `unchangedFrom` another run hold no copy of their own.
            const own = (r: (typeof ring)[number]) =>
              typeof (r.detail as { unchangedFrom?: unknown }).unchangedFrom !== 'string';
            const verified = ring.find(
              (r) =>
                r.status === 'ok' && r.destinations[d]?.state === 'verified' && r.prunedAt === null && own(r),
            );
            const copies = ring.filter(
              (r) => r.destinations[d]?.state === 'verified' && r.prunedAt === null && own(r),
            ).length;
            return {
              id: d,
              configured: app.runs.stores.has(d),
              latestRun: latest
                ? {
                    runId: latest.id,
                    status: latest.status,
                    state: latest.destinations[d]?.state ?? 'none',
                    reason: latest.destinations[d]?.reason ?? null,
                  }
                : null,
              lastVerified: verified ? { runId: verified.id, at: verified.finishedAt } : null,
              verifiedCopies: copies,
            };
          }),
        });
      }
      return request.query.id === undefined ? { jobs: out } : out[0];
    },
  );

  app.get(
    '/destination',
    {
      schema: {
        summary: 'The configured destinations (no credentials) and the jobs writing to each',
        operationId: 'destinations',
        tags: ['admin', 'runs'],
      },
    },
    async () => {
      const jobs = await state.jobs.list();
      const history = new CanaryHistory(state.settings);
      return {
        destinations: await Promise.all(
          [...app.runs.stores].map(async ([id, store]) => {
            const flight = (await history.flights(id).catch(() => []))[0] ?? null;
            const writers = jobs.filter((j) => jobDestinations(j.config).includes(id));
            return {
              id,
              default: id === 'default',
              kind: store.description.startsWith('s3://') ? 's3' : 'fs',
              description: store.description,
              jobs: writers.map((j) => j.id),
              enabledJobs: writers.filter((j) => j.config.enabled !== false).length,
              // The latest integrity-canary flight into it (docs/canary.md), null before the first.
              canary: flight ? { verdict: flight.verdict, at: flight.finishedAt, code: flight.code } : null,
            };
          }),
        ),
      };
    },
  );

  app.get(
    '/jobs/roster-hygiene',
    {
      schema: {
        summary: 'Ghost rows (runs or records of jobs that no longer exist) and never-run jobs',
        operationId: 'rosterHygiene',
        tags: ['admin', 'jobs'],
      },
    },
    async () => roster(state),
  );

  app.post(
    '/jobs/reconcile-roster',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.rateLimitCaller],
      config: { capability: 'keys.ceremony', audit: { action: 'job-roster-reconcile' } },
      schema: {
        summary: 'Repair ghost rows (abandon orphan runs, drop their checkpoints and stale records)',
        operationId: 'reconcileRoster',
        tags: ['admin', 'jobs'],
      },
    },
    async (request) => {
      const { ghosts } = await roster(state);
      const repaired = [];
      for (const g of ghosts) {
        if (g.kind === 'run') {
          await state.runs.transition(g.id, ['running', 'parked'], {
            status: 'abandoned',
            reason: REASON_RUN_FAILED,
            finishedAt: new Date().toISOString(),
            detail: { abandoned: 'job deleted (roster reconcile)' },
          });
          await state.checkpoints.delete(g.id);
        } else {
          await state.settings.delete(`${STAND_DOWN_PREFIX}${g.job}`);
        }
        repaired.push(g);
      }
      request.log.info({ event: 'roster-reconciled', repaired: repaired.length }, 'roster reconciled');
      const runs = repaired.filter((g) => g.kind === 'run').length;
      await app.audit.forRequest(request, {
        action: 'job-roster-reconcile',
        outcome: 'applied',
        detail: { repaired: repaired.length, runs, records: repaired.length - runs },
      });
      return { ok: true, repaired };
    },
  );

  app.get<{ Querystring: { id: string } }>(
    '/retention',
    {
      onRequest: [app.requireCapability('job.read')],
      config: { capability: 'job.read' },
      schema: {
        summary: 'What the job\'s last retention pass did, per destination (docs/runs.md "Outcome")',
        operationId: 'retentionOutcome',
        tags: ['admin', 'runs'],
        querystring: JobQuery,
      },
    },
    async (request, reply) => {
      const id = request.query.id;
      const last = (await state.settings.get(`${RETENTION_SETTING_PREFIX}${id}`)) ?? null;
      if (last === null && !(await state.jobs.get(id)))
        return reply.code(404).send({ error: 'job not found' });
      return { id, last };
    },
  );

  app.get<{ Querystring: { id: string } }>(
    '/retention/packs',
    {
      // A dry run reads every run index and pack index of the job: rate-limited per caller, and in
      // a restore read slot as a restore dry run or verify is (429 over the limit, never queued).
      onRequest: [app.requireCapability('job.read'), app.rateLimitCaller],
      config: { capability: 'job.read' },
      schema: {
        summary:
          "Dry run of the pack reclaim: what retention would delete, repack and free in the job's packs now",
        operationId: 'retentionPackPlan',
        tags: ['admin', 'runs'],
        querystring: JobQuery,
      },
    },
    async (request, reply) => {
      const id = request.query.id;
      const answer = async () => {
        const destinations = await app.runs.planPacks(id);
        if (destinations === null) return reply.code(404).send({ error: 'job not found' });
        return { id, destinations };
      };
      // A caller asking while the job's plan is being made shares it, without a slot of its own.
      return app.runs.planningPacks(id) ? answer() : inReadSlot(app, request, reply, answer);
    },
  );

  app.get(
    '/cost/estate-size',
    {
      onRequest: [app.requireCapability('job.read')],
      config: { capability: 'job.read' },
      schema: {
        summary: 'Best-effort stored size per destination and job (from listings)',
        operationId: 'estateSize',
        tags: ['admin', 'runs'],
      },
    },
    async () => {
      const destinations = [];
      let totalBytes = 0;
      for (const [id, store] of app.runs.stores) {
        const jobs = new Map<string, { bytes: number; objects: number; runs: Set<string> }>();
        let bytes = 0;
        let objects = 0;
        try {
          for await (const o of store.listAll('jobs/')) {
            const [, job, , run] = o.key.split('/');
            if (!job) continue;
            const j = jobs.get(job) ?? { bytes: 0, objects: 0, runs: new Set<string>() };
            j.bytes += o.size;
            j.objects++;
            if (run) j.runs.add(run);
            jobs.set(job, j);
            bytes += o.size;
            objects++;
          }
          totalBytes += bytes;
          destinations.push({
            id,
            bytes,
            objects,
            jobs: [...jobs].map(([job, j]) => ({
              id: job,
              bytes: j.bytes,
              objects: j.objects,
              runs: j.runs.size,
            })),
          });
        } catch (err) {
          destinations.push({ id, error: String((err as { code?: unknown }).code ?? 'ERR_UNKNOWN') });
        }
      }
      return { estimatedAt: new Date().toISOString(), method: 'listing', totalBytes, destinations };
    },
  );
}

interface Ghost {
  kind: 'run' | 'stand-down';
  id: string;
  job: string;
}

async function roster(state: State): Promise<{ ghosts: Ghost[]; neverRun: string[]; checkedAt: string }> {
  const jobs = await state.jobs.list();
  const live = new Set(jobs.map((j) => j.id));
  const ghosts: Ghost[] = [];
  for (const r of await state.runs.listByStatus(['running', 'parked'])) {
    if (!live.has(r.jobId)) ghosts.push({ kind: 'run', id: r.id, job: r.jobId });
  }
  for (const s of await state.settings.list(STAND_DOWN_PREFIX)) {
    const job = s.key.slice(STAND_DOWN_PREFIX.length);
    if (!live.has(job)) ghosts.push({ kind: 'stand-down', id: s.key, job });
  }
  const neverRun: string[] = [];
  for (const j of jobs)
    if ((await state.runs.listForJob(j.id, { limit: 1 })).length === 0) neverRun.push(j.id);
  return { ghosts, neverRun, checkedAt: new Date().toISOString() };
}
