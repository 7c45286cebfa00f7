import { canonicalJson, type Digest } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import { CHUNKED_FORMAT_VERSION, type ChunkRef, type IndexEntry, type RecordMetadata } from '../types.ts';
import { type ChunkKeys, isObjectId, packIndexKey } from './chunk-keys.ts';
import { commonEntryFields, fastMetadata, flatLine, INDEX_FORMAT, jcsString } from './index-codec.ts';
import { isCount, isDigest, isObject } from './json-checks.ts';
import { tableBytes } from './pack-codec.ts';
import { isPackDigest, type PackDigest } from './pack-digest.ts';
import { runBinding, runTag } from './run-binding.ts';
import { openLines, sealLines } from './sealed-lines.ts';
import { getObject, listObjects } from './store.ts';

export const PACK_INDEX_FORMAT = 'coffer-pack-index';
/** The most bytes a reader accepts for one pack index object (about 1.3 million chunk entries). */
export const PACK_INDEX_MAX_BYTES = 64 * 1024 * 1024;
/**
 * The most stored or plaintext bytes a pack-index line may claim for its pack. The largest pack a
 * writer makes is packSize (at most 64 MiB) plus one chunk (at most 64 MiB) plus its chunk table
 * (36 bytes per chunk of at least 64 bytes: under 72 MiB), so 256 MiB is never reached by a real
 * pack. Readers size pack buffers from these lines, so a line claiming more is malformed rather
 * than a reason to allocate it.
 */
export const PACK_LINE_MAX_BYTES = 256 * 1024 * 1024;

/** One pack as a pack index describes it. */
export interface PackLine {
  pack: string;
  size: number;
  plainSize: number;
  compression: 'none' | 'zstd';
  /** SHA-256 of the whole stored pack object (§12.5). */
  sha256: PackDigest;
  /** Chunks in pack order, back to back from offset 0. */
  chunks: PackChunk[];
}

/** A chunk of a pack line; `pack` set (the line's pack) when read from a pack index. */
export interface PackChunk {
  id: string;
  offset: number;
  length: number;
  pack?: string;
}

/** Where a chunk is. */
export interface ChunkLocation {
  pack: string;
  offset: number;
  length: number;
}

/** The chunk map of one job and chunk key, built from its pack indexes. */
export interface ChunkMap {
  readonly keyId: string;
  readonly chunks: Map<string, ChunkLocation>;
  readonly packs: Map<string, PackLine>;
  /** Pack index objects described (their keys). */
  readonly indexes: string[];
  /** Pack index objects that did not open or were malformed (never trusted). */
  readonly unreadable: string[];
}

export function emptyChunkMap(keyId: string): ChunkMap {
  return { keyId, chunks: new Map(), packs: new Map(), indexes: [], unreadable: [] };
}

const CHUNK_ID = /^[0-9a-f]{64}$/;

// ---- run index (§12.6) ----

export interface ChunkedEntryFields {
  name: string;
  size: number;
  sha384: Digest;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: RecordMetadata;
  chunks: readonly ChunkRef[];
  change?: string;
}

/**
 * The canonical (RFC 8785) line of one 0.2 record, built directly on the writer's hot path as the
 * 0.1 line is (index-codec.ts entryLine: members in code-unit order, JSON.stringify strings); what
 * that build does not handle goes through the generic canonicalizer. A test checks both agree.
 */
export function chunkedEntryLine(e: ChunkedEntryFields): string {
  return flatLine(fastChunkedEntryLine(e) ?? canonicalChunkedEntryLine(e));
}

function fastChunkedEntryLine(e: ChunkedEntryFields): string | null {
  const meta = fastMetadata(e.metadata);
  const binding = jcsString(e.binding);
  const name = jcsString(e.name);
  const namespace = jcsString(e.namespace);
  const sourceType = jcsString(e.sourceType);
  const change = e.change === undefined ? '' : jcsString(e.change);
  if (meta === null || binding === null || name === null || namespace === null || sourceType === null)
    return null;
  if (change === null || !Number.isSafeInteger(e.size) || !isDigest(e.sha384)) return null;
  let chunks = '';
  for (const c of e.chunks) {
    if (!CHUNK_ID.test(c.id) || !Number.isSafeInteger(c.length)) return null;
    chunks += `${chunks === '' ? '' : ','}"${c.id}:${c.length}"`;
  }
  return `{"binding":${binding},${change === '' ? '' : `"change":${change},`}"chunks":[${chunks}],"metadata":{${meta}},"name":${name},"namespace":${namespace},"sha384":"${e.sha384}","size":${e.size},"sourceType":${sourceType}}`;
}

/** The same line through the generic RFC 8785 canonicalizer. */
export function canonicalChunkedEntryLine(e: ChunkedEntryFields): string {
  return canonicalJson({
    name: e.name,
    size: e.size,
    sha384: e.sha384,
    sourceType: e.sourceType,
    binding: e.binding,
    namespace: e.namespace,
    metadata: e.metadata,
    chunks: e.chunks.map((c) => `${c.id}:${c.length}`),
    ...(e.change === undefined ? {} : { change: e.change }),
  });
}

export function chunkedHeaderLine(job: string, runId: string, records: number, packs: number): string {
  return canonicalJson({
    format: INDEX_FORMAT,
    formatVersion: CHUNKED_FORMAT_VERSION,
    job,
    packs,
    records,
    runId,
  });
}

export interface PackRefLine {
  pack: string;
  sha256: PackDigest;
  size: number;
}

export function packRefLine(p: PackRefLine): string {
  return canonicalJson({ pack: p.pack, sha256: p.sha256, size: p.size });
}

/**
 * Validates one parsed 0.2 record line; throws ERR_ARCHIVE_INDEX_TAMPERED naming the object.
 *
 * With `from` (the line `value` was parsed from, and the entry parsed before it or null) the
 * entry's strings are made cheap to hold: JSON.parse copies every string out of the line, while a
 * reader or base keeps the line as well, so a record's name, digest, change token and chunk ids
 * were held twice (~1.2 KB of a base's ~2 KB per record at 200,000 records, measured). Each of
 * them is taken instead as a slice of the line where the line holds its exact characters (a
 * string without escapes), which V8 keeps as a reference into the line (32 bytes); binding,
 * namespace and source type, the same in most records, are the previous entry's strings when
 * equal. Only equal strings are swapped: the entry is the same either way. With `line` null (a
 * reader that does not keep its lines, openChunkedIndex) the parsed strings are kept, since a slice
 * would keep the line's whole frame alive; only the source fields are shared.
 */
export function toChunkedEntry(
  value: unknown,
  seq: number,
  object: string,
  from?: { line: string | null; prev: IndexEntry | null },
): IndexEntry {
  const bad = (what: string) =>
    new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: `record ${seq}: ${what}` });
  const fields = commonEntryFields(value, bad);
  if (fields.change !== undefined && typeof fields.change !== 'string') throw bad('bad change token');
  if (!Array.isArray(fields.chunks)) throw bad('bad chunks');
  const { refs, total } = chunkRefsOf(fields.chunks, from?.line ?? undefined, bad);
  if (total !== fields.size) {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
      object,
      detail: `record ${seq}: chunk lengths sum to ${total}, size is ${fields.size}`,
    });
  }
  if (from !== undefined) holdOnce(fields as typeof fields & { change?: string }, from.line, from.prev);
  const { name, size, sha384, sourceType, binding, namespace, metadata, change } = fields;
  return {
    seq,
    name,
    size,
    sha384,
    shard: -1,
    offset: -1,
    sourceType,
    binding,
    namespace,
    metadata,
    chunks: refs,
    ...(change === undefined ? {} : { change: change as string }),
  };
}

/**
 * A record line's chunk references, each checked (`chunkRefLength`), and their total length. With
 * the line, each id is a slice of it (toChunkedEntry); the list is sized up front: one grown by
 * push keeps room for 17 references (152 bytes), and most records have one chunk.
 */
function chunkRefsOf(
  chunks: unknown[],
  line: string | undefined,
  bad: (what: string) => ArchiveError,
): { refs: ChunkRef[]; total: number } {
  const refs = new Array<ChunkRef>(chunks.length);
  let total = 0;
  let at = 0;
  for (let i = 0; i < chunks.length; i++) {
    const c: unknown = chunks[i];
    const length = typeof c === 'string' ? chunkRefLength(c) : -1;
    if (length < 0) throw bad('bad chunk reference');
    if (length === 0) throw bad('empty chunk');
    const ref = c as string;
    // A reference is 64 hex digits and its length: always in the line as written.
    const p = line === undefined ? -1 : line.indexOf(ref, at);
    // Without the line, an id of its own (flatCopy): a slice would hold the parsed reference too.
    refs[i] = { id: p < 0 ? flatCopy(ref.slice(0, 64)) : line!.slice(p, p + 64), length };
    if (p >= 0) at = p + ref.length;
    total += length;
  }
  return { refs, total };
}

/**
 * Swaps the strings of parsed record `f` (JSON.parse's copies) for equal ones held anyway: its
 * name, digest and change token for slices of its `line` (when kept), its source fields for those
 * of `prev` when equal (toChunkedEntry).
 */
function holdOnce(
  f: {
    name: string;
    sha384: Digest;
    sourceType: string;
    binding: string;
    namespace: string;
    change?: string;
  },
  line: string | null,
  prev: IndexEntry | null,
): void {
  if (prev !== null) {
    if (prev.sourceType === f.sourceType) f.sourceType = prev.sourceType;
    if (prev.binding === f.binding) f.binding = prev.binding;
    if (prev.namespace === f.namespace) f.namespace = prev.namespace;
  }
  if (line === null) return;
  f.name = sliceOf(line, f.name);
  f.sha384 = sliceOf(line, f.sha384) as Digest;
  if (f.change !== undefined) f.change = sliceOf(line, f.change);
}

/** V8 copies a substring shorter than this rather than referring into its parent. */
const SLICE_MIN = 13;

/** `s` as a slice of `line` when the line holds exactly its characters, else `s` itself. */
function sliceOf(line: string, s: string): string {
  if (s.length < SLICE_MIN) return s;
  const p = line.indexOf(s);
  return p < 0 ? s : line.slice(p, p + s.length);
}

/**
 * `e` (a record `toChunkedEntry` made from a line) as record `seq` of another index holding the
 * same line: the same fields in the same order (one object shape for every entry), sharing its
 * chunk list and metadata, which no reader changes.
 */
export function withSeq(e: IndexEntry, seq: number): IndexEntry {
  if (e.seq === seq) return e;
  return {
    seq,
    name: e.name,
    size: e.size,
    sha384: e.sha384,
    shard: -1,
    offset: -1,
    sourceType: e.sourceType,
    binding: e.binding,
    namespace: e.namespace,
    metadata: e.metadata,
    chunks: e.chunks!,
    ...(e.change === undefined ? {} : { change: e.change }),
  };
}

/**
 * The length of a chunk reference `<64 lower-case hex>:<length>` (length without leading zeros, at
 * most ten digits), or -1 when malformed. By hand rather than a regular expression: every reference
 * of a run index is checked when a base loads and again at read-back, and a match array and two
 * substrings per reference showed up in the unchanged run's profile.
 */
function chunkRefLength(c: string): number {
  const n = c.length;
  if (n < 66 || n > 75 || c.charCodeAt(64) !== 58 /* : */ || !hexId(c)) return -1;
  return decimal(c, 65, n);
}

/** True when `c` starts with 64 lower-case hex digits. */
function hexId(c: string): boolean {
  if (c.length < 64) return false;
  for (let i = 0; i < 64; i++) {
    const x = c.charCodeAt(i);
    if (!((x >= 48 && x <= 57) || (x >= 97 && x <= 102))) return false;
  }
  return true;
}

/** The decimal number `c[from, to)`: one to ten digits, no leading zero but `0` itself; else -1. */
function decimal(c: string, from: number, to: number): number {
  if (to <= from || to - from > 10) return -1;
  if (c.charCodeAt(from) === 48 /* 0 */) return to - from === 1 ? 0 : -1;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = c.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

export function toPackRef(value: unknown, object: string): PackRefLine {
  if (
    !isObject(value) ||
    typeof value.pack !== 'string' ||
    !isObjectId(value.pack) ||
    !isPackDigest(value.sha256) ||
    !isCount(value.size)
  ) {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'bad pack reference line' });
  }
  return { pack: value.pack, sha256: value.sha256, size: value.size };
}

// ---- pack index (§12.5) ----

export function packIndexLines(job: string, keyId: string, packs: readonly PackLine[]): string[] {
  return [
    canonicalJson({
      format: PACK_INDEX_FORMAT,
      formatVersion: CHUNKED_FORMAT_VERSION,
      job,
      keyId,
      packs: packs.length,
    }),
    ...packs.map((p) =>
      canonicalJson({
        chunks: p.chunks.map((c) => `${c.id}:${c.offset}:${c.length}`),
        compression: p.compression,
        pack: p.pack,
        plainSize: p.plainSize,
        sha256: p.sha256,
        size: p.size,
      }),
    ),
  ];
}

/** Seals a pack index (its object key and bytes). */
export function sealPackIndex(
  job: string,
  keys: ChunkKeys,
  indexId: string,
  packs: readonly PackLine[],
  salt: Uint8Array,
): { key: string; bytes: Uint8Array } {
  const sealed = sealLines(
    packIndexLines(job, keys.keyId, packs),
    packIndexKey(keys, indexId),
    runBinding(job, indexId),
    runTag(job, indexId),
    salt,
    true,
  );
  return { key: layout.packIndex(job, keys.keyId, indexId), bytes: sealed.bytes };
}

function parsePackLine(v: unknown): PackLine | null {
  if (!isObject(v) || typeof v.pack !== 'string' || !isObjectId(v.pack)) return null;
  if (!isCount(v.size) || !isCount(v.plainSize) || !isPackDigest(v.sha256)) return null;
  if (v.size > PACK_LINE_MAX_BYTES || v.plainSize > PACK_LINE_MAX_BYTES) return null;
  if (v.compression !== 'none' && v.compression !== 'zstd') return null;
  if (!Array.isArray(v.chunks)) return null;
  const pack = v.pack;
  const chunks = new Array<PackChunk>(v.chunks.length);
  let at = 0;
  for (let i = 0; i < chunks.length; i++) {
    const c: unknown = v.chunks[i];
    // `<64 hex>:<offset>:<length>`, by hand (as chunkRefLength) rather than a regular expression.
    if (typeof c !== 'string' || c.length > 86 || c.charCodeAt(64) !== 58 /* : */ || !hexId(c)) return null;
    const colon = c.indexOf(':', 65);
    if (colon < 0) return null;
    const offset = decimal(c, 65, colon);
    const length = decimal(c, colon + 1, c.length);
    if (offset < 0 || length < 1) return null;
    // The chunks tile the pack's plaintext exactly (§12.5).
    if (offset !== at) return null;
    at += length;
    // One object per chunk, which the chunk map also takes as its location (addPacks), and an id
    // of its own: a slice would keep the whole parsed reference alive for as long as the map.
    chunks[i] = { id: flatCopy(c.slice(0, 64)), offset, length, pack };
  }
  // The chunks tile the pack's data, which its chunk table follows (§12.4).
  if (at !== v.plainSize - tableBytes(chunks.length)) return null;
  return {
    pack,
    size: v.size,
    plainSize: v.plainSize,
    compression: v.compression,
    sha256: v.sha256,
    chunks,
  };
}

/**
 * `s` as a string of its own rather than a slice of a longer one (V8 makes any substring of 13
 * characters or more a reference into its parent, which then stays alive with it). Measured on
 * 200,000 chunk ids: 48 bytes less held each, and faster than the regular expression it replaces.
 */
function flatCopy(s: string): string {
  return JSON.parse(`"${s}"`) as string;
}

/** Opens one pack index; null when it does not open or is malformed. */
export function openPackIndex(
  bytes: Uint8Array,
  job: string,
  keys: ChunkKeys,
  indexId: string,
): PackLine[] | null {
  const lines = openLines(bytes, packIndexKey(keys, indexId), runBinding(job, indexId), runTag(job, indexId));
  if (lines === null) return null;
  let header: unknown;
  try {
    header = JSON.parse(lines[0]!);
  } catch {
    return null;
  }
  if (
    !isObject(header) ||
    header.format !== PACK_INDEX_FORMAT ||
    header.job !== job ||
    header.keyId !== keys.keyId ||
    header.packs !== lines.length - 1
  )
    return null;
  const out: PackLine[] = [];
  for (const line of lines.slice(1)) {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      return null;
    }
    const p = parsePackLine(v);
    if (p === null) return null;
    out.push(p);
  }
  return out;
}

const INDEX_NAME = /\/index\/([0-9a-f]{32})\.bin$/;

/**
 * A pack index object's bytes; null when it is absent or larger than any pack index may be, which
 * callers treat like an index that does not open (never trusted) rather than a store failure.
 */
export async function getPackIndex(store: ObjectStore, key: string): Promise<Uint8Array | null> {
  return getObject(store, key, {
    maxBytes: PACK_INDEX_MAX_BYTES,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object: key, detail: 'pack index too large' }),
  }).catch((e: unknown) => {
    if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_INDEX_TAMPERED') return null;
    throw e;
  });
}

/** Adds one opened pack index to a chunk map. */
export function addPacks(map: ChunkMap, packs: readonly PackLine[]): void {
  for (const p of packs) {
    map.packs.set(p.pack, p);
    for (const c of p.chunks) {
      if (map.chunks.has(c.id)) continue;
      // A pack index's chunk is its own location (one object per chunk); others get one.
      map.chunks.set(
        c.id,
        c.pack === p.pack ? (c as ChunkLocation) : { pack: p.pack, offset: c.offset, length: c.length },
      );
    }
  }
}

/**
 * The chunk map of a job's chunk key: every pack index under `packs/<keyId>/index/` (only this
 * job's and this key's prefix is listed, so a reference never resolves into another job). An
 * index that does not open is listed in `unreadable` and contributes nothing.
 */
export async function loadChunkMap(store: ObjectStore, job: string, keys: ChunkKeys): Promise<ChunkMap> {
  const map = emptyChunkMap(keys.keyId);
  for (const { key, id } of await listPackIndexes(store, job, keys.keyId))
    await describeFrom(store, job, keys, map, key, id);
  return map;
}

/**
 * The chunk map of a job's chunk key, building on `known` (a map of the same key loaded from the
 * same store earlier, e.g. the base a run was written on): when every pack index it was built from
 * (readable or not) is still listed, only the pack indexes listed since are read, and `known` is
 * extended with them in place and returned; when one is gone (a prune or repack rewrote them), the
 * whole map is loaded again. One listing either way. The indexes `known` holds are not read again:
 * they were opened (each frame's tag checked) when it loaded, and a pack index is never rewritten
 * under the same name (a prune writes new ones under new names).
 */
export async function extendChunkMap(
  store: ObjectStore,
  job: string,
  keys: ChunkKeys,
  known: ChunkMap,
): Promise<ChunkMap> {
  if (known.keyId !== keys.keyId) return loadChunkMap(store, job, keys);
  const listed = await listPackIndexes(store, job, keys.keyId);
  const had = new Set([...known.indexes, ...known.unreadable]);
  const names = new Set(listed.map((o) => o.key));
  for (const key of had) if (!names.has(key)) return loadChunkMap(store, job, keys);
  for (const { key, id } of listed) if (!had.has(key)) await describeFrom(store, job, keys, known, key, id);
  return known;
}

/** Reads and opens one pack index into `map` (or lists it unreadable there). */
async function describeFrom(
  store: ObjectStore,
  job: string,
  keys: ChunkKeys,
  map: ChunkMap,
  key: string,
  id: string,
): Promise<void> {
  const bytes = await getPackIndex(store, key);
  const packs = bytes === null ? null : openPackIndex(bytes, job, keys, id);
  if (packs === null) {
    map.unreadable.push(key);
    return;
  }
  map.indexes.push(key);
  addPacks(map, packs);
}

/**
 * True when the pack index objects under the map's key are exactly those the map was built from
 * (readable or not): no pack index was added, rewritten or deleted since (a prune writes new ones
 * under new names and deletes the old; a run adds one). One listing, nothing read.
 */
export async function chunkMapIsCurrent(store: ObjectStore, job: string, map: ChunkMap): Promise<boolean> {
  const known = new Set([...map.indexes, ...map.unreadable]);
  const listed = await listPackIndexes(store, job, map.keyId);
  return listed.length === known.size && listed.every((o) => known.has(o.key));
}

/** The pack index objects of a job's chunk key (other names under the prefix are not indexes). */
async function listPackIndexes(
  store: ObjectStore,
  job: string,
  keyId: string,
): Promise<{ key: string; id: string }[]> {
  const out: { key: string; id: string }[] = [];
  for (const o of await listObjects(store, layout.packIndexPrefix(job, keyId))) {
    const m = INDEX_NAME.exec(o.key);
    if (m !== null) out.push({ key: o.key, id: m[1]! });
  }
  return out;
}

export { CHUNK_ID };
