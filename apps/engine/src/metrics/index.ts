/**
 * `GET /metrics` content: Prometheus text exposition (format 0.0.4) rendered by prom-client from a
 * per-app Registry (never prom-client's global one, so two engines in one process, as in tests,
 * never share series). Every scrape reads a fresh snapshot from @coffer/state and sets the series
 * from it; scrapes are serialised so one cannot interleave with another's reset.
 *
 * Series (docs/pull-api.md "Metrics"):
 *   coffer_engine_info{version}                      1
 *   coffer_jobs{state="enabled"|"paused"}            configured jobs
 *   coffer_runs{status}                              retained runs by status (all five statuses)
 *   coffer_runs_recorded_total                       runs ever recorded (the run-log counter)
 *   coffer_run_duration_seconds                      histogram over retained successful runs
 *                                                    (unlabelled: a duration histogram per job or
 *                                                    status would multiply series for little gain)
 *   coffer_bytes_sealed{job}                         bytes sealed by the job's retained ok runs
 *   coffer_last_success_age_seconds{job}             seconds since the job's latest ok run finished
 *                                                    (absent until it has one)
 *   coffer_destination_state{destination,kind,state} 1 for the latest state a run recorded for the
 *                                                    destination (`unknown` before any run)
 *   coffer_audit_head_seq                            seq of the audit chain head
 *   coffer_notification_deliveries{outcome}          deliveries in the ring, accepted / refused
 *
 * Labels carry job and destination ids (the operator's own names, for the operator's own
 * scraper), never paths, URLs, hosts, keys or secrets.
 */
import type { RunRecord, RunStatus } from '@coffer/state';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EngineFacts } from '../context.ts';
import { ENGINE_VERSION } from '../version.ts';

const STATUSES: RunStatus[] = ['running', 'parked', 'ok', 'failed', 'abandoned'];
const DURATION_BUCKETS = [1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400];

export interface EngineMetrics {
  readonly registry: Registry;
  /** Reads state and renders the exposition. Throws the state store's errors (fail closed). */
  render(headSeq: () => Promise<number>): Promise<{ contentType: string; text: string }>;
}

function kindOf(description: string): string {
  if (description.startsWith('fs:')) return 'fs';
  if (description.startsWith('s3:')) return 's3';
  return 'other';
}

function finishedMs(run: RunRecord): number | null {
  const end = run.finishedAt ?? (run.status === 'ok' || run.status === 'failed' ? run.updatedAt : null);
  if (end === null) return null;
  const ms = Date.parse(end) - Date.parse(run.startedAt);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

export function createEngineMetrics(ctx: EngineFacts): EngineMetrics {
  const registry = new Registry();
  const reg = { registers: [registry] };
  const info = new Gauge({
    name: 'coffer_engine_info',
    help: 'Engine build information',
    labelNames: ['version'],
    ...reg,
  });
  const jobs = new Gauge({
    name: 'coffer_jobs',
    help: 'Configured jobs by state',
    labelNames: ['state'],
    ...reg,
  });
  const runs = new Gauge({
    name: 'coffer_runs',
    help: 'Retained runs by status',
    labelNames: ['status'],
    ...reg,
  });
  const recorded = new Counter({ name: 'coffer_runs_recorded_total', help: 'Runs ever recorded', ...reg });
  const duration = new Histogram({
    name: 'coffer_run_duration_seconds',
    help: 'Duration of retained successful runs',
    buckets: DURATION_BUCKETS,
    ...reg,
  });
  const bytes = new Gauge({
    name: 'coffer_bytes_sealed',
    help: "Bytes sealed by the job's retained ok runs",
    labelNames: ['job'],
    ...reg,
  });
  const age = new Gauge({
    name: 'coffer_last_success_age_seconds',
    help: "Seconds since the job's latest successful run finished",
    labelNames: ['job'],
    ...reg,
  });
  const destination = new Gauge({
    name: 'coffer_destination_state',
    help: 'Latest state a run recorded for the destination (1 for that state)',
    labelNames: ['destination', 'kind', 'state'],
    ...reg,
  });
  const head = new Gauge({ name: 'coffer_audit_head_seq', help: 'Seq of the audit chain head', ...reg });
  const deliveries = new Gauge({
    name: 'coffer_notification_deliveries',
    help: 'Notification deliveries in the history ring by outcome',
    labelNames: ['outcome'],
    ...reg,
  });

  async function update(headSeq: () => Promise<number>): Promise<void> {
    const now = Date.now();
    const jobList = await ctx.state.jobs.list();
    const perJob = new Map<string, RunRecord[]>();
    for (const job of jobList) perJob.set(job.id, await ctx.state.runs.listForJob(job.id));
    const counters = await ctx.state.runs.counters();
    const seq = await headSeq();
    const ring = await ctx.state.notifications.listDeliveries(1000);

    registry.resetMetrics();
    info.set({ version: ENGINE_VERSION }, 1);
    const enabled = jobList.filter((j) => j.config.enabled !== false).length;
    jobs.set({ state: 'enabled' }, enabled);
    jobs.set({ state: 'paused' }, jobList.length - enabled);
    const byStatus = new Map<string, number>(STATUSES.map((s) => [s, 0]));
    const latestDest = new Map<string, { seq: number; state: string }>();
    for (const [jobId, list] of perJob) {
      let sealed = 0;
      let lastOk: number | null = null;
      for (const run of list) {
        byStatus.set(run.status, (byStatus.get(run.status) ?? 0) + 1);
        const ms = finishedMs(run);
        if (ms !== null && run.status === 'ok') duration.observe(ms / 1000);
        if (run.status === 'ok') {
          sealed += run.bytes;
          const end = Date.parse(run.finishedAt ?? run.updatedAt);
          if (Number.isFinite(end) && (lastOk === null || end > lastOk)) lastOk = end;
        }
        for (const [id, d] of Object.entries(run.destinations)) {
          const prev = latestDest.get(id);
          if (!prev || run.seq > prev.seq) latestDest.set(id, { seq: run.seq, state: String(d.state) });
        }
      }
      bytes.set({ job: jobId }, sealed);
      if (lastOk !== null) age.set({ job: jobId }, Math.max(0, (now - lastOk) / 1000));
    }
    for (const [status, n] of byStatus) runs.set({ status }, n);
    recorded.inc(counters.runsRecordedTotal);
    for (const [id, store] of ctx.destinations) {
      const state = latestDest.get(id)?.state ?? 'unknown';
      destination.set(
        {
          destination: id,
          kind: kindOf(store.description),
          state: /^[a-z-]{1,32}$/.test(state) ? state : 'other',
        },
        1,
      );
    }
    head.set(seq);
    deliveries.set({ outcome: 'accepted' }, ring.filter((d) => d.accepted).length);
    deliveries.set({ outcome: 'refused' }, ring.filter((d) => !d.accepted).length);
  }

  let tail: Promise<unknown> = Promise.resolve();
  return {
    registry,
    render(headSeq) {
      const run = tail.then(async () => {
        await update(headSeq);
        return { contentType: registry.contentType, text: await registry.metrics() };
      });
      tail = run.catch(() => undefined);
      return run;
    },
  };
}
