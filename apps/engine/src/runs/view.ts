/**
 * The run object as the HTTP interface shows it (docs/runs.md "Run object"), built from a stored
 * run record. `prevRunIdStatus`: `none` (first run), `retained` (the predecessor's record is in the
 * ring and its archives were not pruned), `pruned` (retention removed them), `unknown` (the
 * predecessor rolled out of the ring, so the engine cannot tell).
 */
import type { RunRecord, State } from '@coffer/state';

export type PrevRunIdStatus = 'none' | 'retained' | 'pruned' | 'unknown';

export interface RunObject {
  runId: string;
  job: string;
  seq: number;
  status: RunRecord['status'];
  reason: string | null;
  causeDigest: string | null;
  warnings: number;
  records: number;
  bytes: number;
  trigger: string;
  startedAt: string;
  updatedAt: string;
  finishedAt: string | null;
  prevRunId: string | null;
  prevRunIdStatus: PrevRunIdStatus;
  prunedAt: string | null;
  destinations: RunRecord['destinations'];
  /** For a parked run: when the retry ladder resumes it. */
  retryAt: string | null;
  /** Resume attempts after an interruption that counted against the strike budget. */
  strikes: number;
  /**
   * Set on an `ok` run that wrote no archive because the source was unchanged (job option
   * `skipUnchanged`): the run whose archive holds this point in time. Null otherwise.
   */
  unchangedFrom: string | null;
}

export function prevStatusOf(run: RunRecord, prev: RunRecord | null | undefined): PrevRunIdStatus {
  if (run.prevRunId === null) return 'none';
  if (!prev) return 'unknown';
  return prev.prunedAt !== null ? 'pruned' : 'retained';
}

export function runObject(run: RunRecord, prev: RunRecord | null | undefined): RunObject {
  const d = run.detail as { retryAt?: unknown; strikes?: unknown; unchangedFrom?: unknown };
  return {
    runId: run.id,
    job: run.jobId,
    seq: run.seq,
    status: run.status,
    reason: run.reason,
    causeDigest: run.causeDigest,
    warnings: run.warnings,
    records: run.records,
    bytes: run.bytes,
    trigger: run.trigger,
    startedAt: run.startedAt,
    updatedAt: run.updatedAt,
    finishedAt: run.finishedAt,
    prevRunId: run.prevRunId,
    prevRunIdStatus: prevStatusOf(run, prev),
    prunedAt: run.prunedAt,
    destinations: run.destinations,
    retryAt: run.status === 'parked' && typeof d.retryAt === 'string' ? d.retryAt : null,
    strikes: typeof d.strikes === 'number' ? d.strikes : 0,
    unchangedFrom: typeof d.unchangedFrom === 'string' ? d.unchangedFrom : null,
  };
}

/** Run objects for a list of records, looking predecessors up in the list first, then the store. */
export async function runObjects(state: State, runs: RunRecord[]): Promise<RunObject[]> {
  const byId = new Map(runs.map((r) => [r.id, r]));
  const out: RunObject[] = [];
  for (const r of runs) {
    let prev = r.prevRunId === null ? null : byId.get(r.prevRunId);
    if (prev === undefined && r.prevRunId !== null) prev = await state.runs.get(r.prevRunId);
    out.push(runObject(r, prev));
  }
  return out;
}
