import type { ObjectInfo, ObjectStore } from '@coffer/objectstore';
import { openChunkedIndex, unwrapChunkKey } from './chunked-reader.ts';
import { ArchiveError } from './errors.ts';
import { type ChunkKeys, chunkId, newObjectId } from './internal/chunk-keys.ts';
import {
  openPackIndex,
  PACK_INDEX_MAX_BYTES,
  type PackLine,
  sealPackIndex,
} from './internal/chunked-index.ts';
import { type FrameCodec, frameCodec } from './internal/codec-pool.ts';
import { describePack, openPack, storePack, tableBytes, writeTable } from './internal/pack-codec.ts';
import { sessionSalt } from './internal/run-binding.ts';
import { assertRuntime } from './internal/runtime.ts';
import { deleteObject, getObject, listObjects, putObject } from './internal/store.ts';
import { assertId, layout } from './layout.ts';
import { listRuns, readRunManifest } from './reader.ts';
import { isChunkedManifest } from './types.ts';

const MIB = 1024 * 1024;
const DEFAULT_GRACE_MS = 3_600_000;
const DEFAULT_REPACK_THRESHOLD = 0.5;
const MIN_PACK_SIZE = 64 * 1024;
const MAX_PACK_SIZE = 64 * MIB;

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

// ---- step 0: the runs and what they reference ----

interface KeyRefs {
  keys: ChunkKeys;
  runs: string[];
  /** Referenced chunk id: a run referencing it (for error messages). */
  chunks: Map<string, string>;
  packSize: number;
}

function refused(e: unknown, job: string, runId: string): ArchiveError {
  if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_INVALID_ARGUMENT') return e;
  const code = e instanceof ArchiveError ? e.code : 'ERR_ARCHIVE_INTERNAL';
  return new ArchiveError(code, {
    object: (e instanceof ArchiveError ? e.object : undefined) ?? layout.manifest(job, runId),
    detail: `pruning refused: run ${job}/${runId} does not open (${e instanceof ArchiveError ? e.reason : 'unexpected failure'})`,
    cause: e,
  });
}

async function readRuns(
  store: ObjectStore,
  o: ChunkedPruneOptions,
): Promise<{ runs: PruneRunRead[]; byKey: Map<string, KeyRefs> }> {
  const runs: PruneRunRead[] = [];
  const byKey = new Map<string, KeyRefs>();
  for (const listing of await listRuns(store, o.job)) {
    const { runId } = listing;
    try {
      const manifest = await readRunManifest(store, {
        job: o.job,
        runId,
        ...(o.signerPublicKey === undefined ? {} : { signerPublicKey: o.signerPublicKey }),
      });
      const doc = manifest.document;
      if (!isChunkedManifest(doc)) {
        runs.push({ runId, formatVersion: doc.formatVersion, keyId: null, chunks: 0 });
        continue;
      }
      let refs = byKey.get(doc.chunkKey);
      if (refs === undefined) {
        const keys = await unwrapChunkKey(doc, manifest.key, o.secretKey);
        refs = { keys, runs: [], chunks: new Map(), packSize: doc.chunking.packSize };
        byKey.set(doc.chunkKey, refs);
      }
      const index = await openChunkedIndex(store, manifest, refs.keys);
      const own = new Set<string>();
      for (const e of index.entries) for (const c of e.chunks ?? []) own.add(c.id);
      for (const id of own) if (!refs.chunks.has(id)) refs.chunks.set(id, runId);
      refs.runs.push(runId);
      refs.packSize = doc.chunking.packSize;
      runs.push({ runId, formatVersion: doc.formatVersion, keyId: doc.chunkKey, chunks: own.size });
    } catch (e) {
      throw refused(e, o.job, runId);
    }
  }
  return { runs, byKey };
}

// ---- step 0: the job's pack objects ----

interface PackObject {
  id: string;
  key: string;
  size: number;
  young: boolean;
  /**
   * For an old pack no readable index describes: the chunk ids its own table lists (checked
   * against their ids), or an empty set when it does not open. A pack holding a referenced chunk
   * is never an orphan, whatever happened to its pack index (§12.4).
   */
  tableIds?: Set<string>;
}

interface IndexObject {
  id: string;
  key: string;
  size: number;
  young: boolean;
  /** Null: did not open (or the key is unreferenced and was not tried). */
  lines: PackLine[] | null;
}

interface KeyObjects {
  packs: Map<string, PackObject>;
  indexes: IndexObject[];
}

const PACK_PATH = /\/packs\/([0-9a-f]{32})\/data\/([0-9a-f]{2})\/([0-9a-f]{32})\.bin$/;
const INDEX_PATH = /\/packs\/([0-9a-f]{32})\/index\/([0-9a-f]{32})\.bin$/;

function isYoung(o: ObjectInfo, now: number, graceMs: number): boolean {
  // A store that gives no time: treated as young, so nothing is touched on a guess.
  return o.lastModified === undefined || now - o.lastModified.getTime() < graceMs;
}

async function listKeyObjects(
  store: ObjectStore,
  job: string,
  now: number,
  graceMs: number,
): Promise<Map<string, KeyObjects>> {
  const out = new Map<string, KeyObjects>();
  const of = (keyId: string) => {
    let k = out.get(keyId);
    if (k === undefined) {
      k = { packs: new Map(), indexes: [] };
      out.set(keyId, k);
    }
    return k;
  };
  for (const o of await listObjects(store, layout.packsPrefix(job))) {
    const young = isYoung(o, now, graceMs);
    const p = PACK_PATH.exec(o.key);
    if (p !== null && p[3]!.startsWith(p[2]!) && o.key === layout.pack(job, p[1]!, p[3]!)) {
      of(p[1]!).packs.set(p[3]!, { id: p[3]!, key: o.key, size: o.size, young });
      continue;
    }
    const i = INDEX_PATH.exec(o.key);
    if (i !== null && o.key === layout.packIndex(job, i[1]!, i[2]!))
      of(i[1]!).indexes.push({ id: i[2]!, key: o.key, size: o.size, young, lines: null });
  }
  return out;
}

async function openIndexes(
  store: ObjectStore,
  job: string,
  keys: ChunkKeys,
  objs: KeyObjects,
): Promise<void> {
  for (const ix of objs.indexes) {
    const bytes = await getObject(store, ix.key, {
      maxBytes: PACK_INDEX_MAX_BYTES,
      tooLarge: () =>
        new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object: ix.key, detail: 'pack index too large' }),
    }).catch((e: unknown) => {
      if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_INDEX_TAMPERED') return null;
      throw e;
    });
    ix.lines = bytes === null ? null : openPackIndex(bytes, job, keys, ix.id);
  }
}

// ---- step 0: classification ----

type PackFate = 'live' | 'dead' | 'repack' | 'orphan' | 'young' | 'unknown';

/** Everything the prune needs to act on one key. */
interface KeyWork {
  plan: PruneKeyPlan;
  keys: ChunkKeys | null;
  packSize: number;
  objects: KeyObjects;
  /** Per pack to repack: its line and the chunk ids it holds. */
  repack: { pack: PackObject; line: PackLine; held: Set<string> }[];
  /** Pack indexes to write again with these lines (empty: delete only). */
  rewrite: { index: IndexObject; lines: PackLine[] }[];
  /** Pack ids to delete in step 3 (dead, repacked, orphans). */
  remove: PackObject[];
}

interface Described {
  line: PackLine;
  by: IndexObject[];
}

function describedPacks(objs: KeyObjects): Map<string, Described> {
  const out = new Map<string, Described>();
  for (const ix of objs.indexes) {
    for (const line of ix.lines ?? []) {
      const d = out.get(line.pack);
      if (d === undefined) out.set(line.pack, { line, by: [ix] });
      else d.by.push(ix);
    }
  }
  return out;
}

/** Present with the described size: a copy a reader can use. */
function usable(objs: KeyObjects, d: Described): boolean {
  return objs.packs.get(d.line.pack)?.size === d.line.size;
}

/**
 * One holder per referenced chunk: among the usable packs holding it, a protected (young) one
 * first, then the one with the largest live fraction, then the most live bytes, then the lowest id.
 * Throws when a referenced chunk has no usable copy (pruning a broken job could lose the evidence).
 */
function assignHolders(
  job: string,
  refs: KeyRefs,
  objs: KeyObjects,
  described: Map<string, Described>,
  isProtected: (pack: string) => boolean,
): Map<string, Set<string>> {
  const liveOf = new Map<string, number>();
  const candidates = new Map<string, string[]>();
  for (const d of described.values()) {
    if (!usable(objs, d)) continue;
    let live = 0;
    const seen = new Set<string>();
    for (const c of d.line.chunks) {
      if (!refs.chunks.has(c.id) || seen.has(c.id)) continue;
      seen.add(c.id);
      live += c.length;
      const list = candidates.get(c.id);
      if (list === undefined) candidates.set(c.id, [d.line.pack]);
      else list.push(d.line.pack);
    }
    liveOf.set(d.line.pack, live);
  }
  const rank = (p: string) => {
    const line = described.get(p)!.line;
    return {
      prot: isProtected(p) ? 1 : 0,
      ratio: liveOf.get(p)! / Math.max(1, line.plainSize),
      live: liveOf.get(p)!,
    };
  };
  const better = (a: string, b: string) => {
    const x = rank(a);
    const y = rank(b);
    if (x.prot !== y.prot) return x.prot > y.prot;
    if (x.ratio !== y.ratio) return x.ratio > y.ratio;
    if (x.live !== y.live) return x.live > y.live;
    return a < b;
  };
  const held = new Map<string, Set<string>>();
  for (const [id, runId] of refs.chunks) {
    const list = candidates.get(id);
    if (list === undefined) {
      // Held only by a pack no readable index describes (its own table says so): that pack is
      // kept (`unknown`); `pruneChunked` describes such packs again before it plans.
      if ([...objs.packs.values()].some((p) => p.tableIds?.has(id) === true)) continue;
      throw missingChunk(job, refs.keys.keyId, id, runId, objs, described);
    }
    let best = list[0]!;
    for (const p of list) if (better(p, best)) best = p;
    const set = held.get(best);
    if (set === undefined) held.set(best, new Set([id]));
    else set.add(id);
  }
  return held;
}

function missingChunk(
  job: string,
  keyId: string,
  id: string,
  runId: string,
  objs: KeyObjects,
  described: Map<string, Described>,
): ArchiveError {
  const detail = `pruning refused: chunk ${id} of run ${job}/${runId} has no usable copy`;
  for (const d of described.values()) {
    if (!d.line.chunks.some((c) => c.id === id)) continue;
    const object = layout.pack(job, keyId, d.line.pack);
    const code = objs.packs.has(d.line.pack) ? 'ERR_ARCHIVE_SHARD_TAMPERED' : 'ERR_ARCHIVE_PACK_MISSING';
    return new ArchiveError(code, { object, detail });
  }
  return new ArchiveError('ERR_ARCHIVE_CHUNK_MISSING', {
    object: layout.packIndexPrefix(job, keyId),
    detail,
  });
}

function emptyKeyPlan(keyId: string, objs: KeyObjects, runs: string[]): PruneKeyPlan {
  let packBytes = 0;
  for (const p of objs.packs.values()) packBytes += p.size;
  return {
    keyId,
    referenced: runs.length > 0,
    runs,
    packs: {
      total: objs.packs.size,
      live: 0,
      dead: 0,
      repack: 0,
      orphans: 0,
      young: 0,
      unknown: 0,
      missing: 0,
    },
    bytes: {
      packs: packBytes,
      indexes: objs.indexes.reduce((n, i) => n + i.size, 0),
      dead: 0,
      orphans: 0,
      emptyIndexes: 0,
      repack: 0,
      plain: 0,
      livePlain: 0,
    },
    indexes: { total: objs.indexes.length, rewrite: 0, empty: 0, unreadable: [] },
    deletePacks: [],
    repackPacks: [],
    orphanPacks: [],
  };
}

/** A key no remaining run names: everything old goes, unless a young pack index might describe it. */
function planUnreferenced(keyId: string, objs: KeyObjects): KeyWork {
  const plan = emptyKeyPlan(keyId, objs, []);
  const work: KeyWork = { plan, keys: null, packSize: 0, objects: objs, repack: [], rewrite: [], remove: [] };
  const youngIndex = objs.indexes.some((i) => i.young);
  for (const p of objs.packs.values()) {
    if (p.young || youngIndex) {
      plan.packs.young++;
      continue;
    }
    plan.packs.dead++;
    plan.bytes.dead += p.size;
    plan.deletePacks.push(p.id);
    work.remove.push(p);
  }
  for (const ix of objs.indexes) {
    if (ix.young) continue;
    plan.indexes.empty++;
    plan.bytes.emptyIndexes += ix.size;
    work.rewrite.push({ index: ix, lines: [] });
  }
  return work;
}

function planReferenced(
  job: string,
  keyId: string,
  refs: KeyRefs,
  objs: KeyObjects,
  threshold: number,
  packSize: number | undefined,
): KeyWork {
  const plan = emptyKeyPlan(keyId, objs, refs.runs);
  const described = describedPacks(objs);
  const isProtected = (pack: string) =>
    objs.packs.get(pack)?.young === true || described.get(pack)?.by.some((i) => i.young) === true;
  const held = assignHolders(job, refs, objs, described, isProtected);
  const describedChunk = new Set<string>();
  for (const d of described.values())
    if (usable(objs, d)) for (const c of d.line.chunks) describedChunk.add(c.id);
  const unreadable = objs.indexes.filter((i) => i.lines === null);
  plan.indexes.unreadable = unreadable.map((i) => i.key);
  const work: KeyWork = {
    plan,
    keys: refs.keys,
    packSize: clampPackSize(packSize ?? refs.packSize),
    objects: objs,
    repack: [],
    rewrite: [],
    remove: [],
  };
  const going = new Set<string>();
  for (const p of objs.packs.values()) {
    const d = described.get(p.id);
    // An undescribed pack is an orphan only when every referenced chunk its table lists has a
    // described copy elsewhere (a crash between a rewrite and a delete leaves such duplicates).
    const referencedUndescribed =
      d === undefined && [...(p.tableIds ?? [])].some((id) => refs.chunks.has(id) && !describedChunk.has(id));
    const fate = packFate(
      p,
      d,
      held.get(p.id),
      threshold,
      isProtected(p.id),
      unreadable.length > 0 || referencedUndescribed,
    );
    if (d !== undefined) {
      plan.bytes.plain += d.line.plainSize;
      for (const c of d.line.chunks) if (held.get(p.id)?.has(c.id)) plan.bytes.livePlain += c.length;
    }
    countFate(plan, work, p, d, held.get(p.id), fate);
    if (fate === 'dead' || fate === 'repack') going.add(p.id);
  }
  for (const d of described.values()) {
    if (objs.packs.has(d.line.pack) || isProtected(d.line.pack)) continue;
    plan.packs.missing++;
    going.add(d.line.pack);
  }
  planIndexes(plan, work, going);
  return work;
}

function packFate(
  p: PackObject,
  d: Described | undefined,
  held: Set<string> | undefined,
  threshold: number,
  isProtected: boolean,
  anyUnreadable: boolean,
): PackFate {
  if (isProtected) return 'young';
  if (d === undefined) return anyUnreadable ? 'unknown' : 'orphan';
  if (held === undefined || held.size === 0) return 'dead';
  let live = 0;
  for (const c of d.line.chunks) if (held.has(c.id)) live += c.length;
  return live < threshold * d.line.plainSize && p.size === d.line.size ? 'repack' : 'live';
}

function countFate(
  plan: PruneKeyPlan,
  work: KeyWork,
  p: PackObject,
  d: Described | undefined,
  held: Set<string> | undefined,
  fate: PackFate,
): void {
  switch (fate) {
    case 'live':
    case 'young':
    case 'unknown':
      plan.packs[fate]++;
      return;
    case 'dead':
      plan.packs.dead++;
      plan.bytes.dead += p.size;
      plan.deletePacks.push(p.id);
      work.remove.push(p);
      return;
    case 'orphan':
      plan.packs.orphans++;
      plan.bytes.orphans += p.size;
      plan.orphanPacks.push(p.id);
      work.remove.push(p);
      return;
    case 'repack': {
      const line = d!.line;
      let live = 0;
      for (const c of line.chunks) if (held!.has(c.id)) live += c.length;
      plan.packs.repack++;
      plan.bytes.repack += Math.round((p.size * (line.plainSize - live)) / line.plainSize);
      plan.repackPacks.push(p.id);
      work.repack.push({ pack: p, line, held: held! });
      work.remove.push(p);
    }
  }
}

/**
 * Old pack indexes that describe a pack that goes are written again without it; a line another
 * index kept unchanged describes identically is dropped too, so a crash between writing an index
 * again and deleting the old one leaves no lasting duplicate. Young and unreadable ones are kept.
 */
function planIndexes(plan: PruneKeyPlan, work: KeyWork, going: Set<string>): void {
  const changes = (ix: IndexObject) =>
    ix.lines !== null && !ix.young && (ix.lines.length === 0 || ix.lines.some((l) => going.has(l.pack)));
  const stable = new Map<string, string>();
  for (const ix of work.objects.indexes) {
    if (ix.lines === null || changes(ix)) continue;
    for (const l of ix.lines) stable.set(l.pack, lineKey(l));
  }
  for (const ix of work.objects.indexes) {
    if (!changes(ix)) continue;
    const lines = ix.lines!.filter((l) => !going.has(l.pack) && stable.get(l.pack) !== lineKey(l));
    work.rewrite.push({ index: ix, lines });
    if (lines.length > 0) plan.indexes.rewrite++;
    else {
      plan.indexes.empty++;
      plan.bytes.emptyIndexes += ix.size;
    }
  }
}

function lineKey(l: PackLine): string {
  return `${l.size}:${l.plainSize}:${l.compression}:${l.sha384}:${l.chunks.map((c) => c.id).join(',')}`;
}

function clampPackSize(n: number): number {
  return Math.min(MAX_PACK_SIZE, Math.max(MIN_PACK_SIZE, n));
}

function checkOptions(o: ChunkedPruneOptions): { graceMs: number; threshold: number; now: Date } {
  const invalid = (detail: string) => new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail });
  if (typeof o !== 'object' || o === null) throw invalid('options must be an object');
  assertId('job', o.job);
  if (!(o.secretKey instanceof Uint8Array)) throw invalid('secretKey must be a Uint8Array');
  const graceMs = o.graceMs ?? DEFAULT_GRACE_MS;
  if (!Number.isSafeInteger(graceMs) || graceMs < 0) throw invalid('graceMs must be a non-negative integer');
  const threshold = o.repackThreshold ?? DEFAULT_REPACK_THRESHOLD;
  if (typeof threshold !== 'number' || !(threshold >= 0 && threshold <= 1))
    throw invalid('repackThreshold must be between 0 and 1');
  if (o.packSize !== undefined && (!Number.isSafeInteger(o.packSize) || o.packSize <= 0))
    throw invalid('packSize must be a positive integer');
  const now = (o.now ?? (() => new Date()))();
  if (!(now instanceof Date) || Number.isNaN(now.getTime())) throw invalid('now must return a valid Date');
  return { graceMs, threshold, now };
}

/** Reads the old packs no readable index describes and records the chunk ids their tables list. */
async function describeUndescribed(
  store: ObjectStore,
  job: string,
  keys: ChunkKeys,
  objs: KeyObjects,
): Promise<void> {
  const described = describedPacks(objs);
  const codec = frameCodec(undefined);
  for (const p of objs.packs.values()) {
    if (p.young || described.has(p.id)) continue;
    try {
      const line = await describePack(store, codec, job, keys, p.id, UNDESCRIBED_MAX_BYTES);
      p.tableIds = new Set(line.chunks.map((c) => c.id));
    } catch (e) {
      if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_DESTINATION') throw e;
      p.tableIds = new Set();
    }
  }
}

/** The largest undescribed pack read (64 MiB packs + an 8 MiB chunk + table + frame). */
const UNDESCRIBED_MAX_BYTES = 80 * 1024 * 1024;

async function survey(
  store: ObjectStore,
  o: ChunkedPruneOptions,
): Promise<{ plan: ChunkedPrunePlan; work: KeyWork[] }> {
  assertRuntime();
  const { graceMs, threshold, now } = checkOptions(o);
  const { runs, byKey } = await readRuns(store, o);
  const objects = await listKeyObjects(store, o.job, now.getTime(), graceMs);
  const work: KeyWork[] = [];
  const keyIds = [...new Set([...objects.keys(), ...byKey.keys()])].sort();
  for (const keyId of keyIds) {
    const objs = objects.get(keyId) ?? { packs: new Map(), indexes: [] };
    const refs = byKey.get(keyId);
    if (refs === undefined) {
      work.push(planUnreferenced(keyId, objs));
      continue;
    }
    await openIndexes(store, o.job, refs.keys, objs);
    await describeUndescribed(store, o.job, refs.keys, objs);
    work.push(planReferenced(o.job, keyId, refs, objs, threshold, o.packSize));
  }
  const keys = work.map((w) => w.plan);
  const sum = (f: (k: PruneKeyPlan) => number) => keys.reduce((n, k) => n + f(k), 0);
  return {
    plan: {
      job: o.job,
      plannedAt: now.toISOString(),
      graceMs,
      repackThreshold: threshold,
      runs,
      keys,
      totals: {
        packs: sum((k) => k.packs.total),
        deadPacks: sum((k) => k.packs.dead),
        repackPacks: sum((k) => k.packs.repack),
        orphanPacks: sum((k) => k.packs.orphans),
        storedBytes: sum((k) => k.bytes.packs + k.bytes.indexes),
        freesBytes: sum((k) => k.bytes.dead + k.bytes.orphans + k.bytes.emptyIndexes),
        repackFreesBytes: sum((k) => k.bytes.repack),
      },
    },
    work,
  };
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

// ---- steps 1-3 ----

interface Tally {
  repackedPacks: number;
  newPacks: number;
  newIndexes: number;
  rewrittenIndexes: number;
  deletedIndexes: number;
  deletedPacks: number;
  deletedBytes: number;
  writtenBytes: number;
}

const CREATE_ONLY = { contentType: 'application/octet-stream', ifNoneMatch: '*' } as const;

/** A pack to repack, opened: digest, then tag under its own key bound to its id. */
async function openPackPlain(
  store: ObjectStore,
  codec: FrameCodec,
  job: string,
  keys: ChunkKeys,
  line: PackLine,
): Promise<Uint8Array> {
  return (await openPack(store, codec, job, keys, line.pack, line, line.size)).plain;
}

/** Collects verified live chunks and seals them into new packs as the writer does (§12.4). */
class PackBuilder {
  readonly lines: PackLine[] = [];
  private pieces: Uint8Array[] = [];
  private chunks: PackLine['chunks'] = [];
  private length = 0;
  private readonly salt = sessionSalt();
  private readonly store: ObjectStore;
  private readonly codec: FrameCodec;
  private readonly job: string;
  private readonly keys: ChunkKeys;
  private readonly packSize: number;
  private readonly tally: Tally;

  constructor(
    store: ObjectStore,
    codec: FrameCodec,
    job: string,
    keys: ChunkKeys,
    packSize: number,
    tally: Tally,
  ) {
    this.store = store;
    this.codec = codec;
    this.job = job;
    this.keys = keys;
    this.packSize = packSize;
    this.tally = tally;
  }

  async add(id: string, bytes: Uint8Array): Promise<void> {
    this.pieces.push(Buffer.from(bytes));
    this.chunks.push({ id, offset: this.length, length: bytes.length });
    this.length += bytes.length;
    if (this.length >= this.packSize) await this.seal();
  }

  async seal(): Promise<void> {
    if (this.length === 0) return;
    const chunks = this.chunks;
    const plain = Buffer.allocUnsafe(this.length + tableBytes(chunks.length));
    let o = 0;
    for (const p of this.pieces) {
      plain.set(p, o);
      o += p.length;
    }
    writeTable(plain, this.length, chunks);
    this.pieces = [];
    this.chunks = [];
    this.length = 0;
    const line = await storePack(this.store, this.codec, this.job, this.keys, newObjectId(), plain, chunks, {
      compress: true,
      salt: this.salt,
    });
    this.tally.newPacks++;
    this.tally.writtenBytes += line.size;
    this.lines.push(line);
  }

  /** Lists the new packs back (as the writer does before describing them), then stores their pack index. */
  async describe(): Promise<void> {
    await this.seal();
    if (this.lines.length === 0) return;
    const listed = new Map<string, number>();
    for (const o of await listObjects(this.store, layout.packDataPrefix(this.job, this.keys.keyId)))
      listed.set(o.key, o.size);
    for (const l of this.lines) {
      const object = layout.pack(this.job, this.keys.keyId, l.pack);
      if (listed.get(object) !== l.size)
        throw new ArchiveError('ERR_ARCHIVE_TRUNCATED', { object, detail: 'repacked pack not found back' });
    }
    const ix = sealPackIndex(this.job, this.keys, newObjectId(), this.lines, this.salt);
    await putObject(this.store, ix.key, ix.bytes, { ...CREATE_ONLY, contentLength: ix.bytes.length });
    this.tally.newIndexes++;
    this.tally.writtenBytes += ix.bytes.length;
  }
}

type Progress = (step: PruneProgress['step'], done: number, total: number) => Promise<void>;

async function repackAll(
  store: ObjectStore,
  job: string,
  work: KeyWork[],
  codec: FrameCodec,
  tally: Tally,
  progress: Progress,
): Promise<void> {
  const total = work.reduce((n, w) => n + w.repack.length, 0);
  let done = 0;
  await progress('repack', done, total);
  for (const w of work) {
    if (w.repack.length === 0 || w.keys === null) continue;
    const keys = w.keys;
    const out = new PackBuilder(store, codec, job, keys, w.packSize, tally);
    const copied = new Set<string>();
    for (const { line, held } of w.repack) {
      const plain = await openPackPlain(store, codec, job, keys, line);
      for (const c of line.chunks) {
        if (!held.has(c.id) || copied.has(c.id)) continue;
        const bytes = plain.subarray(c.offset, c.offset + c.length);
        if (chunkId(keys, bytes) !== c.id) {
          throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
            object: layout.pack(job, keys.keyId, line.pack),
            detail: `chunk ${c.id}`,
          });
        }
        await out.add(c.id, bytes);
        copied.add(c.id);
      }
      tally.repackedPacks++;
      await progress('repack', ++done, total);
    }
    await out.describe();
  }
}

async function rewriteAll(
  store: ObjectStore,
  job: string,
  work: KeyWork[],
  tally: Tally,
  progress: Progress,
): Promise<void> {
  const total = work.reduce((n, w) => n + w.rewrite.length, 0);
  let done = 0;
  await progress('rewrite', done, total);
  for (const w of work) {
    const salt = sessionSalt();
    for (const { index, lines } of w.rewrite) {
      if (lines.length > 0) {
        const ix = sealPackIndex(job, w.keys!, newObjectId(), lines, salt);
        await putObject(store, ix.key, ix.bytes, { ...CREATE_ONLY, contentLength: ix.bytes.length });
        tally.newIndexes++;
        tally.rewrittenIndexes++;
        tally.writtenBytes += ix.bytes.length;
      }
      await deleteObject(store, index.key);
      tally.deletedIndexes++;
      tally.deletedBytes += index.size;
      await progress('rewrite', ++done, total);
    }
  }
}

async function deleteAll(
  store: ObjectStore,
  work: KeyWork[],
  tally: Tally,
  progress: Progress,
): Promise<void> {
  const total = work.reduce((n, w) => n + w.remove.length, 0);
  let done = 0;
  await progress('delete', done, total);
  for (const w of work) {
    for (const p of w.remove) {
      await deleteObject(store, p.key);
      tally.deletedPacks++;
      tally.deletedBytes += p.size;
      await progress('delete', ++done, total);
    }
  }
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
