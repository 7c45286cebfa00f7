/**
 * Retention: per job, `keepLast` N and/or `keepDays` D (a sealed run is kept when EITHER rule keeps
 * it; a job with neither keeps everything). docs/runs.md "Retention" is normative.
 *
 * The latest good copy is decided from each destination itself, never from the state store's
 * history ring alone: the ring holds 50 runs per job, so after 50 failed runs in a row, or on a
 * fresh state database pointed at an existing destination (the disaster-recovery case), the ring
 * no longer names the latest ok run, and a ring-based rule would let every old archive go.
 *
 * Algorithm, per job and for every destination of the job:
 *  1. list the job's sealed runs in the destination (manifests under `jobs/<job>/runs/`);
 *  2. read every manifest whose run is not in flight and verify it under the engine's own signer
 *     (@coffer/archive reads both with fixed ceilings: a larger object is a failure, not a load);
 *  3. order them newest first by start time (the run record's, else the signed one);
 *  4. establish the destination's latest verified ok run: the newest run, whose manifest verified,
 *     that the state store records `ok` or does not know at all (adopted: a run the store lost is
 *     counted as ok, the state of the store never outranks a signed archive), and whose index and
 *     every shard are present at their sealed sizes;
 *  5. when the listing, any manifest or the signature check fails, or no run qualifies in step 4,
 *     prune NOTHING on that destination: the latest ok run cannot be established (reason recorded);
 *  6. keep the newest N, those started within D days, the latest verified ok run, the state store's
 *     latest ok run, any run in flight, every run pinned by a restore apply, a drill or a pending
 *     restore approval (runs/pins.ts), and every archive a retained `ok` run or a pin points to
 *     with `unchangedFrom`;
 *  7. prune the rest: pins are read again right before each deletion (a restore that started
 *     meanwhile wins), then the manifest (the commit point, so a half-deleted run never looks
 *     sealed), then every other object under the run's prefix;
 *  8. mark each pruned run's record (`prunedAt`, destination state `pruned`), which turns its
 *     successors' `prevRunIdStatus` into `pruned`.
 * A paused job stands down (nothing pruned; the caller records the stand-down). The outcome per
 * destination (latest verified ok run, adopted runs, kept, pruned, or the reason nothing was
 * pruned) is recorded in the setting `retention.last.<job>`.
 *
 * Dual control (docs/config-control.md "Retention prunes"): while the setting
 * `retention.prune-approval.enabled` is on (a value other than `{ enabled: false }`, and an
 * unreadable one, counts as on), step 7 deletes nothing: what it would delete per destination is
 * held as one pending prune approval per job (`retention.prune-pending.<job>`, a new id whenever
 * the plan changes), listed by `GET /admin/retention-prune/approvals`. An approval re-runs this
 * whole pass with `approved` set: only runs that the approved plan named AND the fresh plan would
 * still delete are deleted, so the latest good copy, pins and the keep rules of the moment win.
 */
import { randomBytes } from 'node:crypto';
import {
  isChunkedManifest,
  layout,
  listRuns,
  type PruneKeyPlan,
  planChunkedPrune,
  pruneChunked,
  readRunManifest,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { RunRecord, State } from '@coffer/state';
import { jobDestinations } from '../jobs/index.ts';
import type { RunJob, RunLogger } from './executor.ts';
import { activePins, type RetentionPin } from './pins.ts';
import { clearReclaim, markReclaim } from './reclaim-marker.ts';

export const RETENTION_SETTING_PREFIX = 'retention.last.';
/** The retention-prune dual-control policy (exported by the control-plane export; read here). */
export const RETENTION_PRUNE_APPROVAL_POLICY = 'retention.prune-approval.enabled';
/** One pending prune approval per job: `retention.prune-pending.<job>`. */
export const PRUNE_PENDING_PREFIX = 'retention.prune-pending.';
/** How long a pending prune approval stays approvable. */
export const PRUNE_APPROVAL_TTL_MS = 7 * 86_400_000;

/** A retention pass held for a second person (what it would have deleted). */
export interface PendingPrune {
  id: string;
  kind: 'retention-prune';
  job: string;
  plannedAt: string;
  expiresAt: string;
  /** Per destination, the run ids the pass would delete (newest first). */
  destinations: Record<string, string[]>;
}

/** Why a destination was not pruned (stable strings, docs/runs.md "Retention"). */
export type RetentionBlock =
  | 'listing-failed'
  | 'manifest-unverified'
  | 'no-verified-ok-run'
  | 'run-unreadable'
  | 'pins-unreadable';

export interface DestinationRetention {
  destination: string;
  /** The latest verified ok run established from the destination, or null when blocked. */
  latestOk: string | null;
  /** Runs found in the destination that the state store does not know (counted, not deleted). */
  adopted: string[];
  kept: number;
  pruned: string[];
  blocked?: { reason: RetentionBlock; code?: string; runId?: string };
  /** Incremental (format 0.2) jobs: what reclaiming unreferenced packs did on this destination. */
  packs?: PackReclaim;
}

/** What a pack reclaim pass did (docs/archive-format.md §12.9). */
export interface PackReclaim {
  /** False when it stopped before deleting (a run committed meanwhile) or failed (`code`). */
  complete: boolean;
  deletedPacks: number;
  repackedPacks: number;
  freedBytes: number;
  code?: string;
}

/** Packs (and pack indexes) younger than this are never reclaimed: a run may be writing them. */
export const PACK_GRACE_MS = 6 * 3_600_000;

export interface PruneResult {
  job: string;
  pruned: string[];
  /** Under the prune-approval policy: the pending approval holding what would have been pruned. */
  held?: { id: string; runs: number };
  kept: number;
  /** Destinations that could not be listed or cleaned (reason codes only). */
  errors: { destination: string; code: string }[];
  /** Per destination: what was established, kept, adopted and pruned, or why nothing was. */
  destinations: DestinationRetention[];
}

export interface PruneDeps {
  state: State;
  destinations: ReadonlyMap<string, ObjectStore>;
  log: RunLogger;
  now: () => Date;
  /** The engine's signer public key: only manifests it signed count as this engine's runs. */
  signerPublicKey: Uint8Array;
  /**
   * The operational secret key: with it, incremental jobs' unreferenced packs are reclaimed after
   * the runs are pruned (their pack indexes are sealed under the job's chunk key). Without it (an
   * approved prune) packs wait for the next scheduled pass.
   */
  operationalSecretKey?: Uint8Array;
  /**
   * Holds the job for the pack reclaim (the run service's `exclusive`): packs are reclaimed only
   * with it and the operational secret key. Without it, packs wait for a pass that has both.
   */
  exclusive?: JobExclusive;
  /**
   * Set by an approved prune (config-changes): delete only these runs per destination (and only
   * those the fresh plan still deletes), whatever the prune-approval policy says.
   */
  approved?: Record<string, readonly string[]>;
}

/**
 * Runs `work` while no run of `jobId` can start, resume or run, in this engine or in any other
 * sharing its state store (the job's run lock is held for the whole of it). Resolves to null,
 * without calling `work`, when a run holds the job.
 */
export type JobExclusive = <T>(jobId: string, work: (hold: JobHold) => Promise<T>) => Promise<T | null>;

/** The hold `JobExclusive` gives its work. */
export interface JobHold {
  /** The engine holding the job (the run lock's holder) and the lock's fence for this hold. */
  readonly holder: string;
  readonly fence: number;
  /** Aborts when the hold is known lost or the engine stops. */
  readonly signal: AbortSignal;
  /** Throws (ERR_STATE_LEASE_LOST) unless the hold is still this engine's: call before each deletion. */
  assertHeld(): Promise<void>;
}

/** Whether prunes are held for approval now; an unreadable value or store counts as on. */
export async function pruneApprovalOn(state: State): Promise<boolean> {
  try {
    const v = await state.settings.get<{ enabled?: unknown }>(RETENTION_PRUNE_APPROVAL_POLICY);
    if (v === undefined || v === null) return false;
    return !(typeof v === 'object' && v.enabled === false);
  } catch {
    return true;
  }
}

const samePlan = (a: Record<string, string[]>, b: Record<string, string[]>) =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/**
 * Records (or keeps) the job's pending prune approval for `planned`; a changed plan replaces the
 * pending one under a new id (the old id is then unknown: an approver approves what they saw).
 */
async function holdPrune(deps: PruneDeps, job: string, planned: Record<string, string[]>) {
  const key = `${PRUNE_PENDING_PREFIX}${job}`;
  const now = deps.now();
  const prev = await deps.state.settings.get<PendingPrune>(key);
  if (prev && samePlan(prev.destinations ?? {}, planned) && Date.parse(prev.expiresAt) > now.getTime())
    return prev;
  const pending: PendingPrune = {
    id: `rp_${randomBytes(12).toString('base64url')}`,
    kind: 'retention-prune',
    job,
    plannedAt: now.toISOString(),
    expiresAt: new Date(now.getTime() + PRUNE_APPROVAL_TTL_MS).toISOString(),
    destinations: planned,
  };
  await deps.state.settings.set(key, pending);
  deps.log.info(
    { event: 'retention-prune-held', job, approval: pending.id },
    `retention: job ${job} prune held for approval`,
  );
  return pending;
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

const codeOf = (err: unknown) => String((err as { code?: unknown }).code ?? 'ERR_UNKNOWN');

const inFlight = (rec: RunRecord | undefined) => rec?.status === 'running' || rec?.status === 'parked';

/** The archive an `ok` run's data lives in: its own, or the one it was found unchanged from. */
function unchangedFrom(rec: RunRecord | undefined): string | null {
  const from = (rec?.detail as { unchangedFrom?: unknown } | undefined)?.unchangedFrom;
  return typeof from === 'string' ? from : null;
}

/** True when the run's index and every shard its manifest lists are present at their sealed sizes. */
async function complete(
  store: ObjectStore,
  job: string,
  runId: string,
  shardSizes: number[],
  indexSize: number,
): Promise<boolean> {
  const sizes = new Map<string, number>();
  for await (const o of store.listAll(layout.runPrefix(job, runId))) sizes.set(o.key, o.size);
  if (sizes.get(layout.index(job, runId)) !== indexSize) return false;
  return shardSizes.every((size, i) => sizes.get(layout.shard(job, runId, i)) === size);
}

/** Applies the job's retention on every destination. Never throws for a store fault (reported). */
export async function pruneJob(deps: PruneDeps, job: RunJob): Promise<PruneResult> {
  const result: PruneResult = { job: job.id, pruned: [], kept: 0, errors: [], destinations: [] };
  const keepLast = job.retention?.keepLast;
  const keepDays = job.retention?.keepDays;
  if (keepLast === undefined && keepDays === undefined) return result;
  const destIds = jobDestinations(job);

  let ring: RunRecord[];
  let stateLatestOk: RunRecord | null;
  let pins: RetentionPin[];
  try {
    ring = await deps.state.runs.listForJob(job.id);
    stateLatestOk = await deps.state.runs.latestOk(job.id);
    pins = await activePins(deps.state.settings, deps.now());
  } catch (err) {
    // Without the ring or the pins nothing can be kept safely: prune nothing anywhere.
    for (const destination of destIds) {
      result.errors.push({ destination, code: codeOf(err) });
      result.destinations.push({
        destination,
        latestOk: null,
        adopted: [],
        kept: 0,
        pruned: [],
        blocked: { reason: 'pins-unreadable', code: codeOf(err) },
      });
    }
    await report(deps, result);
    return result;
  }
  const byId = new Map(ring.map((r) => [r.id, r]));
  // Archives that hold the data of unchanged-source runs still in the ring, or of a pinned run.
  const referenced = new Set<string>();
  for (const r of ring) {
    const from = unchangedFrom(r);
    if (r.status === 'ok' && from) referenced.add(from);
  }
  if (stateLatestOk) referenced.add(unchangedFrom(stateLatestOk) ?? stateLatestOk.id);
  const pinned = async (list: RetentionPin[]) => {
    const ids = new Set<string>();
    for (const p of list) {
      ids.add(p.runId);
      const rec = byId.get(p.runId) ?? (await deps.state.runs.get(p.runId).catch(() => null)) ?? undefined;
      const from = unchangedFrom(rec);
      if (from) ids.add(from);
    }
    return ids;
  };
  const pinnedNow = await pinned(pins);

  const now = deps.now().getTime();
  const prunedHere = new Set<string>();
  // Dual control: hold instead of delete, unless this pass carries out an approval.
  const hold = deps.approved === undefined && (await pruneApprovalOn(deps.state));
  const planned: Record<string, string[]> = {};
  for (const destId of destIds) {
    const store = deps.destinations.get(destId);
    if (!store) continue;
    const out: DestinationRetention = {
      destination: destId,
      latestOk: null,
      adopted: [],
      kept: 0,
      pruned: [],
    };
    result.destinations.push(out);
    const block = (reason: RetentionBlock, err?: unknown, runId?: string) => {
      out.blocked = {
        reason,
        ...(err !== undefined ? { code: codeOf(err) } : {}),
        ...(runId ? { runId } : {}),
      };
      if (err !== undefined) result.errors.push({ destination: destId, code: codeOf(err) });
    };
    let listed: { runId: string }[];
    try {
      listed = await listRuns(store, job.id);
    } catch (err) {
      block('listing-failed', err);
      continue;
    }

    // Steps 2-3: every sealed run not in flight must verify under the engine's signer.
    const runs: {
      runId: string;
      time: number;
      verified: boolean;
      /** Sealed sizes only (not the whole manifest): a job may hold thousands of runs. */
      shardSizes?: number[];
      indexSize?: number;
    }[] = [];
    let unverified = false;
    for (const l of listed) {
      const rec = byId.get(l.runId);
      if (inFlight(rec)) {
        runs.push({ runId: l.runId, time: Date.parse(rec!.startedAt), verified: false });
        continue;
      }
      try {
        const m = await readRunManifest(store, {
          job: job.id,
          runId: l.runId,
          signerPublicKey: deps.signerPublicKey,
        });
        // The store's record when it has one (the clock that scheduled the run), else the signed time.
        const signed = Date.parse(m.document.startedAt);
        const time = rec ? Date.parse(rec.startedAt) : signed;
        runs.push({
          runId: l.runId,
          time: Number.isFinite(time) ? time : (runIdTime(l.runId) ?? 0),
          verified: true,
          // A 0.2 run owns no shards (its chunks are in the job's packs): its own objects are the index.
          shardSizes: isChunkedManifest(m.document) ? [] : m.document.shards.map((x) => x.size),
          indexSize: m.document.index.size,
        });
        if (!rec) out.adopted.push(l.runId);
      } catch (err) {
        // A run the store records as failed or abandoned is not a candidate whatever its manifest
        // holds; any other run that does not verify may be the latest good copy, tampered with.
        if (rec && rec.status !== 'ok') {
          runs.push({ runId: l.runId, time: Date.parse(rec.startedAt), verified: false });
          continue;
        }
        block('manifest-unverified', err, l.runId);
        unverified = true;
        break;
      }
    }
    if (unverified) continue;
    runs.sort((a, b) => b.time - a.time || (a.runId < b.runId ? 1 : -1));

    // Step 4: the latest verified ok run of this destination.
    let latestOk: string | null = null;
    try {
      for (const r of runs) {
        if (!r.verified) continue;
        const rec = byId.get(r.runId);
        if (rec && rec.status !== 'ok') continue;
        if (await complete(store, job.id, r.runId, r.shardSizes!, r.indexSize!)) {
          latestOk = r.runId;
          break;
        }
      }
    } catch (err) {
      block('run-unreadable', err);
      continue;
    }
    if (latestOk === null) {
      // Also when the destination holds no sealed run at all: then there is nothing to prune.
      if (runs.length > 0) block('no-verified-ok-run');
      continue;
    }
    out.latestOk = latestOk;

    // Step 6.
    const keep = new Set<string>([latestOk]);
    runs.forEach((r, i) => {
      if (keepLast !== undefined && i < keepLast) keep.add(r.runId);
      if (keepDays !== undefined && now - r.time < keepDays * 86_400_000) keep.add(r.runId);
      if (referenced.has(r.runId) || pinnedNow.has(r.runId)) keep.add(r.runId);
      if (inFlight(byId.get(r.runId))) keep.add(r.runId);
    });
    out.kept = keep.size;
    result.kept = Math.max(result.kept, keep.size);

    // Step 7.
    for (const r of runs) {
      if (keep.has(r.runId)) continue;
      if (hold) {
        planned[destId] = [...(planned[destId] ?? []), r.runId];
        continue;
      }
      if (deps.approved !== undefined && !(deps.approved[destId] ?? []).includes(r.runId)) continue;
      try {
        // A restore, drill or approval may have pinned the run since the pass began.
        if ((await pinned(await activePins(deps.state.settings, deps.now()))).has(r.runId)) {
          out.kept++;
          continue;
        }
        await deleteRunObjects(store, job.id, r.runId);
        prunedHere.add(r.runId);
        out.pruned.push(r.runId);
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
        result.errors.push({ destination: destId, code: codeOf(err) });
      }
    }
  }
  // Unreferenced packs of incremental jobs: after the runs, never while a run of the job is in
  // flight (it may be deduplicating against a pack the others no longer reference), never held.
  const secretKey = deps.operationalSecretKey;
  if (!hold && secretKey !== undefined && deps.exclusive !== undefined && !ring.some((r) => inFlight(r)))
    await reclaimJobPacks(deps, deps.exclusive, secretKey, job, result);
  result.pruned = [...prunedHere];
  if (hold && Object.keys(planned).length > 0) {
    try {
      const pending = await holdPrune(deps, job.id, planned);
      result.held = { id: pending.id, runs: new Set(Object.values(planned).flat()).size };
    } catch (err) {
      result.errors.push({ destination: '*', code: codeOf(err) });
    }
  } else if (deps.approved === undefined) {
    // Nothing to hold now (or the policy is off and this pass pruned itself): a pending approval
    // of an earlier pass is superseded.
    const key = `${PRUNE_PENDING_PREFIX}${job.id}`;
    try {
      if ((await deps.state.settings.get(key)) !== undefined) await deps.state.settings.delete(key);
    } catch {
      // Best effort: an approval of a stale plan is re-planned anyway.
    }
  }
  await report(deps, result);
  return result;
}

/**
 * Reclaims the job's packs on each destination of `result` not blocked, with the job held for the
 * whole reclaim: a run started mid-reclaim could deduplicate against a pack the reclaim had counted
 * dead, pass its read-back while the pack was still there, and be recorded ok moments before the
 * pack was deleted. Stands down (logged `retention-packs-deferred`, no `packs` recorded) while a
 * run holds the job, one is in flight, or a restore apply or drill reads one of its runs.
 */
async function reclaimJobPacks(
  deps: PruneDeps,
  exclusive: JobExclusive,
  secretKey: Uint8Array,
  job: RunJob,
  result: PruneResult,
): Promise<void> {
  let deferred: string | null;
  try {
    const outcome = await exclusive(job.id, async (held) => {
      // Read again under the hold: a run started, or parked, after the caller read the ring.
      if ((await deps.state.runs.listForJob(job.id)).some((r) => inFlight(r)))
        return { deferred: 'a run of the job is in flight' };
      // The marker is set first and the pins read after it; a reader pins first and reads the
      // marker after (reclaim-marker.ts), so one of the two always sees the other.
      await markReclaim(deps.state, job.id, held, deps.now());
      try {
        const reader = await readerOf(deps, job.id);
        if (reader !== null) return { deferred: `a ${reader} is reading a run` };
        for (const out of result.destinations) {
          if (out.blocked) continue;
          const store = deps.destinations.get(out.destination);
          if (store === undefined) continue;
          const packs = await reclaimPacks(deps, store, job.id, secretKey, held);
          if (packs !== null) out.packs = packs;
          if (packs?.code !== undefined)
            result.errors.push({ destination: out.destination, code: packs.code });
        }
        return { deferred: null };
      } finally {
        await clearReclaim(deps.state, job.id);
      }
    });
    // exclusive() answers null, without running the work, when a run holds the job.
    deferred = outcome === null ? 'a run of the job holds it' : outcome.deferred;
  } catch (err) {
    deferred = `the job could not be held (${codeOf(err)})`;
    result.errors.push({ destination: '*', code: codeOf(err) });
  }
  if (deferred !== null)
    deps.log.info(
      { event: 'retention-packs-deferred', job: job.id, reason: deferred },
      `retention: job ${job.id}: packs not reclaimed this pass (${deferred})`,
    );
}

/**
 * The purpose of a pin by which a restore apply or a drill reads a run of `job` (or of a job the pin
 * does not name), or null: a repack would move chunks out from under it and delete the packs it
 * planned to read. A pending restore approval reads nothing yet.
 */
async function readerOf(deps: PruneDeps, job: string): Promise<string | null> {
  const pins = await activePins(deps.state.settings, deps.now());
  return (
    pins.find((p) => p.purpose !== 'restore-approval' && (p.job === null || p.job === job))?.purpose ?? null
  );
}

/** Logs the outcome and records it in `retention.last.<job>` (best effort). */
async function report(deps: PruneDeps, result: PruneResult): Promise<void> {
  const blocked = result.destinations.filter((d) => d.blocked);
  for (const d of blocked) {
    deps.log.warn(
      { event: 'retention-blocked', job: result.job, destination: d.destination, ...d.blocked },
      `retention: job ${result.job} destination ${d.destination} not pruned: ${d.blocked!.reason}`,
    );
  }
  const adopted = result.destinations.reduce((n, d) => n + d.adopted.length, 0);
  if (result.pruned.length > 0 || result.errors.length > 0 || adopted > 0) {
    deps.log.info(
      {
        event: 'retention-prune',
        job: result.job,
        pruned: result.pruned.length,
        kept: result.kept,
        adopted,
        errors: result.errors,
      },
      `retention: job ${result.job} pruned ${result.pruned.length} run(s)`,
    );
  }
  if (result.destinations.length === 0) return;
  await deps.state.settings
    .set(`${RETENTION_SETTING_PREFIX}${result.job}`, {
      at: deps.now().toISOString(),
      destinations: result.destinations,
    })
    .catch(() => undefined);
}

/** One destination of `planPackReclaim`. */
export interface PackReclaimPlan {
  destination: string;
  /** What a reclaim would do now; absent when the destination holds no packs of the job, or on `code`. */
  plan?: {
    plannedAt: string;
    /** Runs of the job whose indexes were read (every one still present). */
    runs: number;
    /** Chunk keys of the job in the destination. */
    keys: number;
    /** Pack counts summed over the keys (@coffer/archive `PruneKeyPlan.packs`). */
    packs: PruneKeyPlan['packs'];
    /** Stored bytes of the job's packs and pack indexes. */
    storedBytes: number;
    /** Exact: dead packs, orphans and pack indexes left empty. */
    freesBytes: number;
    /** Estimated: what repacking the sparse packs would free. */
    repackFreesBytes: number;
    /** Pack indexes that do not open (never acted on). */
    unreadableIndexes: number;
  };
  /** Why it could not be planned: the refusal a reclaim would meet (a run that does not open) or a store fault. */
  code?: string;
}

/**
 * The dry run of the pack reclaim (docs/runs.md "Packs of incremental jobs"): for each destination
 * of the job, what a reclaim would delete, repack and free now, with the grace period retention
 * uses. Reads every run's index and every pack index of the job; changes nothing, takes no hold
 * (a run committed meanwhile makes the figures stale, not wrong in a way that deletes anything).
 */
export async function planPackReclaim(
  deps: Pick<PruneDeps, 'destinations' | 'now' | 'signerPublicKey'> & { operationalSecretKey: Uint8Array },
  job: RunJob,
): Promise<PackReclaimPlan[]> {
  const out: PackReclaimPlan[] = [];
  for (const destination of jobDestinations(job)) {
    const store = deps.destinations.get(destination);
    if (store === undefined) continue;
    try {
      if (!(await hasPacks(store, job.id))) {
        out.push({ destination });
        continue;
      }
      const p = await planChunkedPrune(store, {
        job: job.id,
        secretKey: deps.operationalSecretKey,
        signerPublicKey: deps.signerPublicKey,
        graceMs: PACK_GRACE_MS,
        now: deps.now,
      });
      const sum = (f: (k: (typeof p.keys)[number]) => number) => p.keys.reduce((n, k) => n + f(k), 0);
      out.push({
        destination,
        plan: {
          plannedAt: p.plannedAt,
          runs: p.runs.length,
          keys: p.keys.length,
          packs: {
            total: p.totals.packs,
            live: sum((k) => k.packs.live),
            dead: p.totals.deadPacks,
            repack: p.totals.repackPacks,
            orphans: p.totals.orphanPacks,
            young: sum((k) => k.packs.young),
            unknown: sum((k) => k.packs.unknown),
            missing: sum((k) => k.packs.missing),
          },
          storedBytes: p.totals.storedBytes,
          freesBytes: p.totals.freesBytes,
          repackFreesBytes: p.totals.repackFreesBytes,
          unreadableIndexes: sum((k) => k.indexes.unreadable.length),
        },
      });
    } catch (err) {
      out.push({ destination, code: codeOf(err) });
    }
  }
  return out;
}

/** True when the job has format 0.2 packs in the destination (one listed key is enough). */
async function hasPacks(store: ObjectStore, job: string): Promise<boolean> {
  for await (const _ of store.listAll(layout.packsPrefix(job))) return true;
  return false;
}

/**
 * Reclaims a job's unreferenced packs in one destination (@coffer/archive `pruneChunked`: dead
 * packs deleted, sparse ones repacked, crash-safe). Null when the job has no packs there. Never
 * throws: a refusal (a run that does not open) or a store fault is returned as `code`.
 */
async function reclaimPacks(
  deps: PruneDeps,
  store: ObjectStore,
  job: string,
  secretKey: Uint8Array,
  held: JobHold,
): Promise<PackReclaim | null> {
  try {
    held.signal.throwIfAborted();
    if (!(await hasPacks(store, job))) return null;
    const r = await pruneChunked(store, {
      job,
      secretKey,
      signerPublicKey: deps.signerPublicKey,
      graceMs: PACK_GRACE_MS,
      now: deps.now,
      // Called at the start of each step and after each unit of work (a pack repacked, an index
      // rewritten, a pack deleted): with the hold on the job lost (another engine may have started
      // a run) or the engine stopping, the prune stops there, which its crash-safe order makes a
      // safe place to stop.
      onProgress: async () => {
        held.signal.throwIfAborted();
        await held.assertHeld();
      },
    });
    return {
      complete: r.complete,
      deletedPacks: r.deletedPacks,
      repackedPacks: r.repackedPacks,
      freedBytes: r.freedBytes,
    };
  } catch (err) {
    deps.log.warn(
      { event: 'retention-packs-refused', job, code: codeOf(err) },
      `retention: job ${job}: packs not reclaimed (${codeOf(err)})`,
    );
    return { complete: false, deletedPacks: 0, repackedPacks: 0, freedBytes: 0, code: codeOf(err) };
  }
}
