/**
 * Reading and verifying a 0.2 run (docs/archive-format.md §12.7 is normative): the run index is
 * checked against the signed manifest before it is opened; each chunk is located through the job's
 * pack indexes (only this job's prefix under this run's key id is listed), its pack's SHA-256 is
 * compared with the pack index before decryption, and its bytes must have the chunk id the signed
 * index names, so every referenced byte is covered by the run's signature wherever it is stored.
 * Opened packs are kept in a small LRU, so memory stays bounded by the pack size.
 */
import { createHash } from 'node:crypto';
import { formatDigest, unwrapKey } from '@coffer/crypto';
import type { ObjectInfo, ObjectStore } from '@coffer/objectstore';
import type { ChunkedBase } from './chunked-base.ts';
import { ArchiveError } from './errors.ts';
import { BufferPool } from './internal/buffer-pool.ts';
import { type ChunkKeys, chunkId, chunkKeys, runIndexKey } from './internal/chunk-keys.ts';
import { type ChunkStreamContext, streamRecords } from './internal/chunk-stream.ts';
import {
  addPacks,
  type ChunkLocation,
  type ChunkMap,
  chunkMapIsCurrent,
  extendChunkMap,
  loadChunkMap,
  type PackRefLine,
  toChunkedEntry,
  toPackRef,
  withSeq,
} from './internal/chunked-index.ts';
import { type FrameCodec, frameCodec, inlineCodec, laneCodec } from './internal/codec-pool.ts';
import { flatLine } from './internal/index-codec.ts';
import { KnownLines } from './internal/known-lines.ts';
import { chunkKeyAad } from './internal/manifest.ts';
import { describePack, openPack } from './internal/pack-codec.ts';
import { runBinding, runTag } from './internal/run-binding.ts';
import { openLines } from './internal/sealed-lines.ts';
import { readSignedIndex } from './internal/signed-index.ts';
import { listObjects } from './internal/store.ts';
import {
  checkIndexHeader,
  checkWindowSize,
  isWindowed,
  parseIndexLine,
  RECORD_WINDOW,
  streamChunkedIndex,
} from './internal/streamed-index.ts';
import { layout } from './layout.ts';
import type {
  ChunkedManifestDocument,
  ChunkRef,
  IndexEntry,
  KnownRecords,
  OpenedRun,
  RecordRead,
  RecordsReadOptions,
  VerifiedManifest,
  VerifyChecks,
  VerifyProgress,
} from './types.ts';

/** Packs kept opened (plaintext) at once: 4 × up to 72 MiB at the largest pack size, 64 MiB at the default. */
const PACK_CACHE = 4;
/** Packs opened ahead of the one being read (the cache holds them and the current one). */
const PREFETCH = 2;
/**
 * Buffers of a writer's read-back beyond one per lane. One, not PREFETCH: each lane always has its
 * next pack read in while it opens one, and the read-back runs at the end of a first run, when
 * the run's memory peaks. Measured on a 1 GiB first run (2 vCPUs, three runs each): peak RSS
 * 233-240 MiB against 240-253 MiB with two, no slower.
 */
const READ_BACK_AHEAD = 1;
const DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024;

/** The largest pack a reader accepts when no pack index gives its size: 64 MiB + 8 MiB + table + frame. */
const PACK_MAX_BYTES = 80 * 1024 * 1024;

/** Unwraps a 0.2 run's chunk key and checks it is the key the manifest names. */
export async function unwrapChunkKey(
  doc: ChunkedManifestDocument,
  object: string,
  secretKey: Uint8Array,
): Promise<ChunkKeys> {
  if (!(secretKey instanceof Uint8Array))
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'secretKey must be a Uint8Array' });
  let k: Uint8Array;
  try {
    k = new Uint8Array(await unwrapKey(secretKey, doc.recipients, chunkKeyAad(doc.job, doc.chunkKey)));
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ERR_CRYPTO_WRONG_KEY' || code === 'ERR_CRYPTO_TAMPERED') {
      throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', {
        object,
        detail: 'no wrapped chunk key opens with this secret key',
      });
    }
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'malformed secret key', cause: e });
  }
  if (k.length !== 32)
    throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', { object, detail: 'chunk key has the wrong length' });
  const keys = chunkKeys(k);
  if (keys.keyId !== doc.chunkKey) {
    throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', {
      object,
      detail: 'chunk key does not match the signed key id',
    });
  }
  return keys;
}

export interface ChunkedIndex {
  entries: IndexEntry[];
  /**
   * The signed line of each entry, as stored (same order as `entries`); null when the index was
   * opened without them (`keepLines` false: it cannot become a base).
   */
  lines: string[] | null;
  packRefs: PackRefLine[];
}

/**
 * Reads and opens a 0.2 run's index.bin (size and digest first, then the frames, then every line).
 * With `known`, a line equal to a known record's line is taken as that record, with this index's
 * sequence number, instead of being parsed again (types.ts KnownRecords).
 *
 * `keepLines` false (a reader that restores or verifies, a prune): the lines are not kept, only
 * the records parsed from them, and each record line is parsed as its frame opens, so each frame's
 * decoded text (about 1 MiB, held outside the V8 heap) can go before the next one opens. Only a
 * base needs the lines (the next run compares its records' lines with them). Kept, the lines and
 * the strings sliced from them hold every frame's text for as long as the records live: about
 * 450 bytes per record beside the records themselves (a 200,000-record run: about 100 MiB).
 */
export async function openChunkedIndex(
  store: ObjectStore,
  manifest: VerifiedManifest,
  keys: ChunkKeys,
  known?: KnownRecords | null,
  keepLines = true,
): Promise<ChunkedIndex> {
  const doc = manifest.document as ChunkedManifestDocument;
  const object = layout.index(doc.job, doc.runId);
  let bytes: Uint8Array | null = await readSignedIndex(store, doc);
  const matcher = known === undefined || known === null ? null : new KnownLines(known);
  const parse = (line: string, what: string): unknown => parseIndexLine(line, what, object);
  // The known record of each record line (by position among the record lines), when it has one;
  // without `keepLines`, every other record line's record too, parsed as its frame opened.
  const same: (IndexEntry | undefined)[] = [];
  const lines = openLines(
    bytes,
    runIndexKey(keys, doc.runId),
    runBinding(doc.job, doc.runId),
    runTag(doc.job, doc.runId),
    matcher === null && keepLines
      ? undefined
      : lineKeeper(matcher, keepLines, same, (line, i, prev) =>
          toChunkedEntry(parse(line, `record ${i}`), i, object, { line: null, prev }),
        ),
  );
  bytes = null; // the sealed bytes are not needed while the lines are parsed
  if (lines === null)
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'a frame does not open' });
  const header = checkIndexHeader(parse(lines[0]!, 'header'), doc, object);
  const inconsistent = (detail: string) =>
    new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', { object, detail });
  if (lines.length !== 1 + header.records + header.packs) {
    throw inconsistent('record count differs from the manifest');
  }
  const entries: IndexEntry[] = [];
  let bytesTotal = 0;
  let chunkTotal = 0;
  for (let i = 0; i < header.records; i++) {
    const line = lines[1 + i]!;
    const known = same[i];
    const e =
      known === undefined
        ? toChunkedEntry(parse(line, `record ${i}`), i, object, { line, prev: entries.at(-1) ?? null })
        : withSeq(known, i);
    bytesTotal += e.size;
    chunkTotal += e.chunks!.length;
    entries.push(e);
  }
  if (bytesTotal !== doc.totals.bytes || chunkTotal !== doc.totals.chunks)
    throw inconsistent('byte or chunk total differs from the manifest');
  const packRefs: PackRefLine[] = [];
  for (let i = 1 + header.records; i < lines.length; i++)
    packRefs.push(toPackRef(parse(lines[i]!, 'pack reference'), object));
  if (packRefs.length !== doc.totals.packs) throw inconsistent('pack count differs from the manifest');
  return { entries, lines: keepLines ? lines.slice(1, 1 + header.records) : null, packRefs };
}

/**
 * What openChunkedIndex keeps of each line as its frame opens (openLines' `substitute`). A line
 * equal to a known one is kept as the known string, so the frames' decoded text need not all stay
 * alive at once (a run with nothing changed drops each); its record goes into `same`. With
 * `keepLines`, a line not known is kept as a copy of its own (`flatLine`), not as a slice of its
 * frame: the records built on it become the next run's base, whose known lines are carried on
 * run after run, so a slice kept a whole frame (about 1 MiB) alive for one changed line, and every
 * run with a few changes spread over the listing kept all of its frames (8 MiB more per run with
 * 1 % churn on the 1 GiB bench set, for as long as the engine lived). Without `keepLines`, a
 * record line is parsed here (`parseRecord`, every frame so far authenticated; the index as a
 * whole is judged once all opened), its record goes into `same` and the line is kept as ''. The
 * header (line 0) tells how many record lines follow; the pack references after them are kept
 * as they are.
 */
function lineKeeper(
  matcher: KnownLines | null,
  keepLines: boolean,
  same: (IndexEntry | undefined)[],
  parseRecord: (line: string, index: number, prev: IndexEntry | null) => IndexEntry,
): (line: string) => string {
  let seen = 0;
  let records = -1;
  return (line) => {
    const at = seen++;
    if (at === 0) {
      records = headerRecords(line);
      return line;
    }
    if (at > records) return line;
    const found = matcher?.find(line) ?? null;
    if (found !== null) same[at - 1] = found.entry;
    if (keepLines) return found === null ? flatLine(line) : found.line;
    if (found === null) same[at - 1] = parseRecord(line, at - 1, at > 1 ? (same[at - 2] ?? null) : null);
    return '';
  };
}

/**
 * @internal The chunk map of `known` when it is a base (`loadChunkedBase`, `verifyRun`'s
 * `keepBase`) of `job` under chunk key `keyId`: a read-back of a run written on it builds its chunk
 * map on this one, and a reader of that very run (openRun) reads through it. Null for any other records.
 */
export function baseMapOf(known: KnownRecords, job: string, keyId: string): ChunkMap | null {
  const b = known as Partial<Pick<ChunkedBase, 'map' | 'job' | 'keyId'>>;
  return b.map !== undefined && b.job === job && b.keyId === keyId ? b.map : null;
}

/** The record count a header line states, or -1 (the header is judged after every frame opened). */
function headerRecords(line: string): number {
  try {
    const n = (JSON.parse(line) as { records?: unknown } | null)?.records;
    return typeof n === 'number' && Number.isSafeInteger(n) ? n : -1;
  } catch {
    return -1;
  }
}

export class ChunkedRunReader implements OpenedRun {
  readonly manifest: VerifiedManifest;
  private readonly doc: ChunkedManifestDocument;
  private readonly store: ObjectStore;
  /** @internal */
  readonly keys: ChunkKeys;
  private readonly codec: FrameCodec;
  private index: Promise<ChunkedIndex> | null = null;
  private map: Promise<ChunkMap> | null = null;
  private readonly cache = new Map<string, Promise<Uint8Array>>();
  /** The pack in use and those opened ahead of it (prefetcher): never evicted for another. */
  private readonly ahead = new Set<string>();
  /** Called after a pack's digest and tag verified (verify's progress). */
  onPackOpened: ((pack: string, plainSize: number) => void) | null = null;
  /** Undescribed packs were looked at (once per reader). */
  private scanned = false;
  /** @internal Records whose lines need not be parsed again when the index loads (verifyRun `known`). */
  known: KnownRecords | null = null;
  /**
   * @internal A chunk map of this run's key loaded from the same store before (the base the run
   * was written on): the chunk map is built on it, reading only the pack indexes stored since.
   */
  knownMap: ChunkMap | null = null;
  /**
   * @internal A chunk map lent by a kept base of this run's job and key (openRun `knownRecords`):
   * read in place of loading one, never written. Used only while it is current and resolves every
   * chunk of the run (`borrow`); a reader on a lent map never scans packs into it and never hands
   * it on (`loaded`).
   */
  lentMap: ChunkMap | null = null;
  /** The chunk map in use is a lent one. */
  private lent = false;
  /**
   * @internal Keep the index's signed lines when it loads (verifyRun `keepBase`): only a base needs
   * them, and without them each frame's text goes once its records are parsed (openChunkedIndex).
   */
  keepLines = false;
  /** @internal Records per window of a streamed verify (tests use small windows). */
  verifyWindow = RECORD_WINDOW;

  constructor(store: ObjectStore, manifest: VerifiedManifest, keys: ChunkKeys, workers?: number) {
    this.store = store;
    this.manifest = manifest;
    this.doc = manifest.document as ChunkedManifestDocument;
    this.keys = keys;
    this.codec = frameCodec(workers);
  }

  loadIndex(): Promise<ChunkedIndex> {
    // Known records serve this one load: the reader does not keep them (a base) alive after it.
    const known = this.known;
    this.known = null;
    this.index ??= openChunkedIndex(this.store, this.manifest, this.keys, known, this.keepLines);
    return this.index;
  }

  chunkMap(): Promise<ChunkMap> {
    const known = this.knownMap;
    const lent = this.lentMap;
    this.knownMap = null;
    this.lentMap = null;
    this.map ??=
      known !== null
        ? extendChunkMap(this.store, this.doc.job, this.keys, known)
        : lent !== null
          ? this.borrow(lent)
          : loadChunkMap(this.store, this.doc.job, this.keys);
    return this.map;
  }

  /**
   * `lent` when it still describes the store (exactly the job's pack indexes under this key: one
   * listing) and names every chunk the run uses, so that no read of this run could need to scan
   * packs into it; otherwise a map of this reader's own, loaded as usual.
   */
  private async borrow(lent: ChunkMap): Promise<ChunkMap> {
    const [{ entries }, current] = await Promise.all([
      this.loadIndex(),
      chunkMapIsCurrent(this.store, this.doc.job, lent),
    ]);
    if (current && entries.every((e) => (e.chunks ?? []).every((r) => lent.chunks.has(r.id)))) {
      this.lent = true;
      return lent;
    }
    return loadChunkMap(this.store, this.doc.job, this.keys);
  }

  /**
   * The index and chunk map this reader loaded, when the index kept its lines (`keepLines`) and the
   * map is exactly the job's pack indexes (no pack was described by scanning it): what the next run
   * may build on. Null otherwise.
   */
  async loaded(): Promise<{ index: ChunkedIndex; map: ChunkMap } | null> {
    if (this.index === null || this.map === null || this.scanned || this.lent) return null;
    const index = await this.index;
    return index.lines === null ? null : { index, map: await this.map };
  }

  /**
   * True when this reader may read the run again as it is: its chunk map is loaded, was not
   * completed by scanning packs, and is still exactly the job's pack indexes (a prune or repack
   * since would have changed them). One listing; nothing is read.
   */
  async isCurrent(): Promise<boolean> {
    if (this.map === null || this.scanned) return false;
    return chunkMapIsCurrent(this.store, this.doc.job, await this.map);
  }

  async *records(): AsyncIterable<IndexEntry> {
    const { entries } = await this.loadIndex();
    yield* entries;
  }

  async *recordWindows(size = RECORD_WINDOW): AsyncIterable<readonly IndexEntry[]> {
    checkWindowSize(size);
    if (this.index !== null) {
      // Loaded already (records(), a base): its entries, rather than reading the index again.
      const { entries } = await this.index;
      for (let i = 0; i < entries.length; i += size) yield entries.slice(i, i + size);
      return;
    }
    yield* streamChunkedIndex(this.store, this.manifest, this.keys, size);
  }

  /** The opened plaintext of a pack (digest against its pack index, then its tag under its own key). */
  private openPack(pack: string, map: ChunkMap): Promise<Uint8Array> {
    const hit = this.cache.get(pack);
    if (hit !== undefined) {
      this.cache.delete(pack);
      this.cache.set(pack, hit);
      return hit;
    }
    const opened = this.readPack(pack, map);
    opened.catch(() => this.cache.delete(pack));
    this.cache.set(pack, opened);
    // Least recently used first, but never the pack in use or one opened ahead and not yet
    // reached: a pack opened ahead is inserted before the pack in use is next touched, so plain
    // LRU would evict exactly the pack about to be read, and every pack would be opened twice.
    for (const key of this.cache.keys()) {
      if (this.cache.size <= PACK_CACHE) break;
      if (!this.ahead.has(key)) this.cache.delete(key);
    }
    while (this.cache.size > PACK_CACHE) this.cache.delete(this.cache.keys().next().value!);
    return opened;
  }

  private async readPack(pack: string, map: ChunkMap): Promise<Uint8Array> {
    const line = map.packs.get(pack);
    if (line === undefined) {
      throw new ArchiveError('ERR_ARCHIVE_PACK_MISSING', {
        object: layout.pack(this.doc.job, this.keys.keyId, pack),
        detail: 'no pack index describes it',
      });
    }
    const { plain } = await openPack(this.store, this.codec, this.doc.job, this.keys, pack, line, line.size);
    this.onPackOpened?.(pack, line.plainSize);
    return plain;
  }

  /**
   * A chunk no pack index names: the packs no readable index describes are read once and described
   * from their own chunk tables (each chunk checked against its id), so a run stays readable when
   * its pack indexes were lost. Returns whether any pack was added.
   */
  private async describeUndescribed(map: ChunkMap): Promise<boolean> {
    // A lent map is never written (it resolved every chunk of the run when it was borrowed).
    if (this.scanned || this.lent) return false;
    this.scanned = true;
    let added = false;
    const { job } = this.doc;
    for (const o of await listObjects(this.store, layout.packDataPrefix(job, this.keys.keyId))) {
      const m = /\/([0-9a-f]{32})\.bin$/.exec(o.key);
      if (m === null || map.packs.has(m[1]!)) continue;
      try {
        addPacks(map, [await describePack(this.store, this.codec, job, this.keys, m[1]!, PACK_MAX_BYTES)]);
        added = true;
      } catch (e) {
        if (e instanceof ArchiveError && e.code === 'ERR_ARCHIVE_DESTINATION') throw e;
        // A pack that does not open or lies about its chunks is never used.
      }
    }
    return added;
  }

  /** Where chunk `id` is: in `map`, else once undescribed packs were scanned into it; undefined if nowhere. */
  private async locate(id: string, map: ChunkMap): Promise<ChunkLocation | undefined> {
    const loc = map.chunks.get(id);
    if (loc !== undefined || !(await this.describeUndescribed(map))) return loc;
    return map.chunks.get(id);
  }

  /** One chunk's verified bytes (a view of the opened pack). */
  async readChunk(ref: ChunkRef, map: ChunkMap): Promise<Uint8Array> {
    const loc = await this.locate(ref.id, map);
    const run = `${this.doc.job}/${this.doc.runId}`;
    if (loc === undefined) {
      throw new ArchiveError('ERR_ARCHIVE_CHUNK_MISSING', {
        object: layout.packIndexPrefix(this.doc.job, this.keys.keyId),
        detail: `chunk ${ref.id} of run ${run}`,
      });
    }
    const object = layout.pack(this.doc.job, this.keys.keyId, loc.pack);
    if (loc.length !== ref.length) {
      throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
        object,
        detail: `chunk ${ref.id}: length differs`,
      });
    }
    const plain = await this.openPack(loc.pack, map);
    const bytes = plain.subarray(loc.offset, loc.offset + loc.length);
    if (chunkId(this.keys, bytes) !== ref.id) {
      throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
        object,
        detail: `chunk ${ref.id} of run ${run}`,
      });
    }
    return bytes;
  }

  /**
   * Opens packs ahead of use on the codec workers (at most PREFETCH beyond the one in use, within
   * the pack cache), in the order `entries` first use them, while this thread checks and hashes:
   * `ahead(ref)` before each chunk is read.
   */
  private prefetcher(entries: Iterable<readonly ChunkRef[]>, map: ChunkMap): (ref: ChunkRef) => void {
    const order: string[] = [];
    const position = new Map<string, number>();
    for (const refs of entries)
      for (const r of refs) {
        const pack = map.chunks.get(r.id)?.pack;
        if (pack !== undefined && !position.has(pack)) {
          position.set(pack, order.length);
          order.push(pack);
        }
      }
    let ahead = 0;
    let current = 0;
    this.ahead.clear();
    return (ref) => {
      const pack = map.chunks.get(ref.id)?.pack;
      const i = pack === undefined ? undefined : position.get(pack);
      if (i === undefined) return;
      // The window kept from eviction: the pack in use and those opened ahead of it.
      for (; current < i; current++) this.ahead.delete(order[current]!);
      this.ahead.add(pack!);
      for (; ahead <= i + PREFETCH && ahead < order.length; ahead++) {
        const next = order[ahead]!;
        this.ahead.add(next);
        this.openPack(next, map).catch(() => undefined);
      }
    };
  }

  async *readRecord(entry: IndexEntry): AsyncIterable<Uint8Array> {
    const map = await this.chunkMap();
    const hash = createHash('sha384');
    const ahead = this.prefetcher([entry.chunks ?? []], map);
    for (const ref of entry.chunks ?? []) {
      ahead(ref);
      const bytes = await this.readChunk(ref, map);
      hash.update(bytes);
      yield bytes;
    }
    this.checkRecord(entry, hash);
  }

  private checkRecord(entry: IndexEntry, hash: ReturnType<typeof createHash>): void {
    if (formatDigest(hash.digest()) !== entry.sha384) {
      throw new ArchiveError('ERR_ARCHIVE_RECORD_TAMPERED', {
        object: layout.index(this.doc.job, this.doc.runId),
        detail: `record ${entry.seq}`,
      });
    }
  }

  async *readRecords(
    entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
    options: RecordsReadOptions = {},
  ): AsyncIterable<RecordRead> {
    const max = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
    const partBytes = options.partBytes ?? Number.POSITIVE_INFINITY;
    if (!(partBytes > 0)) {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'partBytes must be positive' });
    }
    let last = -1;
    const check = (window: readonly IndexEntry[]) => {
      for (const e of window) {
        if (e.seq <= last || e.chunks === undefined) {
          throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
            detail: 'entries must be records of this run in increasing seq',
          });
        }
        if (e.size > max && e.size <= partBytes) {
          throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
            detail: `record ${e.seq} is larger than maxRecordBytes`,
          });
        }
        last = e.seq;
      }
      return window;
    };
    // Windows are checked as they are planned; an array, before anything is read.
    const checked = isWindowed(entries)
      ? (async function* () {
          for await (const w of entries) yield check(w);
        })()
      : check(entries);
    yield* streamRecords(
      await this.streamContext(),
      checked,
      true,
      partBytes,
      options.checkRecordDigest !== false,
    );
  }

  /** What the pipelined record stream (internal/chunk-stream.ts) needs of this reader. */
  private async streamContext(): Promise<ChunkStreamContext> {
    const map = await this.chunkMap();
    return {
      store: this.store,
      codec: this.codec,
      keys: this.keys,
      job: this.doc.job,
      runId: this.doc.runId,
      map,
      locate: (ref) => this.locate(ref.id, map),
      onPackOpened: (pack, plainSize) => this.onPackOpened?.(pack, plainSize),
    };
  }

  /**
   * Verifies the run: the index; every record's chunks (pack digest, tag, chunk id) and plaintext
   * SHA-384; every pack-reference line (its pack present with the recorded size, or every chunk it
   * held found elsewhere, e.g. after a repack). With `newPacks` (the writer's read-back), only those
   * packs are read; the other referenced packs are checked by listing and pack-index digest.
   */
  async verifyAll(
    checks: VerifyChecks,
    onProgress?: (p: VerifyProgress) => void,
    newPacks?: readonly string[],
  ): Promise<void> {
    // A full verify of an index not loaded yet, which no base will be made of, streams it.
    if (newPacks === undefined && this.index === null && this.known === null && !this.keepLines)
      return this.verifyStreamed(checks, onProgress);
    const { job } = this.doc;
    const fresh = newPacks === undefined ? null : new Set(newPacks);
    // The pack indexes and (for a read-back) the listing of the job's packs are started with the
    // index: their reads wait on the store while this thread opens and parses the index (measured
    // at 1 GiB with nothing changed: 50-110 ms of the read-back's 250-300 ms were those waits).
    // Each is awaited below; the no-op handlers keep a failure that arrives first from counting
    // as unhandled (it is still thrown where it is awaited).
    const listing =
      fresh === null ? null : listObjects(this.store, layout.packDataPrefix(job, this.keys.keyId));
    listing?.catch(() => undefined);
    this.chunkMap().catch(() => undefined);
    const { entries, packRefs } = await this.loadIndex();
    checks.index = true;
    const map = await this.chunkMap();
    const packs = new Set<string>();
    for (const e of entries)
      for (const r of e.chunks!) {
        const loc = await this.locate(r.id, map);
        if (loc === undefined) {
          throw new ArchiveError('ERR_ARCHIVE_CHUNK_MISSING', {
            object: layout.packIndexPrefix(job, this.keys.keyId),
            detail: `chunk ${r.id} of run ${job}/${this.doc.runId}`,
          });
        }
        packs.add(loc.pack);
      }
    this.checkPackRefs(packRefs, map, packs);
    await this.countingPacks(checks, () =>
      this.verifyPacks(entries, map, packs, fresh, listing, checks, onProgress),
    );
  }

  /**
   * Every pack-reference line: its pack described as recorded (digest and size), or, when no
   * pack index describes it any more, used by no record (it was repacked and every chunk resolves
   * elsewhere). `packs`: the packs the run's records use.
   */
  private checkPackRefs(packRefs: readonly PackRefLine[], map: ChunkMap, packs: ReadonlySet<string>): void {
    for (const ref of packRefs) {
      const line = map.packs.get(ref.pack);
      if (line !== undefined && line.sha256 === ref.sha256 && line.size === ref.size) continue;
      if (line === undefined && !packs.has(ref.pack)) continue;
      throw new ArchiveError('ERR_ARCHIVE_SHARD_TAMPERED', {
        object: layout.pack(this.doc.job, this.keys.keyId, ref.pack),
        detail: "pack differs from the run's signed pack reference",
      });
    }
  }

  /**
   * Runs `read` counting the packs it opens into `checks.shards`: only while this verification
   * runs (a reader verified and then read again, a restore's phase two, does not count that read's).
   */
  private async countingPacks(checks: VerifyChecks, read: () => Promise<void>): Promise<void> {
    const before = this.onPackOpened;
    this.onPackOpened = () => {
      checks.shards++;
    };
    try {
      await read();
    } finally {
      this.onPackOpened = before;
    }
  }

  /**
   * verifyAll's full verify with the index streamed (internal/streamed-index.ts): its records are
   * read in windows as its frames open, so a verify holds a few windows of records (the one
   * being read and up to four planned) rather than the run's (a 200,000-record run: about
   * 130 MiB of heap, and the collector let the heap grow to twice that). The pack references are
   * checked once the whole index was judged, after the records were read; a chunk no pack holds
   * fails where its record is read, as it does there.
   */
  private async verifyStreamed(
    checks: VerifyChecks,
    onProgress?: (p: VerifyProgress) => void,
  ): Promise<void> {
    // The pack indexes load while index.bin is read and its first frames open.
    const loading = this.chunkMap();
    loading.catch(() => undefined);
    const index = streamChunkedIndex(this.store, this.manifest, this.keys, this.verifyWindow);
    const head = await index.next();
    const map = await loading;
    const packs = new Set<string>();
    let packRefs: PackRefLine[] | null = null;
    const windows = async function* (this: ChunkedRunReader): AsyncGenerator<IndexEntry[]> {
      for (let n = head; ; n = await index.next()) {
        if (n.done === true) {
          packRefs = n.value;
          return;
        }
        for (const e of n.value)
          for (const r of e.chunks!) {
            const loc = await this.locate(r.id, map);
            if (loc !== undefined) packs.add(loc.pack);
          }
        yield n.value;
      }
    }.call(this);
    await this.countingPacks(checks, () =>
      this.verifyRecords(windows, checks, this.doc.totals.packs, onProgress),
    );
    // Every window came out, so the index was judged whole.
    if (packRefs === null)
      throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'index stream not drained' });
    checks.index = true;
    this.checkPackRefs(packRefs, map, packs);
  }

  /** verifyAll from its pack checks on (the listing and read-back, or every record). */
  private async verifyPacks(
    entries: readonly IndexEntry[],
    map: ChunkMap,
    packs: ReadonlySet<string>,
    fresh: ReadonlySet<string> | null,
    listing: Promise<ObjectInfo[]> | null,
    checks: VerifyChecks,
    onProgress?: (p: VerifyProgress) => void,
  ): Promise<void> {
    const { job } = this.doc;
    if (listing !== null && fresh !== null) {
      // Packs stored by earlier runs: present with their described size (one listing).
      const listed = new Map<string, number>();
      for (const o of await listing) listed.set(o.key, o.size);
      for (const pack of packs) {
        if (fresh.has(pack)) continue;
        const object = layout.pack(job, this.keys.keyId, pack);
        const size = listed.get(object);
        if (size === undefined) throw new ArchiveError('ERR_ARCHIVE_PACK_MISSING', { object });
        if (size !== map.packs.get(pack)!.size) {
          throw new ArchiveError('ERR_ARCHIVE_SHARD_TAMPERED', {
            object,
            detail: 'size differs from its pack index',
          });
        }
      }
    }
    if (fresh !== null) {
      await this.readBack(entries, map, fresh, packs.size, checks, onProgress);
      return;
    }
    await this.verifyRecords(entries, checks, packs.size, onProgress);
  }

  /**
   * Reads `entries` (all, or in windows) through the pipeline, every chunk and record digest
   * checked and nothing kept, counting them into `checks` and reporting progress (`shards`: the
   * pack count shown as the total).
   */
  private async verifyRecords(
    entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
    checks: VerifyChecks,
    shards: number,
    onProgress?: (p: VerifyProgress) => void,
  ): Promise<void> {
    let bytesDone = 0;
    for await (const { entry } of streamRecords(await this.streamContext(), entries, false)) {
      checks.records++;
      checks.bytes += entry.size;
      bytesDone += entry.size;
      onProgress?.({ shardsDone: checks.shards, shards, bytesDone, bytes: this.doc.totals.bytes });
    }
  }

  /**
   * The writer's read-back: every new pack is read whole (digest against its pack index, tag) and
   * every chunk its pack index describes is checked against its keyed id, which is what makes the
   * bytes the signed ones; the whole-record SHA-384 (computed by the writer from the same bytes)
   * is left to full verifies. Pack by pack rather than record by record, into a fixed pool of
   * shared buffers opened in place, several ahead on the codec workers and one in (workers + 1)
   * on this thread, each checking the chunk ids of the packs it opens: no allocation per pack.
   */
  private async readBack(
    entries: readonly IndexEntry[],
    map: ChunkMap,
    fresh: ReadonlySet<string>,
    packCount: number,
    checks: VerifyChecks,
    onProgress?: (p: VerifyProgress) => void,
  ): Promise<void> {
    const { job } = this.doc;
    // New packs in order of first use; a record is done once the last new pack it uses is.
    const order: string[] = [];
    const position = new Map<string, number>();
    const doneAfter: number[] = [];
    let bytesDone = 0;
    for (const e of entries) {
      let last = -1;
      for (const r of e.chunks!) {
        const loc = map.chunks.get(r.id)!;
        if (!fresh.has(loc.pack)) continue;
        if (loc.length !== r.length) {
          throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
            object: layout.pack(job, this.keys.keyId, loc.pack),
            detail: `chunk ${r.id}: length differs`,
          });
        }
        let i = position.get(loc.pack);
        if (i === undefined) {
          i = order.length;
          position.set(loc.pack, i);
          order.push(loc.pack);
          doneAfter.push(0);
        }
        last = Math.max(last, i);
      }
      checks.records++;
      checks.bytes += e.size;
      if (last < 0) bytesDone += e.size;
      else doneAfter[last]! += e.size;
    }
    const report = () =>
      onProgress?.({ shardsDone: checks.shards, shards: packCount, bytesDone, bytes: this.doc.totals.bytes });
    if (order.length === 0) {
      report();
      return;
    }
    let size = 0;
    for (const pack of order) {
      const line = map.packs.get(pack)!;
      size = Math.max(size, line.size, line.plainSize);
    }
    // This thread has nothing else to do meanwhile (the writer waits for its read-back): it opens
    // every (workers + 1)-th pack itself, so the read-back uses the cores the run used. Measured
    // on 2 vCPUs (one codec worker), read-back of a 1 GiB first run: 2.8 s with this thread idle,
    // 2.2 s with it opening every other pack (the two share a physical core's units, hence not
    // half). Each pack it opens holds its event loop ~50 ms.
    const lanes = this.codec === inlineCodec ? 1 : this.codec.parallel + 1;
    // Shared whenever a worker opens the packs: a plain buffer would be copied there and back.
    const pool = new BufferPool({
      size,
      count: lanes + READ_BACK_AHEAD,
      shared: this.codec !== inlineCodec,
    });
    const opening: { pack: string; buf: Promise<Uint8Array>; plain: Promise<Uint8Array> }[] = [];
    let next = 0;
    const startOpen = () => {
      const codec = laneCodec(this.codec, lanes, next);
      const pack = order[next++]!;
      const line = map.packs.get(pack)!;
      const buf = pool.acquire();
      const plain = buf.then(
        // Every chunk its pack index describes is checked against its id by the thread that opens it.
        async (b) =>
          (
            await openPack(this.store, codec, job, this.keys, pack, line, line.size, b, {
              chunks: line.chunks,
              run: `${job}/${this.doc.runId}`,
            })
          ).plain,
      );
      plain.catch(() => undefined);
      opening.push({ pack, buf, plain });
    };
    try {
      while (next < order.length && opening.length < pool.count) startOpen();
      for (let i = 0; i < order.length; i++) {
        const { buf, plain: opened } = opening.shift()!;
        await opened;
        pool.release(await buf);
        checks.shards++;
        bytesDone += doneAfter[i]!;
        report();
        if (next < order.length) startOpen();
      }
    } finally {
      // Buffers still out belong to opens that failed or were abandoned: wait for them to settle.
      for (const o of opening) {
        await o.plain.catch(() => undefined);
        pool.release(await o.buf);
      }
      pool.dispose();
    }
  }
}
