/**
 * The run lifecycle's writes (specification "States and transitions: Run"): settling an
 * attempt's outcome into the run record (fenced by the run lock), parking on the retry ladder,
 * abandoning a run past its strike budget or give-up age, and the clean-up of a run that will never
 * continue.
 *
 *   running --(sealed and read back)--> ok
 *   running --(fault classified)--> failed (one closed-list reason + cause digest)
 *   running --(429 / 503 SlowDown)--> parked (checkpoint kept; retry ladder; no strike)
 *   parked  --(retryAt reached)--> running (resumed from its checkpoint)
 *   running, interrupted (crash / lost lease) --(next tick or poll)--> running, resumed; each such
 *     resume is a strike; at the strike budget, or past the give-up age, the run is `abandoned`.
 *
 * Each settled outcome raises its notification event (src/events.ts) only after its fenced write
 * succeeded: `run-succeeded`, `run-failed`, `run-parked`, `run-abandoned`. An interrupted attempt
 * and an attempt whose lease was lost (the fenced write throws) raise nothing. An `ok` run also
 * ends the job's stale episode (the `backup-stale` latch, scheduler.ts).
 */
import type { ObjectStore } from '@coffer/objectstore';
import type { LeaseToken, RunRecord, State } from '@coffer/state';
import type { EngineEvents } from '../events.ts';
import { runJobOf } from '../jobs/index.ts';
import type { AttemptOutcome, RunJob, RunLogger } from './executor.ts';
import { REASON_RUN_FAILED } from './reasons.ts';
import { deleteRunObjects } from './retention.ts';

/** Patient retry ladder for throttled runs (seconds), last step repeated. */
export const DEFAULT_LADDER_SECONDS = [60, 120, 300, 600, 900, 1800, 3600];

export interface RunLifecycleOptions {
  state: State;
  /** Destinations as runs see them. */
  destinations: ReadonlyMap<string, ObjectStore>;
  log: RunLogger;
  now: () => Date;
  /** A run not finished this long after it started is abandoned (default 2 days). */
  giveUpSeconds?: number;
  ladderSeconds?: number[];
  /** The notification event bus (app.events); absent: nothing is raised. */
  events?: EngineEvents | null;
}

/** Setting `runs.stale.<job>`: the latch of a job's current stale episode (scheduler.ts `checkStale`). */
export const STALE_PREFIX = 'runs.stale.';

export class RunLifecycle {
  private readonly o: RunLifecycleOptions;

  constructor(options: RunLifecycleOptions) {
    this.o = options;
  }

  private get destinations(): ReadonlyMap<string, ObjectStore> {
    return this.o.destinations;
  }

  private now(): Date {
    return this.o.now();
  }

  /** Records an attempt's outcome; every write is fenced by the attempt's run lock. */
  async settle(job: RunJob, run: RunRecord, outcome: AttemptOutcome, lease: LeaseToken): Promise<void> {
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
        this.o.events?.raise({
          name: 'run-succeeded',
          jobId: job.id,
          detail: {
            runId: run.id,
            records: outcome.records,
            bytes: outcome.bytes,
            warnings: outcome.warnings,
            unchanged: Boolean(outcome.unchangedFrom),
            unchangedFrom: outcome.unchangedFrom ?? null,
          },
        });
        // The stale episode (if any) ends with this ok run.
        await this.o.state.settings.delete(`${STALE_PREFIX}${job.id}`).catch(() => undefined);
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
        this.o.events?.raise({
          name: 'run-failed',
          jobId: job.id,
          detail: { runId: run.id, reason: f.reason, code: f.code, causeDigest: f.causeDigest },
        });
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
        this.o.events?.raise({
          name: 'run-parked',
          jobId: job.id,
          detail: {
            runId: run.id,
            retryAt,
            parks,
            code: outcome.failure.code,
            causeDigest: outcome.failure.causeDigest,
          },
        });
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

  tooOld(run: RunRecord): boolean {
    const limit = (this.o.giveUpSeconds ?? 2 * 86_400) * 1000;
    return this.now().getTime() - Date.parse(run.startedAt) > limit;
  }

  async abandon(jobId: string, run: RunRecord, why: string): Promise<void> {
    const reason = run.reason ?? REASON_RUN_FAILED;
    const abandoned = await this.o.state.runs.transition(run.id, ['running', 'parked'], {
      status: 'abandoned',
      reason,
      finishedAt: this.now().toISOString(),
      detail: { retryAt: null, abandoned: why },
    });
    // Raised only when this call moved the run (another replica may have settled it meanwhile).
    if (abandoned !== null)
      this.o.events?.raise({
        name: 'run-abandoned',
        jobId,
        detail: { runId: run.id, reason, why },
      });
    const job = await this.o.state.jobs.get(jobId);
    await this.finalCleanup(
      job ? runJobOf(job) : { id: jobId, source: { type: 'files' } },
      run.id,
      run.destinations,
    );
    this.o.log.warn(
      { event: 'run-abandoned', job: jobId, runId: run.id, why },
      `run ${run.id} of job ${jobId} abandoned (${why})`,
    );
  }

  /** A run that will never continue: drop its checkpoint and the unsealed objects it left. */
  async finalCleanup(job: RunJob, runId: string, dests: RunRecord['destinations']): Promise<void> {
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
}
