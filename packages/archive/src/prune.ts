/**
 * Pruning a job's 0.2 packs (docs/archive-format.md §12.9 is normative): the public surface. The
 * plan (`internal/prune-plan.ts`) decides what is dead, to repack or orphaned from the runs that
 * remain; the steps (`internal/repack.ts`) carry it out in the crash-safe order. A pack holding a
 * chunk a remaining run references is never deleted before another described copy exists.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import { newObjectId } from './internal/chunk-keys.ts';
import { type PackLine, sealPackIndex } from './internal/chunked-index.ts';
import { frameCodec } from './internal/codec-pool.ts';
import { describePack } from './internal/pack-codec.ts';
import {
  checkOptions,
  describedPacks,
  listKeyObjects,
  openIndexes,
  readRuns,
  survey,
  UNDESCRIBED_MAX_BYTES,
  usable,
} from './internal/prune-plan.ts';
import {
  CREATE_ONLY,
  deleteAll,
  type Progress,
  repackAll,
  rewriteAll,
  type Tally,
} from './internal/repack.ts';
import { sessionSalt } from './internal/run-binding.ts';
import { assertRuntime } from './internal/runtime.ts';
import { putObject } from './internal/store.ts';
import { listRuns } from './reader.ts';

export interface ChunkedPruneOptions {
  job: string;
  /** Operational or break-glass secret key: every 0.2 run's chunk key is unwrapped with it. */
  secretKey: Uint8Array;
  /** Trusted signer (the engine's own): every run must be signed by it. */
  signerPublicKey?: Uint8Array;
  /** Objects younger than this (store modification time) are never deleted or repacked; default 1 hour. */
  graceMs?: number;
  /** A pack whose live plaintext is under this fraction of its plaintext is repacked; default 0.5, 0 never. */
  repackThreshold?: number;
  /** The clock the grace period is measured against (default: now). */
  now?: () => Date;
  /** Plaintext bytes per repacked pack; default the newest run's `chunking.packSize`. */
  packSize?: number;
  /** Frame codec threads, as for the writer. */
  workers?: number;
}

export interface PruneProgress {
  /** 1 repack, 2 rewrite pack indexes, 3 delete packs. */
  step: 'repack' | 'rewrite' | 'delete';
  /** Units done in this step over every key (0: the step starts), and how many there are. */
  done: number;
  total: number;
}

export interface ChunkedPruneRunOptions extends ChunkedPruneOptions {
  /** After each unit of work and at the start of each step; a throw stops the prune there (safely). */
  onProgress?: (p: PruneProgress) => void | Promise<void>;
}

/** A run the plan read. */
export interface PruneRunRead {
  runId: string;
  formatVersion: string;
  /** The chunk key it names (null for a 0.1 run, which references no pack). */
  keyId: string | null;
  /** Distinct chunks it references. */
  chunks: number;
}

/** The plan for one chunk key of the job (`packs/<keyId>/`). */
export interface PruneKeyPlan {
  keyId: string;
  /** False when no remaining run names the key: everything old under it goes. */
  referenced: boolean;
  /** Runs naming this key. */
  runs: string[];
  packs: {
    /** Pack objects listed: live + dead + repack + orphans + young + unknown. */
    total: number;
    /** Kept: they hold at least the threshold of live plaintext. */
    live: number;
    /** To delete: no referenced chunk (or every one held by another pack). */
    dead: number;
    /** To repack: some live plaintext, under the threshold. */
    repack: number;
    /** To delete: no pack index describes them (a crashed run's leftovers). */
    orphans: number;
    /** Untouched: younger than the grace period, or described by a pack index that is. */
    young: number;
    /** Untouched: undescribed, but an unreadable pack index might describe them. */
    unknown: number;
    /** Described by a pack index but absent from the store (their lines are dropped). */
    missing: number;
  };
  bytes: {
    /** Stored bytes of every pack and of every pack index. */
    packs: number;
    indexes: number;
    /** Freed by deleting dead packs, orphans, and pack indexes that become empty. */
    dead: number;
    orphans: number;
    emptyIndexes: number;
    /** Estimated, freed by repacking: each repacked pack's size times its dead fraction. */
    repack: number;
    /** Plaintext held by the packs, and the part of it runs reference. */
    plain: number;
    livePlain: number;
  };
  indexes: {
    total: number;
    /** Written again without the packs that go. */
    rewrite: number;
    /** Deleted: every pack they describe goes. */
    empty: number;
    /** Pack indexes that do not open (never acted on). */
    unreadable: string[];
  };
  /** Pack ids the prune acts on. */
  deletePacks: string[];
  repackPacks: string[];
  orphanPacks: string[];
}

/** What `planChunkedPrune` returns (nothing is changed) and what `pruneChunked` carried out. */
export interface ChunkedPrunePlan {
  job: string;
  /** The clock reading the grace period was measured against. */
  plannedAt: string;
  graceMs: number;
  repackThreshold: number;
  runs: PruneRunRead[];
  keys: PruneKeyPlan[];
  totals: {
    packs: number;
    deadPacks: number;
    repackPacks: number;
    orphanPacks: number;
    storedBytes: number;
    /** Dead packs, orphans and empty pack indexes (exact, from the listing). */
    freesBytes: number;
    /** Estimated. */
    repackFreesBytes: number;
  };
}

export interface ChunkedPruneResult {
  plan: ChunkedPrunePlan;
  /** False when the prune stopped before deleting because a run was committed meanwhile (`stopped`). */
  complete: boolean;
  stopped?: string;
  repackedPacks: number;
  newPacks: number;
  /** Pack indexes written: one per key repacked, plus the rewritten ones. */
  newIndexes: number;
  rewrittenIndexes: number;
  deletedIndexes: number;
  deletedPacks: number;
  /** Stored bytes deleted (packs and pack indexes) and written; freed = deleted - written. */
  deletedBytes: number;
  writtenBytes: number;
  freedBytes: number;
}

/**
 * The dry run: what `pruneChunked` would do now, changing nothing. Throws the error of the first
 * run that does not open (its code, naming the object, "pruning refused"), ERR_ARCHIVE_CHUNK_MISSING
 * / _PACK_MISSING / _SHARD_TAMPERED when a referenced chunk has no usable copy,
 * ERR_ARCHIVE_INVALID_ARGUMENT for bad options, ERR_ARCHIVE_DESTINATION for store failures.
 */
export async function planChunkedPrune(
  store: ObjectStore,
  options: ChunkedPruneOptions,
): Promise<ChunkedPrunePlan> {
  return (await survey(store, options)).plan;
}

/** The run a concurrent writer committed since the plan (its chunks may be in packs about to go). */
async function newRun(store: ObjectStore, plan: ChunkedPrunePlan): Promise<string | null> {
  const known = new Set(plan.runs.map((r) => r.runId));
  for (const r of await listRuns(store, plan.job)) if (!known.has(r.runId)) return r.runId;
  return null;
}

/**
 * Plans (as `planChunkedPrune`, with the same errors) and carries the plan out in the crash-safe
 * order of §12.9: repack, rewrite pack indexes, delete packs. Also throws the reader's errors for a
 * pack to repack that does not verify (ERR_ARCHIVE_SHARD_TAMPERED, _CHUNK_TAMPERED, ...), before
 * anything is deleted. Returns `complete: false` without deleting anything when a run was committed
 * after the plan was made (prune again).
 */
export async function pruneChunked(
  store: ObjectStore,
  options: ChunkedPruneRunOptions,
): Promise<ChunkedPruneResult> {
  // Packs that hold referenced chunks but lost their description are described again first, so
  // the plan below treats them like any other pack.
  await rebuildPackIndexes(store, options);
  const { plan, work } = await survey(store, options);
  const tally: Tally = {
    repackedPacks: 0,
    newPacks: 0,
    newIndexes: 0,
    rewrittenIndexes: 0,
    deletedIndexes: 0,
    deletedPacks: 0,
    deletedBytes: 0,
    writtenBytes: 0,
  };
  const result = (complete: boolean, stopped?: string): ChunkedPruneResult => ({
    plan,
    complete,
    ...(stopped === undefined ? {} : { stopped }),
    ...tally,
    freedBytes: tally.deletedBytes - tally.writtenBytes,
  });
  const progress: Progress = async (step, done, total) => {
    await options.onProgress?.({ step, done, total });
  };
  await repackAll(store, options.job, work, frameCodec(options.workers), tally, progress);
  const appeared = await newRun(store, plan);
  if (appeared !== null)
    return result(false, `run ${options.job}/${appeared} was committed during the prune`);
  await rewriteAll(store, options.job, work, tally, progress);
  await deleteAll(store, work, tally, progress);
  return result(true);
}

/**
 * Writes a pack index for every old pack (past the grace period) that no readable pack index
 * describes but that holds a chunk a remaining run references with no described copy, from the
 * pack's own chunk table (§12.4, every chunk checked against its id). Returns the number of packs
 * described. Run before `pruneChunked` plans (it calls this itself) or after pack indexes were lost.
 */
export async function rebuildPackIndexes(store: ObjectStore, options: ChunkedPruneOptions): Promise<number> {
  assertRuntime();
  const { graceMs, now } = checkOptions(options);
  const { byKey } = await readRuns(store, options);
  const objects = await listKeyObjects(store, options.job, now.getTime(), graceMs);
  let described = 0;
  for (const [keyId, refs] of byKey) {
    const objs = objects.get(keyId);
    if (objs === undefined) continue;
    await openIndexes(store, options.job, refs.keys, objs);
    const known = describedPacks(objs);
    const knownChunks = new Set<string>();
    for (const d of known.values()) if (usable(objs, d)) for (const c of d.line.chunks) knownChunks.add(c.id);
    const codec = frameCodec(options.workers);
    const lines: PackLine[] = [];
    for (const p of objs.packs.values()) {
      if (p.young || known.has(p.id)) continue;
      let line: PackLine;
      try {
        line = await describePack(store, codec, options.job, refs.keys, p.id, UNDESCRIBED_MAX_BYTES);
      } catch (e) {
        if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_DESTINATION') throw e;
        continue;
      }
      if (line.chunks.some((c) => refs.chunks.has(c.id) && !knownChunks.has(c.id))) lines.push(line);
    }
    if (lines.length === 0) continue;
    const ix = sealPackIndex(options.job, refs.keys, newObjectId(), lines, sessionSalt());
    await putObject(store, ix.key, ix.bytes, { ...CREATE_ONLY, contentLength: ix.bytes.length });
    described += lines.length;
  }
  return described;
}
