/**
 * The `backup-coverage` report's data (docs/reports.md "backup-coverage"): per job its schedule,
 * last successful run and its age, each destination's copy state, the retention rule and the
 * retained history window, the runs of the period by outcome, and a verdict. Everything is read
 * from the state store; verdicts are evaluated at the period's end (`period.to`).
 *
 * Verdict: `never-run` when the job has no `ok` run started at or before `period.to`; `stale` when
 * its latest one finished more than the stale threshold ago (runs/scheduler.ts
 * `staleThresholdSeconds`: max(2 x cadence, cadence + 1 hour), the rule of the `backup-stale`
 * notification); `covered` otherwise. A paused job is judged by the same rule (a paused job whose
 * last backup is old is not covered) and reported with `enabled: false`.
 *
 * Security: ids, names, states, counts and times only; never a source path, a connection's
 * endpoint or credential, or a record name.
 */
import type { RunRecord, State } from '@coffer/state';
import { jobDestinations, runJobOf } from '../jobs/index.ts';
import { staleThresholdSeconds } from '../runs/index.ts';
import { inPeriod, type ReportPeriod } from './period.ts';

export type CoverageVerdict = 'covered' | 'stale' | 'never-run';

export interface CoverageDestination {
  id: string;
  /** The copy state of the latest ok run on this destination (`verified`, `failed`, ...; `none` when absent). */
  state: string;
  /** The failure reason of that copy, from the closed list, or null. */
  reason: string | null;
  /** The newest ok run whose copy here verified and was not pruned, or null. */
  lastVerified: { runId: string; at: string | null } | null;
  /** Retained, unpruned runs whose copy here verified. */
  verifiedCopies: number;
}

export interface CoverageJob {
  job: string;
  name: string | null;
  enabled: boolean;
  sourceType: string;
  schedule: { cadenceSeconds: number; staleAfterSeconds: number };
  lastSuccess: { runId: string; startedAt: string; finishedAt: string | null; ageSeconds: number } | null;
  destinations: CoverageDestination[];
  retention: { keepLast: number | null; keepDays: number | null };
  /** The job's retained run history (its ring), or null when it holds no run. */
  retained: { oldest: string; newest: string; count: number } | null;
  /** Runs of the retained history started in the period, by outcome. */
  runsInPeriod: { total: number; ok: number; failed: number; other: number };
  verdict: CoverageVerdict;
}

export interface CoverageData {
  evaluatedAt: string;
  jobs: CoverageJob[];
  summary: { jobs: number; covered: number; stale: number; neverRun: number };
}

const DEFAULT_CADENCE_SECONDS = 86_400;

const ownCopy = (r: RunRecord) => typeof (r.detail as { unchangedFrom?: unknown }).unchangedFrom !== 'string';

async function copySource(state: State, ok: RunRecord): Promise<RunRecord> {
  const from = (ok.detail as { unchangedFrom?: unknown }).unchangedFrom;
  if (typeof from !== 'string') return ok;
  return (await state.runs.get(from)) ?? ok;
}

function destinationsOf(ids: string[], ring: RunRecord[], copies: RunRecord | null): CoverageDestination[] {
  return ids.map((id) => {
    const verified = ring.filter(
      (r) => r.destinations[id]?.state === 'verified' && r.prunedAt === null && ownCopy(r),
    );
    const last = verified.find((r) => r.status === 'ok') ?? null;
    const own = copies?.destinations[id];
    return {
      id,
      state: own?.state ?? 'none',
      reason: own?.reason ?? null,
      lastVerified: last ? { runId: last.id, at: last.finishedAt } : null,
      verifiedCopies: verified.length,
    };
  });
}

function countRuns(ring: RunRecord[], period: ReportPeriod): CoverageJob['runsInPeriod'] {
  const runs = ring.filter((r) => inPeriod(period, r.startedAt));
  const ok = runs.filter((r) => r.status === 'ok').length;
  const failed = runs.filter((r) => r.status === 'failed' || r.status === 'abandoned').length;
  return { total: runs.length, ok, failed, other: runs.length - ok - failed };
}

/** Builds the coverage of every live job (ordered by id). Throws what the state store throws. */
export async function backupCoverage(state: State, period: ReportPeriod): Promise<CoverageData> {
  const at = Date.parse(period.to);
  const jobs: CoverageJob[] = [];
  for (const record of await state.jobs.list()) {
    const job = runJobOf(record);
    const cadence = typeof job.cadenceSeconds === 'number' ? job.cadenceSeconds : DEFAULT_CADENCE_SECONDS;
    const threshold = staleThresholdSeconds(cadence);
    const ring = await state.runs.listForJob(job.id);
    const ok = await state.runs.latestOk(job.id, period.to);
    const finished = ok ? (ok.finishedAt ?? ok.startedAt) : null;
    const ageSeconds = finished === null ? null : Math.max(0, Math.floor((at - Date.parse(finished)) / 1000));
    const verdict: CoverageVerdict =
      ageSeconds === null ? 'never-run' : ageSeconds > threshold ? 'stale' : 'covered';
    jobs.push({
      job: job.id,
      name: typeof job.name === 'string' ? job.name : null,
      enabled: job.enabled !== false,
      sourceType: job.source.type,
      schedule: { cadenceSeconds: cadence, staleAfterSeconds: threshold },
      lastSuccess:
        ok && ageSeconds !== null
          ? { runId: ok.id, startedAt: ok.startedAt, finishedAt: ok.finishedAt, ageSeconds }
          : null,
      destinations: destinationsOf(jobDestinations(job), ring, ok ? await copySource(state, ok) : null),
      retention: { keepLast: job.retention?.keepLast ?? null, keepDays: job.retention?.keepDays ?? null },
      retained: await state.runs.window(job.id),
      runsInPeriod: countRuns(ring, period),
      verdict,
    });
  }
  const count = (v: CoverageVerdict) => jobs.filter((j) => j.verdict === v).length;
  return {
    evaluatedAt: period.to,
    jobs,
    summary: {
      jobs: jobs.length,
      covered: count('covered'),
      stale: count('stale'),
      neverRun: count('never-run'),
    },
  };
}
