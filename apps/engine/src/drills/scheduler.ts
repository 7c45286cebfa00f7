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
 * One at a time: a drill runs under the lease `drill.session` in the state store (renewed while it
 * runs; a crashed holder's lease expires), so two engine processes never drill at once; the live
 * session is kept in the setting `drill.session` so either process can name it.
 *
 * Security-relevant behaviour: a drill writes only into a scratch target (a fresh directory under
 * `<data dir>/drills`, or a random key prefix), never into a source; evidence and audit events hold
 * counts, timings, verdicts and record names of mismatches, never bytes, keys or credentials.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type DrillEvidence, runDrill } from '@coffer/restore';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DRILL_EVIDENCE_PREFIX, sourceConfigOf } from '../routes/restore/context.ts';
import { archiveRunOf } from '../runs/unchanged.ts';

export const DRILL_LEASE = 'drill.session';
export const DRILL_SESSION_SETTING = 'drill.session';

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
}

export type DrillStart =
  | { kind: 'started'; session: DrillSession; done: Promise<DrillEvidence | null> }
  | { kind: 'busy'; sessionId: string | null }
  | { kind: 'not-found'; what: 'job' | 'run' }
  | { kind: 'no-key' }
  | { kind: 'not-due' };

declare module 'fastify' {
  interface FastifyInstance {
    drills: DrillService;
  }
}

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
  private stopped = false;

  constructor(app: FastifyInstance, options: DrillSchedulerOptions = {}) {
    this.app = app;
    this.o = options;
    this.now = options.now ?? (() => new Date());
    // The run service's persisted instance id: a restarted engine takes its own lease back at once.
    this.holder = `${app.runs.holder}:drills`;
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
    const st = this.app.engine.state;
    const lease = await st.leases.get(DRILL_LEASE);
    if (!lease || lease.expiresAt <= Date.now()) return null;
    return (await st.settings.get<DrillSession>(DRILL_SESSION_SETTING)) ?? null;
  }

  /** Every recorded evidence, newest first. */
  async evidence(): Promise<DrillEvidence[]> {
    return (await this.app.engine.state.settings.list(DRILL_EVIDENCE_PREFIX))
      .map((s) => s.value as DrillEvidence)
      .sort((a, b) => (a.startedAt < b.startedAt ? 1 : a.startedAt > b.startedAt ? -1 : 0));
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
    const { state, keys, destinations, config } = this.app.engine;
    if (this.current) return { kind: 'busy', sessionId: this.current.sessionId };
    const job = await state.jobs.get(jobId);
    if (!job) return { kind: 'not-found', what: 'job' };
    const run = options.runId ? await state.runs.get(options.runId) : await state.runs.latestOk(job.id);
    if (!run || run.jobId !== job.id) return { kind: 'not-found', what: 'run' };
    const key = keys.operational?.secretKey;
    if (!key) return { kind: 'no-key' };
    // An unchanged run (skipUnchanged) has no archive of its own: drill the one that holds its data.
    const archiveRunId = await archiveRunOf(state.runs, run);
    const lease = await state.leases.acquire(DRILL_LEASE, this.holder, this.leaseMs);
    const mine = this.current as DrillSession | null; // set meanwhile by a concurrent start
    if (!lease || mine) {
      const other = await state.settings.get<DrillSession>(DRILL_SESSION_SETTING);
      return { kind: 'busy', sessionId: mine?.sessionId ?? other?.sessionId ?? null };
    }
    // Under the lease, a scheduled drill checks again that it is still due: another process may
    // have drilled the job between this one's check and its lease.
    if (options.trigger === 'schedule' && !(await this.due()).includes(job.id)) {
      await state.leases.release(DRILL_LEASE, this.holder).catch(() => undefined);
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
    this.current = session;
    await state.settings.set(DRILL_SESSION_SETTING, session);
    const renew = setInterval(
      () => void state.leases.renew(DRILL_LEASE, this.holder, this.leaseMs).catch(() => undefined),
      Math.max(250, Math.floor(this.leaseMs / 3)),
    );
    renew.unref();
    const actor = options.request
      ? this.app.audit.actorOf(options.request)
      : { actor: { email: null, subject: null, method: 'engine' as const } };
    const scratchDir = join(config.dataDir, 'drills');
    const source = sourceConfigOf(job.config.source as Record<string, unknown> | undefined, job.id);
    const dests = (job.config.destinations as string[] | undefined) ?? ['default'];
    const store = destinations.get(dests[0] ?? 'default') ?? destinations.get('default')!;
    const done = (async (): Promise<DrillEvidence | null> => {
      try {
        mkdirSync(scratchDir, { recursive: true, mode: 0o700 });
        const ev = await runDrill({
          store,
          job: job.id,
          runId: run.id,
          archiveRunId,
          operationalSecretKey: key,
          signerPublicKey: keys.signer.publicKey,
          trigger: options.trigger,
          now: this.now,
          scratch: {
            dir: scratchDir,
            ...(source?.type === 'redis' ? { redis: { url: source.url, db: source.db ?? 0 } } : {}),
            ...(source?.type === 's3'
              ? {
                  s3: {
                    ...source,
                    // 'site/' + '/' would be an empty key segment, which the S3 driver refuses.
                    prefix: `${source.prefix ? `${source.prefix.replace(/\/+$/, '')}/` : ''}coffer-drills`,
                  },
                }
              : {}),
          },
        });
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
        this.app.log.info(
          { event: 'drill-finished', job: job.id, runId: run.id, verdict: ev.verdict, trigger: ev.trigger },
          'restore drill finished',
        );
        return ev;
      } catch (e) {
        this.app.log.warn({ event: 'drill-failed', code: (e as { code?: unknown }).code }, 'drill failed');
        return null;
      } finally {
        clearInterval(renew);
        this.current = null;
        await state.settings.delete(DRILL_SESSION_SETTING).catch(() => undefined);
        await state.leases.release(DRILL_LEASE, this.holder).catch(() => undefined);
      }
    })();
    this.running = done;
    return { kind: 'started', session, done };
  }

  /** Jobs due a scheduled drill now, most overdue first. */
  async due(): Promise<string[]> {
    const { state } = this.app.engine;
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

  /** Stops the checks for good and waits for a running drill to finish (before close). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopScheduler();
    await this.checking?.catch(() => undefined);
    await this.running?.catch(() => undefined);
  }
}

/** Decorates `app.drills` and stops it before the state store closes. */
export function installDrills(app: FastifyInstance, options: DrillSchedulerOptions = {}): DrillService {
  const drills = new DrillService(app, options);
  app.decorate('drills', drills);
  app.addHook('preClose', async () => drills.stop());
  return drills;
}
