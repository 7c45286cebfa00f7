/**
 * The `restore-drills` report's data (docs/reports.md "restore-drills"): restore-drill evidence
 * with the recovery-time estimate. Per job: its restore-test cadence, the drills started in the
 * period (newest first), the last drill and the last passing drill at the period's end, the
 * measured restore time of that passing drill, and the RTO estimate (@coffer/restore
 * `estimateRto`, docs/restore.md "RTO", over the evidence recorded up to `period.to`, so a report
 * of a past period gives the estimate as it stood then).
 *
 * Security: ids, verdicts, counts and timings only. A drill's mismatch list names records, so it
 * is reduced to a count here; evidence never holds bytes, keys or credentials.
 */
import { type DrillEvidence, estimateRto, type JobRto } from '@coffer/restore';
import type { State } from '@coffer/state';
import { runJobOf } from '../jobs/index.ts';
import { inPeriod, type ReportPeriod } from './period.ts';

/** Drills listed per job at most (the newest of the period). */
export const MAX_DRILLS_PER_JOB = 50;

export interface DrillLine {
  id: string;
  runId: string;
  trigger: string;
  startedAt: string;
  verdict: DrillEvidence['verdict'];
  durationMs: number;
  restoreMs: number;
  records: number;
  bytes: number;
  mismatched: number;
  reason: string | null;
}

export interface DrillJob {
  job: string;
  name: string | null;
  restoreTestCadenceSeconds: number | null;
  drillsInPeriod: { total: number; pass: number; fail: number; error: number; listed: DrillLine[] };
  lastDrill: DrillLine | null;
  lastPass: DrillLine | null;
  /** Whole-drill seconds of the last passing drill (restore, compare and clean-up), or null. */
  measuredRestoreSeconds: number | null;
  rto: Omit<JobRto, 'job'>;
}

export interface DrillsData {
  evaluatedAt: string;
  jobs: DrillJob[];
  fleetRto: { status: 'estimated' | 'partial' | 'unknown'; seconds: number | null; jobsUnknown: string[] };
  summary: { jobs: number; drilledInPeriod: number; lastDrillPassing: number; neverDrilled: number };
}

function line(e: DrillEvidence): DrillLine {
  return {
    id: e.id,
    runId: e.runId,
    trigger: e.trigger,
    startedAt: e.startedAt,
    verdict: e.verdict,
    durationMs: e.durationMs,
    restoreMs: e.timings.restoreMs,
    records: e.records,
    bytes: e.bytes,
    mismatched: e.mismatched.length,
    reason: e.reason ?? null,
  };
}

/**
 * Builds the drill report from the recorded evidence (any order) and the live jobs. Pure apart
 * from the job list read; throws what the state store throws.
 */
export async function restoreDrills(
  state: State,
  evidence: DrillEvidence[],
  period: ReportPeriod,
): Promise<DrillsData> {
  const upTo = evidence
    .filter((e) => Date.parse(e.startedAt) < Date.parse(period.to))
    .sort((a, b) => (a.startedAt < b.startedAt ? 1 : a.startedAt > b.startedAt ? -1 : 0));
  const records = await state.jobs.list();
  const estimate = estimateRto(upTo, { jobs: records.map((r) => r.id) });
  const jobs: DrillJob[] = records.map((record) => {
    const job = runJobOf(record);
    const mine = upTo.filter((e) => e.job === job.id);
    const inside = mine.filter((e) => inPeriod(period, e.startedAt));
    const pass = mine.find((e) => e.verdict === 'pass') ?? null;
    const rto = estimate.jobs.find((r) => r.job === job.id) ?? { job: job.id, status: 'unknown' as const };
    const { job: _job, ...rtoFields } = rto;
    return {
      job: job.id,
      name: typeof job.name === 'string' ? job.name : null,
      restoreTestCadenceSeconds:
        typeof job.restoreTestCadenceSeconds === 'number' ? job.restoreTestCadenceSeconds : null,
      drillsInPeriod: {
        total: inside.length,
        pass: inside.filter((e) => e.verdict === 'pass').length,
        fail: inside.filter((e) => e.verdict === 'fail').length,
        error: inside.filter((e) => e.verdict === 'error').length,
        listed: inside.slice(0, MAX_DRILLS_PER_JOB).map(line),
      },
      lastDrill: mine[0] ? line(mine[0]) : null,
      lastPass: pass ? line(pass) : null,
      measuredRestoreSeconds: pass ? pass.durationMs / 1000 : null,
      rto: rtoFields,
    };
  });
  return {
    evaluatedAt: period.to,
    jobs,
    fleetRto: {
      status: estimate.status,
      seconds: estimate.seconds ?? null,
      jobsUnknown: estimate.jobsUnknown,
    },
    summary: {
      jobs: jobs.length,
      drilledInPeriod: jobs.filter((j) => j.drillsInPeriod.total > 0).length,
      lastDrillPassing: jobs.filter((j) => j.lastDrill?.verdict === 'pass').length,
      neverDrilled: jobs.filter((j) => j.lastDrill === null).length,
    },
  };
}
