/**
 * Retention: per job, `keepLast` N and/or `keepDays` D (a sealed run is kept when EITHER rule keeps
 * it; a job with neither keeps everything).
 *
 * Algorithm, per job and for every destination of the job:
 *  1. list the job's sealed runs in the destination (manifests under `jobs/<job>/runs/`);
 *  2. order them newest first by start time (the run record's, else the run id's timestamp);
 *  3. keep the newest N, those started within D days, the job's latest `ok` run (never pruned,
 *     whatever the rules say), any run still in flight, and every archive that a retained `ok`
 *     run found its source unchanged from (`unchangedFrom`: that run's data lives there);
 *  4. prune the rest: the manifest first (the commit point, so a half-deleted run never looks
 *     sealed), then every other object under the run's prefix;
 *  5. mark each pruned run's record (`prunedAt`, destination state `pruned`), which turns its
 *     successors' `prevRunIdStatus` into `pruned`.
 * A paused job stands down (nothing pruned; the caller records the stand-down).
 */
import { layout, listRuns } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { State } from '@coffer/state';
import type { RunJob, RunLogger } from './executor.ts';

export interface PruneResult {
  job: string;
  pruned: string[];
  kept: number;
  /** Destinations that could not be listed or cleaned (reason codes only). */
  errors: { destination: string; code: string }[];
}

/** Start time encoded in an engine run id (`YYYYMMDDTHHMMSSmmmZ-xxxxxxxx`), or null. */
export function runIdTime(runId: string): number | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(\d{3})Z-/.exec(runId);
  if (!m) return null;
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!, +m[7]!);
}

/** Deletes every object of one run in one store: manifest first. */
export async function deleteRunObjects(store: ObjectStore, job: string, runId: string): Promise<number> {
  await store.delete(layout.manifest(job, runId));
  let n = 1;
  for await (const o of store.listAll(layout.runPrefix(job, runId))) {
    await store.delete(o.key);
    n++;
  }
  return n;
}

/** Applies the job's retention on every destination. Never throws for a store fault (reported). */
export async function pruneJob(
  deps: { state: State; destinations: ReadonlyMap<string, ObjectStore>; log: RunLogger; now: () => Date },
  job: RunJob,
): Promise<PruneResult> {
  const result: PruneResult = { job: job.id, pruned: [], kept: 0, errors: [] };
  const keepLast = job.retention?.keepLast;
  const keepDays = job.retention?.keepDays;
  if (keepLast === undefined && keepDays === undefined) return result;
  const ring = await deps.state.runs.listForJob(job.id);
  const byId = new Map(ring.map((r) => [r.id, r]));
  const latestOk = await deps.state.runs.latestOk(job.id);
  // Archives that hold the data of unchanged-source runs still in the ring.
  const referenced = new Set<string>();
  for (const r of ring) {
    const from = (r.detail as { unchangedFrom?: unknown }).unchangedFrom;
    if (r.status === 'ok' && typeof from === 'string') referenced.add(from);
  }
  const now = deps.now().getTime();
  const destIds = job.destinations && job.destinations.length > 0 ? job.destinations : ['default'];
  const prunedHere = new Set<string>();
  for (const destId of destIds) {
    const store = deps.destinations.get(destId);
    if (!store) continue;
    let listed: { runId: string; lastModified?: Date }[];
    try {
      listed = await listRuns(store, job.id);
    } catch (err) {
      result.errors.push({
        destination: destId,
        code: String((err as { code?: unknown }).code ?? 'ERR_UNKNOWN'),
      });
      continue;
    }
    const timeOf = (r: { runId: string; lastModified?: Date }) => {
      const rec = byId.get(r.runId);
      if (rec) return Date.parse(rec.startedAt);
      return runIdTime(r.runId) ?? r.lastModified?.getTime() ?? 0;
    };
    const ordered = [...listed].sort((a, b) => timeOf(b) - timeOf(a));
    const keep = new Set<string>();
    ordered.forEach((r, i) => {
      const rec = byId.get(r.runId);
      if (keepLast !== undefined && i < keepLast) keep.add(r.runId);
      if (keepDays !== undefined && now - timeOf(r) < keepDays * 86_400_000) keep.add(r.runId);
      if (latestOk && r.runId === latestOk.id) keep.add(r.runId);
      if (referenced.has(r.runId)) keep.add(r.runId);
      if (rec && (rec.status === 'running' || rec.status === 'parked')) keep.add(r.runId);
    });
    result.kept = Math.max(result.kept, keep.size);
    for (const r of ordered) {
      if (keep.has(r.runId)) continue;
      try {
        await deleteRunObjects(store, job.id, r.runId);
        prunedHere.add(r.runId);
        const rec = byId.get(r.runId);
        if (rec) {
          await deps.state.runs.update(r.runId, {
            prunedAt: deps.now().toISOString(),
            destinations: {
              [destId]: {
                ...(rec.destinations[destId] ?? {}),
                state: 'pruned',
                updatedAt: deps.now().toISOString(),
              },
            },
          });
        }
      } catch (err) {
        result.errors.push({
          destination: destId,
          code: String((err as { code?: unknown }).code ?? 'ERR_UNKNOWN'),
        });
      }
    }
  }
  result.pruned = [...prunedHere];
  if (result.pruned.length > 0 || result.errors.length > 0) {
    deps.log.info(
      {
        event: 'retention-prune',
        job: job.id,
        pruned: result.pruned.length,
        kept: result.kept,
        errors: result.errors,
      },
      `retention: job ${job.id} pruned ${result.pruned.length} run(s)`,
    );
  }
  return result;
}
