/**
 * The run service: the scheduler (reconciliation tick), dispatch under the run lock, the run
 * lifecycle in the state store, retention, and graceful stop.
 *
 * Lifecycle of a run (specification "States and transitions: Run"):
 *   running --(sealed and read back)--> ok
 *   running --(fault classified)--> failed (one closed-list reason + cause digest)
 *   running --(429 / 503 SlowDown)--> parked (checkpoint kept; retry ladder; no strike)
 *   parked  --(retryAt reached)--> running (resumed from its checkpoint)
 *   running, interrupted (crash / lost lease) --(next tick or poll)--> running, resumed; each such
 *     resume is a strike; at the strike budget, or past the give-up age, the run is `abandoned`.
 *
 * Run lock: a lease `run:<job>` in the state store, taken before a run record is created or
 * resumed and renewed while it runs, so two engine processes on one database never run one job
 * twice; a crashed holder's lease expires and any replica resumes the run from its checkpoint. The
 * holder id is persisted in the data directory, so a restarted engine takes its own runs back at once.
 *
 * The tick (every `tickSeconds`, default 900, and once at start) runs under the lease
 * `scheduler.tick`: it resumes interrupted and due parked runs, dispatches due jobs, applies
 * retention, and records itself in the setting `scheduler.lastTick` (preflight's cron-tick item). A
 * lighter poll (every `pollSeconds`, default 10) dispatches due jobs and resumes parked runs, so a new
 * job's first run and the retry ladder do not wait for the next tick. A paused job
 * (`enabled: false`) gets neither dispatch nor prune, and the stand-down is recorded.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { ObjectStore } from '@coffer/objectstore';
import {
  isStateError,
  keepLease,
  type Lease,
  type LeaseToken,
  type RunRecord,
  type State,
} from '@coffer/state';
import {
  type AttemptOutcome,
  attemptRun,
  type ExecutorDeps,
  type RunJob,
  type RunKeys,
  type RunLogger,
} from './executor.ts';
import { type FaultRegistry, faultySource, faultyStore } from './faults.ts';
import { REASON_LEASE_LOST, REASON_RUN_FAILED } from './reasons.ts';
import { deleteRunObjects, type PruneResult, pruneJob } from './retention.ts';
import { openJobSource, type RunSource } from './source.ts';

export const TICK_SETTING = 'scheduler.lastTick';
export const STAND_DOWN_PREFIX = 'scheduler.standDown.';
/** Patient retry ladder for throttled runs (seconds), last step repeated. */
export const DEFAULT_LADDER_SECONDS = [60, 120, 300, 600, 900, 1800, 3600];

export interface RunServiceOptions {
  state: State;
  keys: RunKeys;
  destinations: ReadonlyMap<string, ObjectStore>;
  log: RunLogger;
  /** Where the holder id is kept (`<dataDir>/instance-id`); absent: a fresh id per process. */
  dataDir?: string;
  instanceId?: string;
  tickSeconds?: number;
  pollSeconds?: number;
  leaseSeconds?: number;
  strikeBudget?: number;
  /** A run not finished this long after it started is abandoned (default 2 days). */
  giveUpSeconds?: number;
  ladderSeconds?: number[];
  /** Test-fault registry (HARNESS_TEST_FAULTS): destinations and sources are wrapped when set. */
  faults?: FaultRegistry | null;
  openSource?: (job: RunJob) => Promise<RunSource>;
  now?: () => Date;
  executor?: Pick<
    ExecutorDeps,
    'checkpointIntervalMs' | 'checkpointCostShare' | 'workers' | 'shardSize' | 'readAhead'
  >;
}

export type TriggerResult =
  | { kind: 'started'; runId: string }
  | { kind: 'in-flight'; runId: string | null }
  | { kind: 'paused' }
  | { kind: 'not-found' };

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

interface Active {
  runId: string;
  controller: AbortController;
  done: Promise<void>;
}

function loadInstanceId(dataDir: string | undefined): string {
  const fresh = `${hostname()}-${randomBytes(6).toString('hex')}`;
  if (!dataDir) return fresh;
  const file = join(dataDir, 'instance-id');
  try {
    const id = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9._-]{1,128}$/.test(id)) return id;
  } catch {
    // first start
  }
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${fresh}\n`, { flag: 'wx', mode: 0o600 });
    return fresh;
  } catch {
    return readFileSync(file, 'utf8').trim() || fresh;
  }
}

/** A new run id: UTC start time to the millisecond, then 8 random hex digits (sortable, path-safe). */
export function newRunId(now: Date): string {
  const t = now
    .toISOString()
    .replace(/[-:.]/g, '')
    .replace(/^(\d{8}T\d{6})(\d{3})Z$/, '$1$2Z');
  return `${t}-${randomBytes(4).toString('hex')}`;
}

const runLock = (job: string) => `run:${job}`;

export class RunService {
  readonly holder: string;
  readonly faults: FaultRegistry | null;
  private readonly o: RunServiceOptions;
  private readonly destinations: ReadonlyMap<string, ObjectStore>;
  private readonly active = new Map<string, Active>();
  /** Jobs whose lock this process is taking right now (the lease is re-entrant for one holder). */
  private readonly claiming = new Set<string>();
  private readonly now: () => Date;
  private timers: NodeJS.Timeout[] = [];
  private busy: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(options: RunServiceOptions) {
    this.o = options;
    this.now = options.now ?? (() => new Date());
    this.holder = options.instanceId ?? loadInstanceId(options.dataDir);
    this.faults = options.faults ?? null;
    const faults = this.faults;
    this.destinations = faults
      ? new Map([...options.destinations].map(([id, s]) => [id, faultyStore(id, s, faults)]))
      : options.destinations;
  }

  private get leaseMs(): number {
    return (this.o.leaseSeconds ?? 60) * 1000;
  }

  /** Destinations as runs see them (wrapped for fault injection when enabled). */
  get stores(): ReadonlyMap<string, ObjectStore> {
    return this.destinations;
  }

  /** Starts the timers and runs the first tick now (resuming interrupted runs). */
  start(): void {
    this.stopped = false;
    const tick = (this.o.tickSeconds ?? 900) * 1000;
    const poll = (this.o.pollSeconds ?? 10) * 1000;
    this.timers.push(setInterval(() => void this.tick('timer').catch(() => undefined), tick));
    this.timers.push(setInterval(() => void this.poll().catch(() => undefined), poll));
    for (const t of this.timers) t.unref();
    void this.tick('start').catch(() => undefined);
  }

  /** Stops the timers and every run in flight (each saves its checkpoint); resolves when done. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const a of this.active.values()) a.controller.abort();
    await Promise.allSettled([...this.active.values()].map((a) => a.done));
    await this.busy.catch(() => undefined);
  }

  /** Resolves when no run of this process is in flight. */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.allSettled([...this.active.values()].map((a) => a.done));
  }

  /** The run id of the job's run in flight in this process, or null. */
  activeRun(job: string): string | null {
    return this.active.get(job)?.runId ?? null;
  }

  // -------------------------------------------------------------------------------------------
  // Dispatch

  /** Runs a job now (`POST /admin/trigger`). */
  async trigger(jobId: string, trigger = 'manual'): Promise<TriggerResult> {
    const job = await this.o.state.jobs.get(jobId);
    if (!job) return { kind: 'not-found' };
    const config = job.config as unknown as RunJob;
    if (config.enabled === false) return { kind: 'paused' };
    return this.startRun(config, trigger, false);
  }

  private async startRun(job: RunJob, trigger: string, onlyIfDue: boolean): Promise<TriggerResult> {
    const mine = this.active.get(job.id);
    if (mine) return { kind: 'in-flight', runId: mine.runId };
    if (this.stopped || this.claiming.has(job.id)) return { kind: 'in-flight', runId: null };
    this.claiming.add(job.id);
    try {
      return await this.claimAndStart(job, trigger, onlyIfDue);
    } finally {
      this.claiming.delete(job.id);
    }
  }

  private async claimAndStart(job: RunJob, trigger: string, onlyIfDue: boolean): Promise<TriggerResult> {
    const latest = (await this.o.state.runs.listForJob(job.id, { limit: 1 }))[0];
    if (latest && (latest.status === 'running' || latest.status === 'parked'))
      return { kind: 'in-flight', runId: latest.id };
    const lease = await this.o.state.leases.acquire(runLock(job.id), this.holder, this.leaseMs);
    if (!lease || this.active.has(job.id))
      return { kind: 'in-flight', runId: this.active.get(job.id)?.runId ?? null };
    let started: RunRecord;
    try {
      // Re-check under the lock: another replica may have run it meanwhile.
      const again = (await this.o.state.runs.listForJob(job.id, { limit: 1 }))[0];
      if (again && (again.status === 'running' || again.status === 'parked')) {
        await this.o.state.leases.release(runLock(job.id), this.holder);
        return { kind: 'in-flight', runId: again.id };
      }
      if (onlyIfDue && !this.isDue(job, again)) {
        await this.o.state.leases.release(runLock(job.id), this.holder);
        return { kind: 'in-flight', runId: null };
      }
      const prev = await this.o.state.runs.latestOk(job.id);
      const destIds = job.destinations && job.destinations.length > 0 ? job.destinations : ['default'];
      const startedAt = this.now();
      started = await this.o.state.runs.start({
        id: newRunId(startedAt),
        jobId: job.id,
        prevRunId: prev?.id ?? null,
        trigger,
        status: 'running',
        startedAt: startedAt.toISOString(),
        destinations: Object.fromEntries(destIds.map((d) => [d, { state: 'pending' }])),
        detail: { holder: this.holder, strikes: 0, parks: 0 },
      });
    } catch (err) {
      await this.o.state.leases.release(runLock(job.id), this.holder).catch(() => undefined);
      throw err;
    }
    this.o.log.info(
      { event: 'run-started', job: job.id, runId: started.id, trigger },
      `run ${started.id} of job ${job.id} started (${trigger})`,
    );
    this.launch(job, started, lease);
    return { kind: 'started', runId: started.id };
  }

  private isDue(job: RunJob, latest: RunRecord | undefined): boolean {
    if (!latest) return true;
    const cadence = (job.cadenceSeconds ?? 86_400) * 1000;
    return Date.parse(latest.startedAt) + cadence <= this.now().getTime();
  }

  private launch(job: RunJob, run: RunRecord, lease: Lease): void {
    const controller = new AbortController();
    // The run lock, fenced: renewed every third of its TTL with its fencing token; lost (taken
    // over after this process was paused past the expiry, or unrenewable until it expired), the
    // attempt stops at once, commits nothing (the archive writer checks the lock before its
    // commit, checkpoints and the outcome are fenced writes) and records nothing: the run belongs
    // to whoever holds the lock now, or is resumed by the next tick.
    const held = keepLease(this.o.state.leases, lease, {
      ttlMs: this.leaseMs,
      renewEveryMs: Math.max(250, Math.floor(this.leaseMs / 3)),
      onLost: (reason) => {
        this.o.log.warn(
          { event: 'run-lease-lost', job: job.id, runId: run.id, fence: lease.fence, reason },
          `run ${run.id}: run lock lost (${reason}); this attempt stops and records no outcome`,
        );
        controller.abort();
      },
    });
    const done = (async () => {
      try {
        let outcome: AttemptOutcome;
        const deps = { ...this.executorDeps(), lease: held };
        for (let retries = 0; ; retries++) {
          outcome = await attemptRun(deps, job, run, controller.signal);
          // A record vanished mid-stream: resume from the checkpoint at once (it is then left out).
          if (outcome.kind !== 'retry' || retries >= 3 || controller.signal.aborted) break;
        }
        if (held.lostReason !== null) {
          this.o.log.warn(
            {
              event: 'run-attempt-stopped',
              job: job.id,
              runId: run.id,
              fence: lease.fence,
              reason: REASON_LEASE_LOST,
              cause: held.lostReason,
            },
            `run ${run.id}: attempt ended: ${REASON_LEASE_LOST}`,
          );
          return;
        }
        await this.settle(job, run, outcome, held);
      } catch (err) {
        const leaseLost = isStateError(err, 'ERR_STATE_LEASE_LOST');
        this.o.log.error(
          {
            event: leaseLost ? 'run-attempt-stopped' : 'run-settle-failed',
            job: job.id,
            runId: run.id,
            code: (err as { code?: unknown }).code,
            ...(leaseLost ? { fence: lease.fence, reason: REASON_LEASE_LOST } : {}),
          },
          leaseLost
            ? `run ${run.id}: attempt ended: ${REASON_LEASE_LOST}`
            : `run ${run.id}: could not record its outcome`,
        );
      } finally {
        this.active.delete(job.id);
        await held.release().catch(() => undefined);
      }
    })();
    this.active.set(job.id, { runId: run.id, controller, done });
  }

  private executorDeps(): ExecutorDeps {
    const faults = this.faults;
    const open = this.o.openSource ?? ((job: RunJob) => openJobSource(job.source, job.id));
    return {
      state: this.o.state,
      keys: this.o.keys,
      destinations: this.destinations,
      log: this.o.log,
      openSource: faults ? async (job) => faultySource(job.id, await open(job), faults) : open,
      ...(this.o.executor ?? {}),
    };
  }

  private async settle(
    job: RunJob,
    run: RunRecord,
    outcome: AttemptOutcome,
    lease: LeaseToken,
  ): Promise<void> {
    const runs = this.o.state.runs;
    // Fenced: each outcome is written only while this attempt still holds the run lock.
    const fenced = { lease };
    const at = this.now().toISOString();
    switch (outcome.kind) {
      case 'interrupted':
        await runs.transition(
          run.id,
          ['running'],
          { destinations: outcome.destinations, detail: { interrupted: 'shutdown' } },
          fenced,
        );
        this.o.log.info(
          { event: 'run-interrupted', job: job.id, runId: run.id },
          `run ${run.id} stopped; resumes on next start`,
        );
        return;
      case 'ok':
        await runs.transition(
          run.id,
          ['running'],
          {
            status: 'ok',
            reason: null,
            causeDigest: null,
            finishedAt: at,
            records: outcome.records,
            bytes: outcome.bytes,
            warnings: outcome.warnings,
            destinations: outcome.destinations,
            detail: {
              retryAt: null,
              interrupted: null,
              sourceFingerprint: outcome.fingerprint,
              unchangedFrom: outcome.unchangedFrom ?? null,
            },
          },
          fenced,
        );
        await this.o.state.checkpoints.delete(run.id);
        this.o.log.info(
          {
            event: 'run-ok',
            job: job.id,
            runId: run.id,
            records: outcome.records,
            bytes: outcome.bytes,
            warnings: outcome.warnings,
            ...(outcome.unchangedFrom ? { unchangedFrom: outcome.unchangedFrom } : {}),
          },
          outcome.unchangedFrom
            ? `run ${run.id} of job ${job.id} ok (source unchanged since ${outcome.unchangedFrom}; no new archive)`
            : `run ${run.id} of job ${job.id} ok (sealed and read back verified)`,
        );
        return;
      case 'failed':
      case 'retry': {
        const f = outcome.failure;
        await runs.transition(
          run.id,
          ['running'],
          {
            status: 'failed',
            reason: f.reason,
            causeDigest: f.causeDigest,
            finishedAt: at,
            warnings: outcome.kind === 'failed' ? outcome.warnings : 0,
            destinations: outcome.destinations,
            detail: { retryAt: null, code: f.code },
          },
          fenced,
        );
        await this.finalCleanup(job, run.id, outcome.destinations);
        this.o.log.error(
          {
            event: 'run-failed',
            job: job.id,
            runId: run.id,
            reason: f.reason,
            code: f.code,
            causeDigest: f.causeDigest,
          },
          `run ${run.id} of job ${job.id} failed: ${f.reason} [${f.causeDigest}]`,
        );
        return;
      }
      case 'parked': {
        const current = (await runs.get(run.id)) ?? run;
        const parks = Number((current.detail as { parks?: number }).parks ?? 0) + 1;
        if (this.tooOld(current)) {
          await this.abandon(job.id, current, 'throttled past the give-up age');
          return;
        }
        const ladder = this.o.ladderSeconds ?? DEFAULT_LADDER_SECONDS;
        const step = ladder[Math.min(parks - 1, ladder.length - 1)] ?? 60;
        const retryAt = new Date(this.now().getTime() + step * 1000).toISOString();
        await runs.transition(
          run.id,
          ['running'],
          {
            status: 'parked',
            causeDigest: outcome.failure.causeDigest,
            destinations: outcome.destinations,
            detail: { retryAt, parks, parkedCode: outcome.failure.code, interrupted: null },
          },
          fenced,
        );
        this.o.log.warn(
          {
            event: 'run-parked',
            job: job.id,
            runId: run.id,
            code: outcome.failure.code,
            causeDigest: outcome.failure.causeDigest,
            retryAt,
            parks,
          },
          `run ${run.id} of job ${job.id} parked (throttled); retry at ${retryAt} [${outcome.failure.causeDigest}]`,
        );
        return;
      }
    }
  }

  private tooOld(run: RunRecord): boolean {
    const limit = (this.o.giveUpSeconds ?? 2 * 86_400) * 1000;
    return this.now().getTime() - Date.parse(run.startedAt) > limit;
  }

  private async abandon(jobId: string, run: RunRecord, why: string): Promise<void> {
    await this.o.state.runs.transition(run.id, ['running', 'parked'], {
      status: 'abandoned',
      reason: run.reason ?? REASON_RUN_FAILED,
      finishedAt: this.now().toISOString(),
      detail: { retryAt: null, abandoned: why },
    });
    const job = await this.o.state.jobs.get(jobId);
    await this.finalCleanup(
      (job?.config as unknown as RunJob | undefined) ?? { id: jobId, source: { type: 'files' } },
      run.id,
      run.destinations,
    );
    this.o.log.warn(
      { event: 'run-abandoned', job: jobId, runId: run.id, why },
      `run ${run.id} of job ${jobId} abandoned (${why})`,
    );
  }

  /** A run that will never continue: drop its checkpoint and the unsealed objects it left. */
  private async finalCleanup(job: RunJob, runId: string, dests: RunRecord['destinations']): Promise<void> {
    await this.o.state.checkpoints.delete(runId).catch(() => undefined);
    for (const [id, d] of Object.entries(dests)) {
      const store = this.destinations.get(id);
      if (!store || d.state === 'verified' || d.state === 'written') continue;
      try {
        if ((await store.head(`jobs/${job.id}/runs/${runId}/manifest.json`)) === null)
          await deleteRunObjects(store, job.id, runId);
      } catch {
        // Best effort: an unreachable destination keeps its partial objects until the next prune.
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Scheduler

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
        this.holder,
        Math.max(this.leaseMs, 60_000),
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
        const record: TickRecord = {
          at: this.now().toISOString(),
          by: this.holder,
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
        await this.o.state.leases.release('scheduler.tick', this.holder).catch(() => undefined);
      }
    });
  }

  /** Applies retention to every enabled job; paused jobs stand down (recorded). */
  async pruneAll(standDowns: string[] = []): Promise<PruneResult[]> {
    const out: PruneResult[] = [];
    for (const rec of await this.o.state.jobs.list()) {
      const job = rec.config as unknown as RunJob;
      if (job.enabled === false) {
        await this.standDown(job.id, 'prune');
        standDowns.push(job.id);
        continue;
      }
      out.push(
        await pruneJob(
          {
            state: this.o.state,
            destinations: this.destinations,
            log: this.o.log,
            now: this.now,
            signerPublicKey: this.o.keys.signer.publicKey,
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
      const job = rec.config as unknown as RunJob;
      if (this.active.has(job.id) || this.claiming.has(job.id)) continue;
      const latest = (await this.o.state.runs.listForJob(job.id, { limit: 1 }))[0];
      if (latest && (latest.status === 'running' || latest.status === 'parked')) continue;
      if (!this.isDue(job, latest)) continue;
      if (job.enabled === false) {
        await this.standDown(job.id, 'dispatch');
        r.standDowns.push(job.id);
        continue;
      }
      const res = await this.startRun(job, 'schedule', true);
      if (res.kind === 'started') r.dispatched.push(res.runId);
    }
  }

  private async resumeAll(r: { resumed: string[]; abandoned: string[] }): Promise<void> {
    const candidates = await this.o.state.runs.listByStatus(['running', 'parked']);
    for (const c of candidates) {
      if (this.stopped) return;
      if (this.active.has(c.jobId) || this.claiming.has(c.jobId)) continue;
      if (c.status === 'parked') {
        const retryAt = (c.detail as { retryAt?: string }).retryAt;
        if (retryAt && Date.parse(retryAt) > this.now().getTime()) continue;
      }
      this.claiming.add(c.jobId);
      let launched = false;
      try {
        const job = await this.o.state.jobs.get(c.jobId);
        const lease = await this.o.state.leases.acquire(runLock(c.jobId), this.holder, this.leaseMs);
        if (!lease) {
          launched = true; // nothing of ours to release
          continue;
        }
        const run = await this.o.state.runs.get(c.id);
        if (!run || (run.status !== 'running' && run.status !== 'parked') || this.active.has(c.jobId))
          continue;
        if (!job) {
          await this.abandon(c.jobId, run, 'job deleted');
          r.abandoned.push(run.id);
          continue;
        }
        const config = job.config as unknown as RunJob;
        if (config.enabled === false && run.status === 'parked') continue;
        const d = run.detail as { strikes?: number; interrupted?: string | null };
        const strike = run.status === 'running' && d.interrupted !== 'shutdown' ? 1 : 0;
        const strikes = (d.strikes ?? 0) + strike;
        if (strikes >= (this.o.strikeBudget ?? 3) || this.tooOld(run)) {
          await this.abandon(
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
            holder: this.holder,
            resumedAt: this.now().toISOString(),
          },
        });
        if (!resumed) continue;
        this.o.log.info(
          { event: 'run-resumed', job: c.jobId, runId: run.id, from: run.status, strikes },
          `run ${run.id} of job ${c.jobId} resumed from its checkpoint`,
        );
        this.launch(config, resumed, lease);
        launched = true;
        r.resumed.push(run.id);
      } finally {
        this.claiming.delete(c.jobId);
        if (!launched)
          await this.o.state.leases.release(runLock(c.jobId), this.holder).catch(() => undefined);
      }
    }
  }
}

export function createRunService(options: RunServiceOptions): RunService {
  return new RunService(options);
}
