/**
 * The run service: the facade the routes, drills and restores use (trigger, history holder,
 * start and stop), and dispatch under the run lock. One concept per file around it:
 * - scheduler.ts: the reconciliation tick and the light poll (what is due, what to resume);
 * - lifecycle.ts: the run record's transitions (settle, park, abandon, clean-up);
 * - executor.ts: one attempt of one run (read, seal, read back);
 * - instance-id.ts: this process's holder id and run ids; destinations.ts: the stores runs see;
 * - src/tasks/leased-tasks.ts: the run lock as a leased task (renewal, fencing, abort, stop).
 *
 * Run lock: a lease `run:<job>` in the state store, taken before a run record is created or
 * resumed and renewed (with its fencing token) while it runs, so two engine processes on one
 * database never run one job twice; a crashed holder's lease expires and any replica resumes the
 * run from its checkpoint. The holder id is persisted in the data directory, so a restarted engine
 * takes its own runs back at once.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { holdLease, isStateError, type Lease, type RunRecord, type State } from '@coffer/state';
import type { EngineEvents } from '../events.ts';
import { jobDestinations, runJobOf } from '../jobs/index.ts';
import { LeasedTasks } from '../tasks/leased-tasks.ts';
import { baseCacheWeightOf, ChunkedBaseCache } from './base-cache.ts';
import { runDestinations } from './destinations.ts';
import {
  type AttemptOutcome,
  attemptRun,
  type ExecutorDeps,
  type RunJob,
  type RunKeys,
  type RunLogger,
} from './executor.ts';
import { type FaultRegistry, faultySource } from './faults.ts';
import { type IdleMemory, type IdleMemoryOptions, idleMemory } from './idle-memory.ts';
import { loadInstanceId, newRunId, runLock } from './instance-id.ts';
import { DEFAULT_LADDER_SECONDS, RunLifecycle } from './lifecycle.ts';
import { REASON_LEASE_LOST } from './reasons.ts';
import { reclaimUnderWay } from './reclaim-marker.ts';
import { type JobHold, type PackReclaimPlan, type PruneResult, planPackReclaim } from './retention.ts';
import {
  RunScheduler,
  STALE_PREFIX,
  STAND_DOWN_PREFIX,
  staleThresholdSeconds,
  TICK_SETTING,
  type TickRecord,
} from './scheduler.ts';
import { openJobSource, type RunSource } from './source.ts';

export {
  DEFAULT_LADDER_SECONDS,
  newRunId,
  STALE_PREFIX,
  STAND_DOWN_PREFIX,
  staleThresholdSeconds,
  TICK_SETTING,
  type TickRecord,
};

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
  /** The notification event bus (app.events) the lifecycle and the stale check raise into. */
  events?: EngineEvents | null;
  executor?: Pick<
    ExecutorDeps,
    'checkpointIntervalMs' | 'checkpointCostShare' | 'workers' | 'shardSize' | 'readAhead' | 'baseCache'
  >;
  /** MiB of incremental bases kept between runs (default 100; 0: none kept; base-cache.ts). */
  baseCacheMiB?: number;
  /** When and how a finished run's memory is returned (idle-memory.ts; defaults for production). */
  idleMemory?: IdleMemoryOptions;
}

export type TriggerResult =
  | { kind: 'started'; runId: string }
  | { kind: 'in-flight'; runId: string | null }
  /** Retention is reclaiming the job's packs here (`exclusive`): no run starts until it ends. */
  | { kind: 'reclaiming' }
  | { kind: 'paused' }
  | { kind: 'not-found' };

export class RunService {
  readonly holder: string;
  /** Incremental runs' bases kept from one run of a job to the next (base-cache.ts). */
  readonly baseCache: ChunkedBaseCache;
  /** Returns a run's memory once none is in flight (idle-memory.ts). */
  readonly idleMemory: IdleMemory;
  readonly faults: FaultRegistry | null;
  private readonly o: RunServiceOptions;
  private readonly destinations: ReadonlyMap<string, ObjectStore>;
  /** The runs in flight in this process, by job, each under its run lock. */
  private readonly tasks: LeasedTasks;
  /** The run id in flight per job (for `activeRun` and the logs). */
  private readonly runIds = new Map<string, string>();
  /** Jobs whose lock this process is taking right now (the lease is re-entrant for one holder). */
  private readonly claiming = new Set<string>();
  private readonly now: () => Date;
  private readonly lifecycle: RunLifecycle;
  private readonly scheduler: RunScheduler;
  private timers: NodeJS.Timeout[] = [];
  private isStopped = false;
  /** Pack reclaim dry runs in progress by job (`planPacks`). */
  private readonly packPlans = new Map<string, Promise<PackReclaimPlan[] | null>>();
  /** Jobs held here by `exclusive` (a trigger is answered `reclaiming`). */
  private readonly holding = new Set<string>();
  /** Aborted by `stop()`: work holding a job (`exclusive`) stops at its next safe point. */
  private readonly stopping = new AbortController();

  constructor(options: RunServiceOptions) {
    this.o = options;
    this.idleMemory = idleMemory(options.idleMemory);
    this.idleMemory.addActivity(() => this.runIds.size > 0 || this.isStopped);
    this.baseCache = new ChunkedBaseCache(baseCacheWeightOf(options.baseCacheMiB));
    this.now = options.now ?? (() => new Date());
    this.holder = options.instanceId ?? loadInstanceId(options.dataDir);
    this.faults = options.faults ?? null;
    this.destinations = runDestinations(options.destinations, this.faults);
    this.tasks = new LeasedTasks({
      leases: options.state.leases,
      holder: this.holder,
      ttlMs: this.leaseMs,
      renewEveryMs: Math.max(250, Math.floor(this.leaseMs / 3)),
      // The run lock lost (taken over after this process was paused past the expiry, or
      // unrenewable until it expired): the attempt stops at once, commits nothing (the archive
      // writer checks the lock before its commit, checkpoints and the outcome are fenced writes)
      // and records nothing: the run belongs to whoever holds the lock now, or is resumed by the
      // next tick.
      onLost: (jobId, lease, reason) => {
        const runId = this.runIds.get(jobId);
        this.o.log.warn(
          { event: 'run-lease-lost', job: jobId, runId, fence: lease.fence, reason },
          `run ${runId}: run lock lost (${reason}); this attempt stops and records no outcome`,
        );
      },
    });
    this.lifecycle = new RunLifecycle({
      state: options.state,
      destinations: this.destinations,
      log: options.log,
      now: this.now,
      events: options.events ?? null,
      ...(options.giveUpSeconds === undefined ? {} : { giveUpSeconds: options.giveUpSeconds }),
      ...(options.ladderSeconds === undefined ? {} : { ladderSeconds: options.ladderSeconds }),
    });
    const service = this;
    this.scheduler = new RunScheduler(
      {
        holder: this.holder,
        get leaseMs() {
          return service.leaseMs;
        },
        get stopped() {
          return service.isStopped;
        },
        busyWith: (jobId) => this.tasks.has(jobId) || this.claiming.has(jobId),
        running: (jobId) => this.tasks.has(jobId),
        claim: (jobId) => this.claiming.add(jobId),
        unclaim: (jobId) => this.claiming.delete(jobId),
        startRun: (job, trigger, onlyIfDue) => this.startRun(job, trigger, onlyIfDue),
        launch: (job, run, lease) => this.launch(job, run, lease),
        acquireLock: (jobId) => this.tasks.acquire(runLock(jobId)),
        releaseLock: async (jobId) => {
          await this.o.state.leases.release(runLock(jobId), this.holder).catch(() => undefined);
        },
        exclusive: (jobId, work) => this.exclusive(jobId, work),
      },
      {
        state: options.state,
        keys: options.keys,
        destinations: this.destinations,
        log: options.log,
        now: this.now,
        lifecycle: this.lifecycle,
        events: options.events ?? null,
        ...(options.strikeBudget === undefined ? {} : { strikeBudget: options.strikeBudget }),
      },
    );
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
    this.isStopped = false;
    this.tasks.resume();
    const tick = (this.o.tickSeconds ?? 900) * 1000;
    const poll = (this.o.pollSeconds ?? 10) * 1000;
    this.timers.push(setInterval(() => void this.tick('timer').catch(() => undefined), tick));
    this.timers.push(setInterval(() => void this.poll().catch(() => undefined), poll));
    for (const t of this.timers) t.unref();
    void this.tick('start').catch(() => undefined);
  }

  /**
   * Holds `jobId` for `work` (retention's pack reclaim, retention.ts `JobExclusive`): marked as
   * being claimed here, so this engine neither starts nor resumes a run of it (the lease is
   * re-entrant for its holder, the claim is what keeps two uses of it in one process apart), and
   * its run lock held and renewed, so no other engine sharing the state store does. Null when a
   * run of the job holds it, here or elsewhere, or the engine is stopping.
   */
  private async exclusive<T>(jobId: string, work: (hold: JobHold) => Promise<T>): Promise<T | null> {
    if (this.isStopped || this.tasks.has(jobId) || this.claiming.has(jobId)) return null;
    this.claiming.add(jobId);
    this.holding.add(jobId);
    try {
      const lease = await holdLease(this.o.state.leases, runLock(jobId), this.holder, {
        ttlMs: this.leaseMs,
        renewEveryMs: Math.max(250, Math.floor(this.leaseMs / 3)),
        onLost: (reason) =>
          this.o.log.warn(
            { event: 'job-hold-lost', job: jobId, reason },
            `job ${jobId}: hold for the pack reclaim lost (${reason}); the reclaim stops`,
          ),
      });
      if (lease === null) return null;
      try {
        return await work({
          holder: this.holder,
          fence: lease.fence,
          signal: AbortSignal.any([lease.signal, this.stopping.signal]),
          assertHeld: () => lease.assertHeld(),
        });
      } finally {
        await lease.release().catch(() => undefined);
      }
    } finally {
      this.claiming.delete(jobId);
      this.holding.delete(jobId);
    }
  }

  /** Stops the timers and every run in flight (each saves its checkpoint); resolves when done. */
  async stop(): Promise<void> {
    this.isStopped = true;
    this.stopping.abort(new Error('the engine is stopping'));
    this.idleMemory.stop();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    await this.tasks.stop();
    await this.scheduler.settled();
  }

  /** Resolves when no run of this process is in flight. */
  async idle(): Promise<void> {
    await this.tasks.idle();
  }

  /** The run id of the job's run in flight in this process, or null. */
  activeRun(job: string): string | null {
    return this.runIds.get(job) ?? null;
  }

  /** The light poll: resumes parked and interrupted runs, dispatches due jobs. */
  poll(): ReturnType<RunScheduler['poll']> {
    return this.scheduler.poll();
  }

  /** The reconciliation tick: poll work, retention, and the tick record. */
  tick(reason = 'timer'): Promise<TickRecord | null> {
    return this.scheduler.tick(reason);
  }

  /** The staleness check of the tick (raises `backup-stale` once per episode; scheduler.ts). */
  checkStale(): Promise<string[]> {
    return this.scheduler.checkStale();
  }

  /** Applies retention to every enabled job; paused jobs stand down (recorded). */
  pruneAll(standDowns: string[] = []): Promise<PruneResult[]> {
    return this.scheduler.pruneAll(standDowns);
  }

  /**
   * The dry run of the job's pack reclaim on each of its destinations (retention.ts
   * `planPackReclaim`); a request for the job while its plan is being made shares that plan. Null
   * when the job does not exist. The route bounds how many run at once (the restore read slots).
   */
  planPacks(jobId: string): Promise<PackReclaimPlan[] | null> {
    const pending = this.packPlans.get(jobId);
    if (pending !== undefined) return pending;
    const mine = (async () => {
      const rec = await this.o.state.jobs.get(jobId);
      if (!rec) return null;
      return planPackReclaim(
        {
          destinations: this.destinations,
          now: this.now,
          signerPublicKey: this.o.keys.signer.publicKey,
          operationalSecretKey: this.o.keys.operational.secretKey,
        },
        runJobOf(rec),
      );
    })().finally(() => this.packPlans.delete(jobId));
    this.packPlans.set(jobId, mine);
    return mine;
  }

  /** True while the job's pack reclaim dry run is being made here (`planPacks` shares it). */
  planningPacks(jobId: string): boolean {
    return this.packPlans.has(jobId);
  }

  // -------------------------------------------------------------------------------------------
  // Dispatch

  /** Runs a job now (`POST /admin/trigger`). */
  async trigger(jobId: string, trigger = 'manual'): Promise<TriggerResult> {
    const job = await this.o.state.jobs.get(jobId);
    if (!job) return { kind: 'not-found' };
    const config = runJobOf(job);
    if (config.enabled === false) return { kind: 'paused' };
    return this.startRun(config, trigger, false);
  }

  private async startRun(job: RunJob, trigger: string, onlyIfDue: boolean): Promise<TriggerResult> {
    const mine = this.runIds.get(job.id);
    if (mine) return { kind: 'in-flight', runId: mine };
    if (this.holding.has(job.id)) return { kind: 'reclaiming' };
    if (this.isStopped || this.claiming.has(job.id)) return { kind: 'in-flight', runId: null };
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
    const lease = await this.tasks.acquire(runLock(job.id));
    // Another engine holds the job: reclaiming its packs (its marker names it), or running it.
    if (!lease && (await reclaimUnderWay(this.o.state, job.id, this.now()).catch(() => false)))
      return { kind: 'reclaiming' };
    if (!lease || this.tasks.has(job.id))
      return { kind: 'in-flight', runId: this.runIds.get(job.id) ?? null };
    let started: RunRecord;
    try {
      // Re-check under the lock: another replica may have run it meanwhile.
      const again = (await this.o.state.runs.listForJob(job.id, { limit: 1 }))[0];
      if (again && (again.status === 'running' || again.status === 'parked')) {
        await this.o.state.leases.release(runLock(job.id), this.holder);
        return { kind: 'in-flight', runId: again.id };
      }
      if (onlyIfDue && !this.scheduler.isDue(job, again)) {
        await this.o.state.leases.release(runLock(job.id), this.holder);
        return { kind: 'in-flight', runId: null };
      }
      const prev = await this.o.state.runs.latestOk(job.id);
      const destIds = jobDestinations(job);
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

  /** Runs `run` under the already acquired run lock, as a leased task (fenced, stopped on loss). */
  private launch(job: RunJob, run: RunRecord, lease: Lease): void {
    this.runIds.set(job.id, run.id);
    this.tasks.adopt(job.id, lease, async (ctx) => {
      try {
        let outcome: AttemptOutcome;
        const deps = { ...this.executorDeps(), lease: ctx.lease };
        for (let retries = 0; ; retries++) {
          outcome = await attemptRun(deps, job, run, ctx.signal);
          // A record vanished mid-stream: resume from the checkpoint at once (it is then left out).
          if (outcome.kind !== 'retry' || retries >= 3 || ctx.signal.aborted) break;
        }
        if (ctx.lost) {
          this.o.log.warn(
            {
              event: 'run-attempt-stopped',
              job: job.id,
              runId: run.id,
              fence: lease.fence,
              reason: REASON_LEASE_LOST,
              cause: ctx.lease.lostReason,
            },
            `run ${run.id}: attempt ended: ${REASON_LEASE_LOST}`,
          );
          return;
        }
        await this.lifecycle.settle(job, run, outcome, ctx.lease);
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
        this.runIds.delete(job.id);
        this.idleMemory.settled();
      }
    });
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
      baseCache: this.baseCache,
      ...(this.o.executor ?? {}),
    };
  }
}

export function createRunService(options: RunServiceOptions): RunService {
  return new RunService(options);
}
