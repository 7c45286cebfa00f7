/**
 * Recovery-time estimate (`GET /admin/rto`) from drill history. docs/restore.md "RTO" is normative.
 *
 * Per job: the median restore throughput (bytes per second of whole drill time) over its last five
 * passing drills, applied to the job's current size (the latest run's bytes when the engine knows
 * them, else the last drill's); a job whose drills moved no bytes uses the median drill time. A
 * job without a passing drill is `unknown`. Fleet: jobs restored one after another, so the sum of
 * the known estimates; `unknown` when no job has history, `partial` when some have none.
 */
import type { DrillEvidence } from './drill.ts';

export interface JobRto {
  job: string;
  status: 'estimated' | 'unknown';
  seconds?: number;
  basis?: { drills: number; medianBytesPerSecond: number | null; bytes: number; lastDrillAt: string };
}

export interface RtoEstimate {
  status: 'estimated' | 'partial' | 'unknown';
  /** Sum of the known per-job estimates (restores one after another). */
  seconds?: number;
  jobs: JobRto[];
  /** Jobs with no passing drill. */
  jobsUnknown: string[];
}

/** Drills per job that count. */
export const RTO_WINDOW = 5;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * The estimate per job and for the fleet. `jobs` lists every job to report (those without drills
 * become `unknown`); `sizes` gives a job's current bytes when known. Pure; never throws.
 */
export function estimateRto(
  history: DrillEvidence[],
  options: { jobs?: string[]; sizes?: Record<string, number> } = {},
): RtoEstimate {
  const byJob = new Map<string, DrillEvidence[]>();
  for (const d of history) {
    if (d.verdict !== 'pass' || d.job === null) continue;
    const list = byJob.get(d.job) ?? [];
    list.push(d);
    byJob.set(d.job, list);
  }
  const names = [...new Set([...(options.jobs ?? []), ...byJob.keys()])].sort();
  const jobs: JobRto[] = [];
  const unknown: string[] = [];
  let total = 0;
  for (const job of names) {
    const drills = (byJob.get(job) ?? [])
      .sort((a, b) => (a.startedAt < b.startedAt ? 1 : -1))
      .slice(0, RTO_WINDOW);
    if (drills.length === 0) {
      jobs.push({ job, status: 'unknown' });
      unknown.push(job);
      continue;
    }
    const rates = drills
      .filter((d) => d.bytes > 0 && d.durationMs > 0)
      .map((d) => d.bytes / (d.durationMs / 1000));
    const bytes = options.sizes?.[job] ?? drills[0]!.bytes;
    const rate = rates.length > 0 ? median(rates) : null;
    const seconds =
      rate !== null && bytes > 0
        ? Math.max(1, Math.ceil(bytes / rate))
        : Math.max(1, Math.ceil(median(drills.map((d) => d.durationMs)) / 1000));
    total += seconds;
    jobs.push({
      job,
      status: 'estimated',
      seconds,
      basis: {
        drills: drills.length,
        medianBytesPerSecond: rate === null ? null : Math.round(rate),
        bytes,
        lastDrillAt: drills[0]!.startedAt,
      },
    });
  }
  const known = jobs.length - unknown.length;
  return {
    status: known === 0 ? 'unknown' : unknown.length === 0 ? 'estimated' : 'partial',
    ...(known === 0 ? {} : { seconds: total }),
    jobs,
    jobsUnknown: unknown,
  };
}
