/**
 * Restore drills, manual and scheduled (docs/restore.md section 9): one drill at a time across
 * every engine process on one state store, its evidence recorded and audited, and the scheduler
 * that lets each job's restore-test cadence (`restoreTestCadenceSeconds`, docs/jobs.md) drive
 * drills of the job's latest ok run.
 *
 * Scheduling rule: a job is due when it is not paused, has a cadence, has an ok run, and its latest
 * drill (any trigger, any verdict) started at least `cadence` seconds ago, or it has none. Each
 * check (every `intervalSeconds`, default 60, and once at start) drills due jobs one after another,
 * most overdue first. A drill that ends `error` counts as a drill, so a broken job is retried at
 * its cadence, not in a loop.
 *
 * One at a time: a drill runs under the lease `drill.session` in the state store, fenced
 * (src/tasks/leased-tasks.ts: renewed with its fencing token while it runs, checked before the
 * evidence is recorded, so a drill whose lease was taken over records nothing; a crashed holder's
 * lease expires), so two engine processes never drill at once; the live session is kept in the
 * setting `drill.session` so either process can name it.
 *
 * Scratch: a drill restores only into the owner-configured scratch targets (ENGINE_CONNECTIONS_FILE
 * `scratch`: a directory, default `<data dir>/drills`; a redis connection and database; an s3
 * connection, bucket and prefix), each drill in its own fresh namespace (DrillNamespace), recorded
 * in the setting `drill.scratch.<id>` before anything is written and removed at the end, pass or
 * fail; a namespace left by a crash is removed at the next start (or the next drill).
 *
 * Notification events (src/events.ts): a drill whose evidence was recorded (the commit point,
 * fenced) raises `drill-passed` (verdict `pass`) or `drill-failed` (`fail` or `error`); a drill
 * whose lease was lost records nothing and raises nothing.
 *
 * Security-relevant behaviour: a drill never writes into a job's source (whatever the job names,
 * the write goes to scratch only; a redis/s3 job without a scratch target ends with an `error`
 * verdict); evidence and audit events hold counts, timings, verdicts and record names of
 * mismatches, never bytes, keys or credentials.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  type DrillEvidence,
  type DrillScratch,
  estimateRto,
  type RtoEstimate,
  removeFilesScratch,
  removeRedisScratch,
  removeS3Scratch,
  runDrill,
} from '@coffer/restore';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { RedisConnection, S3Connection } from '../connections/config.ts';
import { redisConnectorUrl, s3ConnectorSettings } from '../connections/resolve.ts';
import type { EngineEvents } from '../events.ts';
import { jobDestinations } from '../jobs/index.ts';
import { DRILL_EVIDENCE_PREFIX } from '../restores/index.ts';
import { acquirePin, pinId, releasePin } from '../runs/pins.ts';
import { reclaimUnderWay } from '../runs/reclaim-marker.ts';
import { archiveRunOf } from '../runs/unchanged.ts';
import { LeasedTasks } from '../tasks/leased-tasks.ts';

export const DRILL_LEASE = 'drill.session';
export const DRILL_SESSION_SETTING = 'drill.session';
/** Settings `drill.scratch.<id>`: a drill's scratch namespace, recorded before it writes. */
export const DRILL_SCRATCH_PREFIX = 'drill.scratch.';

/**
 * One drill's own namespace under each owner-configured scratch target (ENGINE_CONNECTIONS_FILE
 * `scratch`): a fresh directory, a random key prefix in the scratch redis database, a random
 * sub-prefix in the scratch bucket. Names and ids only, never a credential.
 */
export interface DrillNamespace {
  id: string;
  sessionId: string;
  holder: string;
  job: string;
  createdAt: string;
  files: string;
  redis?: { connection: string; db: number; prefix: string };
  s3?: { connection: string; bucket: string; prefix: string };
}

export interface DrillSession {
  sessionId: string;
  job: string;
  runId: string;
  trigger: 'manual' | 'schedule';
  startedAt: string;
  holder: string;
}

export interface DrillSchedulerOptions {
  /** Seconds between cadence checks (default 60). */
  intervalSeconds?: number;
  /** Lease time-to-live of a running drill, renewed at a third of it (default 60 s). */
  leaseSeconds?: number;
  /** The clock (tests inject one); evidence times and cadence checks use it. */
  now?: () => Date;
  /**
   * Test-only: awaited right before a drill's commit point (its evidence and audit event), so a
   * test can take the drill lease over at that moment. Never set from the environment.
   */
  beforeRecord?: (session: DrillSession) => Promise<void>;
  /** The notification event bus (the plugin passes app.events); absent: nothing is raised. */
  events?: EngineEvents | null;
}

export type DrillStart =
  | { kind: 'started'; session: DrillSession; done: Promise<DrillEvidence | null> }
  | { kind: 'busy'; sessionId: string | null }
  /** Retention is reclaiming the job's packs (runs/reclaim-marker.ts): try again shortly. */
  | { kind: 'reclaiming' }
  | { kind: 'not-found'; what: 'job' | 'run' }
  | { kind: 'no-key' }
  | { kind: 'not-due' };

export class DrillService {
  readonly holder: string;
  private readonly app: FastifyInstance;
  private readonly o: DrillSchedulerOptions;
  private readonly now: () => Date;
  private current: DrillSession | null = null;
  private lastEvidence: DrillEvidence | null = null;
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<string[]> | null = null;
  private running: Promise<unknown> | null = null;
  private sweeping: Promise<number> | null = null;
  private stopped = false;
  /** The drill of this process under the `drill.session` lease (fenced; see src/tasks/). */
  private readonly tasks: LeasedTasks;

  constructor(app: FastifyInstance, options: DrillSchedulerOptions = {}) {
    this.app = app;
    this.o = options;
    this.now = options.now ?? (() => new Date());
    // The run service's persisted instance id: a restarted engine takes its own lease back at once.
    this.holder = `${app.runs.holder}:drills`;
    this.tasks = new LeasedTasks({
      leases: app.state.leases,
      holder: this.holder,
      ttlMs: this.leaseMs,
      onLost: (_key, lease, reason) =>
        app.log.warn(
          { event: 'drill-lease-lost', fence: lease.fence, reason },
          'drill stopped: its lease was lost; this process records no evidence for it',
        ),
    });
  }

  private get leaseMs(): number {
    return (this.o.leaseSeconds ?? 60) * 1000;
  }

  /** The drill running in this process, if any. */
  get active(): DrillSession | null {
    return this.current;
  }

  get last(): DrillEvidence | null {
    return this.lastEvidence;
  }

  /** The live session of any process (from the state store), or null. */
  async liveSession(): Promise<DrillSession | null> {
    if (this.current) return this.current;
    const st = this.app.state;
    const lease = await st.leases.get(DRILL_LEASE);
    if (!lease || lease.expiresAt <= Date.now()) return null;
    return (await st.settings.get<DrillSession>(DRILL_SESSION_SETTING)) ?? null;
  }

  /** Every recorded evidence, newest first. */
  async evidence(): Promise<DrillEvidence[]> {
    return (await this.app.state.settings.list(DRILL_EVIDENCE_PREFIX))
      .map((s) => s.value as DrillEvidence)
      .sort((a, b) => (a.startedAt < b.startedAt ? 1 : a.startedAt > b.startedAt ? -1 : 0));
  }

  /** The latest drill of every job (null for a job never drilled), and the live session. */
  async summary() {
    const all = await this.evidence();
    const jobs = (await this.app.state.jobs.list()).map((j) => {
      const last = all.find((e) => e.job === j.id) ?? null;
      return {
        job: j.id,
        lastDrill: last
          ? {
              id: last.id,
              runId: last.runId,
              verdict: last.verdict,
              startedAt: last.startedAt,
              durationMs: last.durationMs,
            }
          : null,
      };
    });
    return { jobs, running: await this.liveSession() };
  }

  /** Recovery-time estimate per job and for the fleet, from the drill history. */
  async rto(): Promise<RtoEstimate> {
    const jobs = (await this.app.state.jobs.list()).map((j) => j.id);
    return estimateRto(await this.evidence(), { jobs });
  }

  /**
   * Starts a drill of `runId` (default: the job's latest ok run) in the background. `request` is
   * the HTTP request of a manual drill (its caller is the audit actor); absent: the engine.
   * Resolves once the lease is held; `done` settles with the evidence (null when it could not be
   * recorded). Never throws for a busy lease or a missing job/run/key (see DrillStart).
   */
  async start(
    jobId: string,
    options: { runId?: string; trigger: 'manual' | 'schedule'; request?: FastifyRequest },
  ): Promise<DrillStart> {
    const { state, keys, destinations } = this.app;
    if (this.current) return { kind: 'busy', sessionId: this.current.sessionId };
    const job = await state.jobs.get(jobId);
    if (!job) return { kind: 'not-found', what: 'job' };
    const run = options.runId ? await state.runs.get(options.runId) : await state.runs.latestOk(job.id);
    if (!run || run.jobId !== job.id) return { kind: 'not-found', what: 'run' };
    const key = keys.operational?.secretKey;
    if (!key) return { kind: 'no-key' };
    // An unchanged run (skipUnchanged) has no archive of its own: drill the one that holds its data.
    const archiveRunId = await archiveRunOf(state.runs, run);
    const lease = await this.tasks.acquire(DRILL_LEASE);
    const mine = this.current as DrillSession | null; // set meanwhile by a concurrent start
    if (!lease || mine) {
      const other = await state.settings.get<DrillSession>(DRILL_SESSION_SETTING);
      return { kind: 'busy', sessionId: mine?.sessionId ?? other?.sessionId ?? null };
    }
    // Under the lease, a scheduled drill checks again that it is still due: another process may
    // have drilled the job between this one's check and its lease.
    if (options.trigger === 'schedule' && !(await this.due()).includes(job.id)) {
      await this.tasks.release(lease);
      return { kind: 'not-due' };
    }
    const session: DrillSession = {
      sessionId: `drs_${randomBytes(12).toString('hex')}`,
      job: job.id,
      runId: run.id,
      trigger: options.trigger,
      startedAt: this.now().toISOString(),
      holder: this.holder,
    };
    // Retention keeps the drilled run until the drill ends (released in `done`).
    const pin = {
      id: pinId.drill(session.sessionId),
      purpose: 'drill' as const,
      job: job.id,
      runId: archiveRunId,
    };
    await acquirePin(state.settings, pin).catch(async (e) => {
      await this.tasks.release(lease);
      throw e;
    });
    // Pinned first, then the reclaim marker read (runs/reclaim-marker.ts): a reclaim of the job
    // that started before the pin could repack the packs the drill is about to read.
    let reclaiming: boolean;
    try {
      reclaiming = await reclaimUnderWay(state, job.id, this.now());
    } catch (e) {
      await releasePin(state.settings, pin.id);
      await this.tasks.release(lease);
      throw e;
    }
    if (reclaiming) {
      await releasePin(state.settings, pin.id);
      await this.tasks.release(lease);
      return { kind: 'reclaiming' };
    }
    // A concurrent start in this process took the (re-entrant) lease meanwhile: it drills.
    const raced = this.current as DrillSession | null;
    if (raced || this.tasks.has(DRILL_LEASE)) {
      await releasePin(state.settings, pin.id);
      return { kind: 'busy', sessionId: raced?.sessionId ?? null };
    }
    this.current = session;
    // Recording the session can fail (the state store unavailable): the drill then never starts,
    // and must not stay current (every later drill would answer busy, and an engine with a drill
    // in flight never releases its idle memory) nor keep its lease and pin.
    try {
      await state.settings.set(DRILL_SESSION_SETTING, session);
    } catch (e) {
      this.current = null;
      await releasePin(state.settings, pin.id).catch(() => undefined);
      await this.tasks.release(lease).catch(() => undefined);
      throw e;
    }
    const actor = options.request
      ? this.app.audit.actorOf(options.request)
      : { actor: { email: null, subject: null, method: 'engine' as const } };
    const dests = jobDestinations(job.config);
    const store = destinations.get(dests[0] ?? 'default') ?? destinations.get('default')!;
    // Under the lease, fenced: renewed with its fencing token; lost (taken over after this process
    // stood still past its expiry), the drill records no evidence, no audit event, and leaves the
    // session record to the new holder.
    const handle = this.tasks.adopt(DRILL_LEASE, lease, async (ctx): Promise<DrillEvidence | null> => {
      let ns: DrillNamespace | null = null;
      try {
        // Under the lease no other drill runs anywhere: a namespace still recorded is a crashed one.
        await this.sweepScratch(true);
        const prepared = this.prepareScratch(
          session,
          String((job.config.source as { type?: unknown } | undefined)?.type ?? ''),
        );
        ns = prepared.ns;
        // Recorded before anything is written, so a crash mid-drill is cleaned at the next start.
        await state.settings.set(`${DRILL_SCRATCH_PREFIX}${ns.id}`, ns);
        mkdirSync(ns.files, { recursive: true, mode: 0o700 });
        const ev = await runDrill({
          store,
          job: job.id,
          runId: run.id,
          archiveRunId,
          operationalSecretKey: key,
          signerPublicKey: keys.signer.publicKey,
          trigger: options.trigger,
          now: this.now,
          scratch: prepared.scratch,
        });
        // Pass or fail, the scratch copy goes before the evidence is recorded: whoever sees the
        // evidence sees a drill that left nothing behind (or logged why it could not).
        const used = ns;
        ns = null;
        await this.removeScratch(used);
        await this.o.beforeRecord?.(session);
        // The commit point: only the lease's holder records the drill.
        await ctx.lease.assertHeld();
        await state.settings.set(`${DRILL_EVIDENCE_PREFIX}${ev.id}`, ev);
        this.lastEvidence = ev;
        await this.app.audit.append({
          ...actor,
          action: 'restore-drill',
          outcome: ev.verdict === 'pass' ? 'applied' : 'failed',
          target: job.id,
          detail: {
            drillId: ev.id,
            runId: ev.runId,
            ...(ev.archiveRunId === ev.runId ? {} : { archiveRunId: ev.archiveRunId }),
            trigger: ev.trigger,
            verdict: ev.verdict,
            records: ev.records,
            mismatched: ev.mismatched.length,
          },
        });
        this.o.events?.raise({
          name: ev.verdict === 'pass' ? 'drill-passed' : 'drill-failed',
          jobId: job.id,
          detail: {
            drillId: ev.id,
            runId: ev.runId,
            trigger: ev.trigger,
            verdict: ev.verdict,
            records: ev.records,
            mismatched: ev.mismatched.length,
            durationMs: ev.durationMs,
            reason: ev.reason ?? null,
          },
        });
        this.app.log.info(
          { event: 'drill-finished', job: job.id, runId: run.id, verdict: ev.verdict, trigger: ev.trigger },
          'restore drill finished',
        );
        return ev;
      } catch (e) {
        if (!ctx.lost)
          this.app.log.warn({ event: 'drill-failed', code: (e as { code?: unknown }).code }, 'drill failed');
        return null;
      } finally {
        // A drill that threw before its removal above: its namespace goes here; one that cannot be
        // removed now stays recorded and is retried at the next drill or start.
        if (ns !== null) await this.removeScratch(ns);
        this.current = null;
        await releasePin(state.settings, pin.id);
        // The session record belongs to whoever holds the lease now (LeasedTasks releases ours).
        if (!ctx.lost) await state.settings.delete(DRILL_SESSION_SETTING).catch(() => undefined);
        // A drill reads and restores a whole run: its memory goes back once nothing else runs.
        this.app.runs.idleMemory.settled();
      }
    });
    const done = handle.done.then((ev) => ev ?? null);
    this.running = done;
    return { kind: 'started', session, done };
  }

  /**
   * The drill's namespace and the runDrill scratch pointing into it. A redis or s3 job gets its
   * scratch only from the configured scratch target; without one (or when its connection's
   * credentials cannot be read) runDrill ends with an `error` verdict and writes nothing.
   */
  private prepareScratch(
    session: DrillSession,
    sourceType: string,
  ): { ns: DrillNamespace; scratch: DrillScratch } {
    const connections = this.app.config.connections;
    const id = randomBytes(8).toString('hex');
    const ns: DrillNamespace = {
      id,
      sessionId: session.sessionId,
      holder: this.holder,
      job: session.job,
      createdAt: this.now().toISOString(),
      files: join(connections.scratch.files, `drill-${id}`),
    };
    const scratch: DrillScratch = { dir: ns.files };
    const sr = connections.scratch.redis;
    if (sourceType === 'redis' && sr) {
      const c = connections.connections.get(sr.connection) as RedisConnection;
      try {
        ns.redis = { connection: sr.connection, db: sr.db, prefix: `coffer-scratch:${id}:` };
        scratch.redis = { url: redisConnectorUrl(c, connections), db: sr.db, prefix: ns.redis.prefix };
      } catch {
        delete ns.redis;
      }
    }
    const ss = connections.scratch.s3;
    if (sourceType === 's3' && ss) {
      const c = connections.connections.get(ss.connection) as S3Connection;
      try {
        ns.s3 = { connection: ss.connection, bucket: ss.bucket, prefix: `${ss.prefix}drill-${id}` };
        scratch.s3 = { bucket: ss.bucket, prefix: ns.s3.prefix, ...s3ConnectorSettings(c, connections) };
      } catch {
        delete ns.s3;
      }
    }
    return { ns, scratch };
  }

  /** Removes a namespace's scratch copy; forgets the namespace only once all of it is gone. */
  private async removeScratch(ns: DrillNamespace): Promise<boolean> {
    const connections = this.app.config.connections;
    try {
      // A recorded namespace is removed only when it has the shape this service gives one, so a
      // damaged or forged settings row can never point the removal at anything else.
      const tag = `drill-${ns.id}`;
      if (
        !/^[0-9a-f]{16}$/.test(ns.id) ||
        basename(ns.files) !== tag ||
        (ns.redis !== undefined &&
          (ns.redis.prefix !== `coffer-scratch:${ns.id}:` ||
            ns.redis.connection !== connections.scratch.redis?.connection ||
            ns.redis.db !== connections.scratch.redis?.db)) ||
        (ns.s3 !== undefined &&
          (ns.s3.prefix !== `${connections.scratch.s3?.prefix}${tag}` ||
            ns.s3.connection !== connections.scratch.s3?.connection ||
            ns.s3.bucket !== connections.scratch.s3?.bucket))
      ) {
        this.app.log.warn(
          { event: 'drill-scratch-ignored', namespace: String(ns.id) },
          'a drill scratch record does not match the configured scratch targets (changed since?); remove its copy by hand',
        );
        await this.app.state.settings.delete(`${DRILL_SCRATCH_PREFIX}${ns.id}`);
        return false;
      }
      await removeFilesScratch(ns.files);
      if (ns.redis) {
        const c = connections.connections.get(ns.redis.connection);
        if (c?.type !== 'redis') throw new Error('scratch redis connection no longer configured');
        await removeRedisScratch(redisConnectorUrl(c, connections), ns.redis.db, ns.redis.prefix);
      }
      if (ns.s3) {
        const c = connections.connections.get(ns.s3.connection);
        if (c?.type !== 's3') throw new Error('scratch s3 connection no longer configured');
        await removeS3Scratch({
          bucket: ns.s3.bucket,
          prefix: ns.s3.prefix,
          ...s3ConnectorSettings(c, connections),
        });
      }
      await this.app.state.settings.delete(`${DRILL_SCRATCH_PREFIX}${ns.id}`);
      return true;
    } catch (e) {
      this.app.log.warn(
        { event: 'drill-scratch-left', namespace: ns.id, code: (e as { code?: unknown }).code },
        `drill scratch namespace ${ns.id} could not be removed yet; retried at the next drill or start`,
      );
      return false;
    }
  }

  /**
   * Removes the scratch copies of drills that died mid-way. `underLease`: this process holds the
   * drill lease, so every recorded namespace is a dead drill's. Otherwise (at start) a namespace
   * is removed when it was this engine's (a previous life of the same instance) or when no drill
   * lease is live anywhere.
   */
  async sweepScratch(underLease = false): Promise<number> {
    const st = this.app.state;
    let removed = 0;
    for (const { value } of await st.settings.list(DRILL_SCRATCH_PREFIX)) {
      const ns = value as DrillNamespace;
      if (this.current && ns.sessionId === this.current.sessionId && !underLease) continue;
      if (!underLease && ns.holder !== this.holder) {
        const lease = await st.leases.get(DRILL_LEASE);
        if (lease && lease.expiresAt > Date.now()) continue;
      }
      if (await this.removeScratch(ns)) {
        removed++;
        this.app.log.info(
          { event: 'drill-scratch-removed', namespace: ns.id, job: ns.job },
          `removed the scratch copy of an interrupted drill of job ${ns.job}`,
        );
      }
    }
    return removed;
  }

  /** Jobs due a scheduled drill now, most overdue first. */
  async due(): Promise<string[]> {
    const { state } = this.app;
    const all = await this.evidence();
    const now = this.now().getTime();
    const due: Array<{ job: string; overdue: number }> = [];
    for (const rec of await state.jobs.list()) {
      const cadence = rec.config.restoreTestCadenceSeconds;
      if (typeof cadence !== 'number' || !(cadence > 0) || rec.config.enabled === false) continue;
      const last = all.find((e) => e.job === rec.id);
      const overdue = last ? now - Date.parse(last.startedAt) - cadence * 1000 : Number.POSITIVE_INFINITY;
      if (overdue < 0) continue;
      if (!(await state.runs.latestOk(rec.id))) continue;
      due.push({ job: rec.id, overdue });
    }
    return due.sort((a, b) => b.overdue - a.overdue).map((d) => d.job);
  }

  /**
   * One cadence check: drills every due job, one after another (waiting for each). Returns the
   * jobs drilled. Concurrent calls share one check; another process's drill makes it stop early.
   */
  check(): Promise<string[]> {
    this.checking ??= (async () => {
      const drilled: string[] = [];
      try {
        for (const job of await this.due()) {
          if (this.stopped) break;
          const r = await this.start(job, { trigger: 'schedule' });
          if (r.kind === 'busy') break;
          if (r.kind !== 'started') continue;
          await r.done;
          drilled.push(job);
        }
      } catch (e) {
        this.app.log.warn(
          { event: 'drill-check-failed', code: (e as { code?: unknown }).code },
          'drill check failed',
        );
      } finally {
        this.checking = null;
      }
      return drilled;
    })();
    return this.checking;
  }

  /** Starts the cadence checks (one now, then every interval). */
  startScheduler(): void {
    if (this.timer || this.stopped) return;
    const every = Math.max(1, this.o.intervalSeconds ?? 60) * 1000;
    this.timer = setInterval(() => void this.check(), every);
    this.timer.unref();
    void this.check();
  }

  /** Stops the periodic checks (a drill running now finishes; `check` still works). */
  stopScheduler(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Starts the start-time sweep of crashed drills' scratch copies (once). */
  startSweep(): void {
    this.sweeping ??= this.sweepScratch().catch((e) => {
      this.app.log.warn(
        { event: 'drill-scratch-sweep-failed', code: (e as { code?: unknown }).code },
        'scratch sweep failed',
      );
      return 0;
    });
  }

  /** The start-time sweep (tests wait for it), or null when it was not started. */
  get sweep(): Promise<number> | null {
    return this.sweeping;
  }

  /** Stops the checks for good and waits for a running drill to finish (before close). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopScheduler();
    await this.sweeping?.catch(() => undefined);
    await this.checking?.catch(() => undefined);
    await this.running?.catch(() => undefined);
  }
}
