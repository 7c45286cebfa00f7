/**
 * Planning a prune of a job's 0.2 packs (docs/archive-format.md §12.9): reads every run and the
 * chunks it references, lists the job's pack objects and pack indexes, and decides for each pack
 * whether it is live, dead, to repack, an orphan, or left alone (young or possibly described by an
 * unreadable index). Nothing here writes or deletes; `repack.ts` carries a plan out, so a dry run
 * and a real prune share the one classification.
 */
import type { ObjectInfo, ObjectStore } from '@coffer/objectstore';
import { openChunkedIndex, unwrapChunkKey } from '../chunked-reader.ts';
import { ArchiveError } from '../errors.ts';
import { assertId, layout } from '../layout.ts';
import type { ChunkedPruneOptions, ChunkedPrunePlan, PruneKeyPlan, PruneRunRead } from '../prune.ts';
import { listRuns, readRunManifest } from '../reader.ts';
import { isChunkedManifest } from '../types.ts';
import type { ChunkKeys } from './chunk-keys.ts';
import { getPackIndex, openPackIndex, type PackLine } from './chunked-index.ts';
import { frameCodec } from './codec-pool.ts';
import { describePack } from './pack-codec.ts';
import { assertRuntime } from './runtime.ts';
import { listObjects } from './store.ts';

const MIB = 1024 * 1024;
const DEFAULT_GRACE_MS = 3_600_000;
const DEFAULT_REPACK_THRESHOLD = 0.5;
const MIN_PACK_SIZE = 64 * 1024;
const MAX_PACK_SIZE = 64 * MIB;

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

export async function readRuns(
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
      // Only the chunk ids are wanted: the lines (and each frame's text) go as the records parse.
      const index = await openChunkedIndex(store, manifest, refs.keys, null, false);
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

export async function listKeyObjects(
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

export async function openIndexes(
  store: ObjectStore,
  job: string,
  keys: ChunkKeys,
  objs: KeyObjects,
): Promise<void> {
  for (const ix of objs.indexes) {
    const bytes = await getPackIndex(store, ix.key);
    ix.lines = bytes === null ? null : openPackIndex(bytes, job, keys, ix.id);
  }
}

// ---- step 0: classification ----

type PackFate = 'live' | 'dead' | 'repack' | 'orphan' | 'young' | 'unknown';

/** Everything the prune needs to act on one key. */
export interface KeyWork {
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

export function describedPacks(objs: KeyObjects): Map<string, Described> {
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
export function usable(objs: KeyObjects, d: Described): boolean {
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
  return `${l.size}:${l.plainSize}:${l.compression}:${l.sha256}:${l.chunks.map((c) => c.id).join(',')}`;
}

function clampPackSize(n: number): number {
  return Math.min(MAX_PACK_SIZE, Math.max(MIN_PACK_SIZE, n));
}

export function checkOptions(o: ChunkedPruneOptions): { graceMs: number; threshold: number; now: Date } {
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
export const UNDESCRIBED_MAX_BYTES = 80 * 1024 * 1024;

export async function survey(
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
