/**
 * The run scheduler: the reconciliation tick and the light poll.
 *
 * The tick (every `tickSeconds`, default 900, and once at start) runs under the lease
 * `scheduler.tick`: it resumes interrupted and due parked runs, dispatches due jobs, applies
 * retention, and records itself in the setting `scheduler.lastTick` (preflight's cron-tick item). A
 * lighter poll (every `pollSeconds`, default 10) dispatches due jobs and resumes parked runs, so a new
 * job's first run and the retry ladder do not wait for the next tick. A paused job
 * (`enabled: false`) gets neither dispatch nor prune, and the stand-down is recorded.
 *
 * Dispatch and resumption go through the run service (service.ts), which holds the run locks.
 *
 * Staleness (`checkStale`, at the end of each tick, so under the tick's lease): an enabled job is
 * stale when its latest `ok` run finished (never having had one: the job was created) more than
 * `staleThresholdSeconds(cadence)` = max(2 * cadence, cadence + 1 hour) ago. The first check that
 * finds it stale takes the latch `runs.stale.<job>` (set-if-absent in the state store, so other
 * replicas and later starts do not repeat it) and raises `backup-stale` once; the next `ok` run
 * (lifecycle.ts), a check that finds the job fresh, or the job's deletion removes the latch. A
 * paused job is left as it is (neither raised nor cleared).
 */
import type { ObjectStore } from '@coffer/objectstore';
import type { Lease, RunRecord, State } from '@coffer/state';
import type { EngineEvents } from '../events.ts';
import { runJobOf } from '../jobs/index.ts';
import type { RunJob, RunKeys, RunLogger } from './executor.ts';
import { type RunLifecycle, STALE_PREFIX } from './lifecycle.ts';
import { type JobExclusive, type PruneResult, pruneJob } from './retention.ts';

export const TICK_SETTING = 'scheduler.lastTick';
export const STAND_DOWN_PREFIX = 'scheduler.standDown.';
export { STALE_PREFIX };

/** Seconds without an `ok` run after which a job of cadence `cadenceSeconds` is stale. */
export function staleThresholdSeconds(cadenceSeconds: number): number {
  return Math.max(2 * cadenceSeconds, cadenceSeconds + 3600);
}

/** The latch of one stale episode (setting `runs.stale.<job>`). */
export interface StaleLatch {
  raisedAt: string;
  lastOkRunId: string | null;
  lastOkAt: string | null;
  thresholdSeconds: number;
}

export interface TickRecord {
  at: string;
  by: string;
  reason: string;
  dispatched: string[];
  resumed: string[];
  abandoned: string[];
  pruned: Record<string, number>;
  standDowns: string[];
}

/** What the scheduler asks of the run service. */
export interface SchedulerHost {
  readonly holder: string;
  readonly leaseMs: number;
  readonly stopped: boolean;
  /** The job has a run in flight here, or its lock is being taken here right now. */
  busyWith(jobId: string): boolean;
  /** The job has a run in flight here. */
  running(jobId: string): boolean;
  /** Marks the job's lock as being taken here (re-entrant lease: keeps two claims apart). */
  claim(jobId: string): void;
  unclaim(jobId: string): void;
  /** Dispatches a run of `job` (only when due, re-checked under the run lock). */
  startRun(
    job: RunJob,
    trigger: string,
    onlyIfDue: boolean,
  ): Promise<{ kind: string; runId?: string | null }>;
  /** Runs `run` of `job` under the already acquired run lock `lease`. */
  launch(job: RunJob, run: RunRecord, lease: Lease): void;
  acquireLock(jobId: string): Promise<Lease | null>;
  releaseLock(jobId: string): Promise<void>;
  /** Holds the job (no run of it starts anywhere) for the pack reclaim of retention. */
  exclusive: JobExclusive;
}

export interface RunSchedulerOptions {
  state: State;
  keys: RunKeys;
  destinations: ReadonlyMap<string, ObjectStore>;
  log: RunLogger;
  now: () => Date;
  lifecycle: RunLifecycle;
  strikeBudget?: number;
  /** The notification event bus (app.events); absent: staleness is still latched, nothing raised. */
  events?: EngineEvents | null;
}

export class RunScheduler {
  private readonly o: RunSchedulerOptions;
  private readonly host: SchedulerHost;
  private busy: Promise<unknown> = Promise.resolve();

  constructor(host: SchedulerHost, options: RunSchedulerOptions) {
    this.host = host;
    this.o = options;
  }

  private now(): Date {
    return this.o.now();
  }

  private get stopped(): boolean {
    return this.host.stopped;
  }

  /** Resolves once the tick or poll in progress (if any) has finished. */
  async settled(): Promise<void> {
    await this.busy.catch(() => undefined);
  }

  isDue(job: RunJob, latest: RunRecord | undefined): boolean {
    if (!latest) return true;
    const cadence = (job.cadenceSeconds ?? 86_400) * 1000;
    return Date.parse(latest.startedAt) + cadence <= this.now().getTime();
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.busy.then(fn, fn);
    this.busy = p.catch(() => undefined);
    return p;
  }

  /** The light poll: resumes parked and interrupted runs, dispatches due jobs. */
  poll(): Promise<{ dispatched: string[]; resumed: string[]; abandoned: string[]; standDowns: string[] }> {
    return this.serial(async () => {
      const r = {
        dispatched: [] as string[],
        resumed: [] as string[],
        abandoned: [] as string[],
        standDowns: [] as string[],
      };
      if (this.stopped) return r;
      await this.resumeAll(r);
      await this.dispatchDue(r);
      return r;
    });
  }

  /** The reconciliation tick: poll work, retention, and the tick record. */
  tick(reason = 'timer'): Promise<TickRecord | null> {
    return this.serial(async () => {
      if (this.stopped) return null;
      const lease = await this.o.state.leases.acquire(
        'scheduler.tick',
        this.host.holder,
        Math.max(this.host.leaseMs, 60_000),
      );
      if (!lease) return null;
      try {
        const r = {
          dispatched: [] as string[],
          resumed: [] as string[],
          abandoned: [] as string[],
          standDowns: [] as string[],
        };
        await this.resumeAll(r);
        await this.dispatchDue(r);
        const pruned = await this.pruneAll(r.standDowns);
        // A failing staleness check never costs the tick its record.
        await this.checkStale().catch((err) =>
          this.o.log.warn(
            { event: 'stale-check-failed', code: (err as { code?: unknown }).code },
            'stale check failed; retried at the next tick',
          ),
        );
        const record: TickRecord = {
          at: this.now().toISOString(),
          by: this.host.holder,
          reason,
          ...r,
          standDowns: [...new Set(r.standDowns)],
          pruned: Object.fromEntries(pruned.map((p) => [p.job, p.pruned.length])),
        };
        await this.o.state.settings.set(TICK_SETTING, record);
        this.o.log.info(
          {
            event: 'scheduler-tick',
            reason,
            dispatched: r.dispatched.length,
            resumed: r.resumed.length,
            standDowns: record.standDowns.length,
          },
          'scheduler tick',
        );
        return record;
      } finally {
        await this.o.state.leases.release('scheduler.tick', this.host.holder).catch(() => undefined);
      }
    });
  }

  /**
   * Raises `backup-stale` once per stale episode of each enabled job (see the module comment);
   * clears the latch of jobs found fresh again and of deleted jobs. Returns the jobs raised now.
   */
  async checkStale(): Promise<string[]> {
    const settings = this.o.state.settings;
    const raised: string[] = [];
    const now = this.now();
    const records = await this.o.state.jobs.list();
    for (const rec of records) {
      const job = runJobOf(rec);
      if (job.enabled === false) continue;
      const cadence = job.cadenceSeconds ?? 86_400;
      const threshold = staleThresholdSeconds(cadence);
      const ok = await this.o.state.runs.latestOk(job.id, now.toISOString());
      const since = ok ? (ok.finishedAt ?? ok.startedAt) : rec.createdAt;
      const ageMs = now.getTime() - Date.parse(since);
      const key = `${STALE_PREFIX}${job.id}`;
      if (!(ageMs > threshold * 1000)) {
        if ((await settings.get(key)) !== undefined) await settings.delete(key);
        continue;
      }
      const latch: StaleLatch = {
        raisedAt: now.toISOString(),
        lastOkRunId: ok?.id ?? null,
        lastOkAt: ok ? since : null,
        thresholdSeconds: threshold,
      };
      if (!(await settings.setIfAbsent(key, latch))) continue;
      raised.push(job.id);
      this.o.log.warn(
        { event: 'backup-stale', job: job.id, lastOkRunId: latch.lastOkRunId, thresholdSeconds: threshold },
        `job ${job.id} is stale: no ok run for more than ${threshold} s`,
      );
      this.o.events?.raise({
        name: 'backup-stale',
        jobId: job.id,
        detail: {
          thresholdSeconds: threshold,
          cadenceSeconds: cadence,
          lastOkRunId: latch.lastOkRunId,
          lastOkAt: latch.lastOkAt,
          ageSeconds: Math.floor(ageMs / 1000),
        },
      });
    }
    const live = new Set(records.map((r) => r.id));
    for (const { key } of await settings.list(STALE_PREFIX))
      if (!live.has(key.slice(STALE_PREFIX.length))) await settings.delete(key);
    return raised;
  }

  /** Applies retention to every enabled job; paused jobs stand down (recorded). */
  async pruneAll(standDowns: string[] = []): Promise<PruneResult[]> {
    const out: PruneResult[] = [];
    for (const rec of await this.o.state.jobs.list()) {
      const job = runJobOf(rec);
      if (job.enabled === false) {
        await this.standDown(job.id, 'prune');
        standDowns.push(job.id);
        continue;
      }
      out.push(
        await pruneJob(
          {
            state: this.o.state,
            destinations: this.o.destinations,
            log: this.o.log,
            now: this.o.now,
            signerPublicKey: this.o.keys.signer.publicKey,
            operationalSecretKey: this.o.keys.operational.secretKey,
            exclusive: this.host.exclusive,
          },
          job,
        ),
      );
    }
    return out;
  }

  private async standDown(jobId: string, what: 'dispatch' | 'prune'): Promise<void> {
    const key = `${STAND_DOWN_PREFIX}${jobId}`;
    const prev = ((await this.o.state.settings.get<Record<string, string>>(key)) ?? {}) as Record<
      string,
      string
    >;
    await this.o.state.settings.set(key, { ...prev, [what]: this.now().toISOString() });
    this.o.log.info(
      { event: 'job-stand-down', job: jobId, what },
      `job ${jobId} is paused: ${what} stands down`,
    );
  }

  private async dispatchDue(r: { dispatched: string[]; standDowns: string[] }): Promise<void> {
    for (const rec of await this.o.state.jobs.list()) {
      if (this.stopped) return;
      const job = runJobOf(rec);
      if (this.host.busyWith(job.id)) continue;
      const latest = (await this.o.state.runs.listForJob(job.id, { limit: 1 }))[0];
      if (latest && (latest.status === 'running' || latest.status === 'parked')) continue;
      if (!this.isDue(job, latest)) continue;
      if (job.enabled === false) {
        await this.standDown(job.id, 'dispatch');
        r.standDowns.push(job.id);
        continue;
      }
      const res = await this.host.startRun(job, 'schedule', true);
      if (res.kind === 'started' && res.runId) r.dispatched.push(res.runId);
    }
  }

  private async resumeAll(r: { resumed: string[]; abandoned: string[] }): Promise<void> {
    const candidates = await this.o.state.runs.listByStatus(['running', 'parked']);
    for (const c of candidates) {
      if (this.stopped) return;
      if (this.host.busyWith(c.jobId)) continue;
      if (c.status === 'parked') {
        const retryAt = (c.detail as { retryAt?: string }).retryAt;
        if (retryAt && Date.parse(retryAt) > this.now().getTime()) continue;
      }
      this.host.claim(c.jobId);
      let launched = false;
      try {
        const job = await this.o.state.jobs.get(c.jobId);
        const lease = await this.host.acquireLock(c.jobId);
        if (!lease) {
          launched = true; // nothing of ours to release
          continue;
        }
        const run = await this.o.state.runs.get(c.id);
        if (!run || (run.status !== 'running' && run.status !== 'parked') || this.host.running(c.jobId))
          continue;
        if (!job) {
          await this.o.lifecycle.abandon(c.jobId, run, 'job deleted');
          r.abandoned.push(run.id);
          continue;
        }
        const config = runJobOf(job);
        if (config.enabled === false && run.status === 'parked') continue;
        const d = run.detail as { strikes?: number; interrupted?: string | null };
        const strike = run.status === 'running' && d.interrupted !== 'shutdown' ? 1 : 0;
        const strikes = (d.strikes ?? 0) + strike;
        if (strikes >= (this.o.strikeBudget ?? 3) || this.o.lifecycle.tooOld(run)) {
          await this.o.lifecycle.abandon(
            c.jobId,
            run,
            strikes >= (this.o.strikeBudget ?? 3) ? 'strike budget spent' : 'past the give-up age',
          );
          r.abandoned.push(run.id);
          continue;
        }
        const resumed = await this.o.state.runs.transition(run.id, ['running', 'parked'], {
          status: 'running',
          detail: {
            strikes,
            interrupted: null,
            retryAt: null,
            holder: this.host.holder,
            resumedAt: this.now().toISOString(),
          },
        });
        if (!resumed) continue;
        this.o.log.info(
          { event: 'run-resumed', job: c.jobId, runId: run.id, from: run.status, strikes },
          `run ${run.id} of job ${c.jobId} resumed from its checkpoint`,
        );
        this.host.launch(config, resumed, lease);
        launched = true;
        r.resumed.push(run.id);
      } finally {
        this.host.unclaim(c.jobId);
        if (!launched) await this.host.releaseLock(c.jobId);
      }
    }
  }
}
