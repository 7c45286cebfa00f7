/**
 * The chunked writer: format 0.2, incremental and deduplicated runs (docs/archive-format.md §12.8
 * is normative).
 *
 * Each record is cut into content-defined chunks (FastCDC, internal/chunker.ts); a chunk whose
 * keyed id the job already holds (in the base's chunk map, or earlier in this run) is referenced,
 * any other is appended to the open pack, and a full pack is sealed under its own key and stored
 * create-only while the next one fills. A record the source reports unchanged (same name, size and
 * change token as in the base run) is referenced without reading its body. Nothing is signed
 * until every pack the run references was listed back from the store with its recorded size and
 * the pack index describing the new packs is stored, so a committed run never references a chunk a
 * reader cannot find. Memory is bounded by the pack size times the packs in flight.
 */
import { createHash } from 'node:crypto';
import {
  canonicalJsonBytes,
  type Digest,
  fingerprint,
  formatDigest,
  randomBytes,
  toBase64Url,
} from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import type { ChunkedBase } from './chunked-base.ts';
import { ArchiveError } from './errors.ts';
import { putSpare } from './internal/buffer-pool.ts';
import {
  CHUNKED_CHECKPOINT_FORMAT,
  type ChunkedCheckpointState,
  sealCheckpoint,
} from './internal/checkpoint.ts';
import { type ChunkKeys, chunkId, chunkKeys, newObjectId, runIndexKey } from './internal/chunk-keys.ts';
import {
  type ChunkMap,
  chunkedEntryLine,
  chunkedHeaderLine,
  emptyChunkMap,
  type PackLine,
  packRefLine,
  sealPackIndex,
} from './internal/chunked-index.ts';
import { CHUNK_PARAMS, type ChunkParams, ContentChunker } from './internal/chunker.ts';
import { type FrameCodec, frameCodec, inlineCodec } from './internal/codec-pool.ts';
import { IndexSealer } from './internal/index-sealer.ts';
import { chunkKeyAad } from './internal/manifest.ts';
import { commitManifest } from './internal/manifest-commit.ts';
import { storePack, tableBytes, writeTable } from './internal/pack-codec.ts';
import {
  BEGIN,
  END,
  type HashDigest,
  OFFLOAD_MIN,
  type RecordHasher,
  recordHasher,
} from './internal/record-hash.ts';
import { runBinding, runTag, sessionSalt } from './internal/run-binding.ts';
import { assertRuntime } from './internal/runtime.ts';
import type { SealedIndex } from './internal/sealed-lines.ts';
import { headObject, listObjects, putObject } from './internal/store.ts';
import {
  bodyChunks,
  checkBody,
  checkMetadata,
  checkName,
  checkSource,
  invalid,
  signerKeys,
  wrapForRecipients,
} from './internal/writer-input.ts';
import { assertId, layout } from './layout.ts';
import {
  type ArchiveRecipients,
  type ArchiveSource,
  CHUNKED_FORMAT_VERSION,
  type ChunkedManifestDocument,
  type ChunkRef,
  FORMAT_NAME,
  type IndexEntry,
  type ManifestRecipient,
  type RecordInput,
  type RecordMetadata,
  type RecordResult,
  type RunSummary,
} from './types.ts';

const MIB = 1024 * 1024;
/** Default plaintext bytes per pack, and the accepted range (as for 0.1 shards). */
const DEFAULT_PACK_SIZE = 8 * MIB;
const MIN_PACK_SIZE = 64 * 1024;
/** A sealed frame's header before its payload, and header plus tag. */
const FRAME_HEADER = 32;
const FRAME_OVERHEAD = 48;
/** A base record's fields other than its content equal these (metadata is flat: scalars only). */
/** A record's name, metadata and source fields, checked (`checkInput`). */
interface CheckedInput {
  name: string;
  metadata: RecordMetadata;
  sourceType: string;
  binding: string;
  namespace: string;
}

function sameFields(
  e: IndexEntry,
  sourceType: string,
  binding: string,
  namespace: string,
  metadata: RecordMetadata,
): boolean {
  if (e.sourceType !== sourceType || e.binding !== binding || e.namespace !== namespace) return false;
  let n = 0;
  for (const k in metadata) {
    if (!Object.hasOwn(e.metadata, k) || e.metadata[k] !== metadata[k]) return false;
    n++;
  }
  for (const _ in e.metadata) n--;
  return n === 0;
}

/**
 * A pack buffer in shared memory: the codec workers read it in place (a plain buffer would be
 * copied into every seal request), and it is reused for the next pack once its pack is stored.
 * The returned view starts FRAME_HEADER bytes into the buffer and leaves room for the tag after
 * `size`, so the pack is sealed in place (`sealOut`): no frame buffer per pack (a fresh 8 MiB
 * buffer per pack was ~1 GiB of short-lived external memory per GiB stored, and the collector's
 * most expensive work in a first run).
 */
function packBuffer(size: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(size + FRAME_OVERHEAD), FRAME_HEADER, size);
}

/** The open pack of a writer that stores no more packs. */
const NO_PACK = Buffer.alloc(0);

/** The whole frame-sized buffer around `plain`, a view of a pack buffer from its start. */
function sealOut(plain: Uint8Array): Uint8Array {
  return new Uint8Array(plain.buffer, plain.byteOffset - FRAME_HEADER, plain.length + FRAME_OVERHEAD);
}

/** Room after a pack's chunks for its table without a copy (1,820 chunks; more: one copy). */
const TABLE_ROOM = 64 * 1024;
const MAX_PACK_SIZE = 64 * MIB;
/** Pack buffers beyond the codec's parallelism (filling, waiting for a worker, being written). */
const BUFFERS_AHEAD = 2;
/** Packs whose store has not settled beyond the codec's parallelism (as the 0.1 writer). */
const STORE_AHEAD = 5;
/** Answers of `wouldReuse` kept until their records are added (far more than a read-ahead asks). */
const REUSE_MEMO_MAX = 1024;

/** After each pack is stored. */
export interface PackEvent {
  pack: string;
  /** Stored object size. */
  size: number;
  plainSize: number;
  compression: 'none' | 'zstd';
  chunks: number;
  /** Records completed so far. */
  recordsDone: number;
}

export interface ChunkedWriterOptions {
  store: ObjectStore;
  job: string;
  runId: string;
  prevRunId: string | null;
  signerSecretKey: Uint8Array;
  recipients: ArchiveRecipients;
  source: ArchiveSource;
  /** From `loadChunkedBase`; null or absent: a fresh chunk key, every chunk stored. */
  base?: ChunkedBase | null;
  /** Plaintext bytes per pack; default 8 MiB, clamped to [64 KiB, 64 MiB]. */
  packSize?: number;
  /** Chunker parameters (default 512 KiB / 1 MiB / 8 MiB); smaller ones for tests and fixtures. */
  chunking?: Partial<ChunkParams>;
  /** Compress packs with zstd when it pays (default true). */
  compress?: boolean;
  onPack?: (event: PackEvent) => void | Promise<void>;
  /** As for the 0.1 writer: runs before the commit touches the destination and again before the manifest. */
  beforeCommit?: () => void | Promise<void>;
  writeRecovery?: boolean;
  now?: () => Date;
  workers?: number;
}

/** What `finish()` returns: the 0.1 summary plus what deduplication saved. */
export interface ChunkedRunSummary extends RunSummary {
  /** Chunk references over all records. */
  chunks: number;
  /** Chunks (and their plaintext bytes) this run stored; the rest were already in the job's packs. */
  newChunks: number;
  newBytes: number;
  /** Packs this run stored. */
  newPacks: number;
  /** Records taken from the base run without reading them (same change token). */
  unchangedRecords: number;
  /** Ids of the packs this run stored (its read-back reads these in full: `verifyRun` `newPacks`). */
  packIds: string[];
}

export interface ChunkedWriter {
  readonly job: string;
  readonly runId: string;
  /**
   * True when `addRecord` would take this record from the base run without reading its body
   * (same name, size and change token, every chunk still held): a caller can then skip opening it.
   */
  wouldReuse(record: { name: string; size?: number; change?: string }): boolean;
  /** As ArchiveWriter.addRecord; a record with an unchanged `change` token is not read. */
  addRecord(record: RecordInput): Promise<RecordResult>;
  /**
   * Takes a record from the base run without a body, at once (no promise): what `addRecord` does
   * for a record `wouldReuse` answers yes for. Null, with nothing added, when the record cannot be
   * taken unread (then read it and call `addRecord`). Throws as `addRecord` does for bad input or
   * a writer that is not open.
   */
  addUnchanged(record: Omit<RecordInput, 'body'>): RecordResult | null;
  finish(): Promise<ChunkedRunSummary>;
  /**
   * Describes the packs stored so far in a pack index (so a new attempt deduplicates against
   * them) and returns a checkpoint: the chunk key, the base run and the run's identity, sealed to
   * the operational key and signed. `resumeChunkedWriter` continues from it; records are fed again
   * from the first (those already stored cost a read, never a second upload).
   */
  exportCheckpoint(): Promise<Uint8Array>;
  /** Stops the writer; packs already stored stay (a later prune removes them if no run uses them). */
  abort(): Promise<void>;
}

/**
 * Starts a 0.2 run. Throws ERR_ARCHIVE_INVALID_ARGUMENT for bad ids, keys or options (or when the
 * run is already sealed), ERR_ARCHIVE_DESTINATION when the store cannot be read.
 */
export async function createChunkedWriter(options: ChunkedWriterOptions): Promise<ChunkedWriter> {
  assertRuntime();
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const { store, job, runId, prevRunId } = options;
  assertId('job', job);
  assertId('runId', runId);
  if (prevRunId !== null) assertId('prevRunId', prevRunId);
  const source = checkSource(options.source);
  const signer = signerKeys(options.signerSecretKey);
  let packSize = DEFAULT_PACK_SIZE;
  if (options.packSize !== undefined) {
    if (!Number.isSafeInteger(options.packSize) || options.packSize <= 0)
      throw invalid('packSize must be a positive integer');
    packSize = Math.min(MAX_PACK_SIZE, Math.max(MIN_PACK_SIZE, options.packSize));
  }
  const chunker = new ContentChunker(options.chunking ?? CHUNK_PARAMS);
  const base = options.base ?? null;
  if (base !== null && base.map === undefined)
    throw invalid('base must come from loadChunkedBase or verifyRun with keepBase');
  if (base !== null && base.job !== job) throw invalid(`base belongs to job ${base.job}, not ${job}`);
  if ((await headObject(store, layout.manifest(job, runId))) !== null) {
    throw invalid(`run ${job}/${runId} is already sealed in this destination`);
  }
  const keys = base?.keys ?? chunkKeys(randomBytes(32));
  const recipients = await wrapForRecipients(options.recipients, keys.chunkKey, chunkKeyAad(job, keys.keyId));
  const now = options.now ?? (() => new Date());
  return new ChunkedRunWriter({
    store,
    job,
    runId,
    prevRunId,
    source,
    startedAt: now().toISOString(),
    now,
    keys,
    map: base?.map ?? emptyChunkMap(keys.keyId),
    baseRecords: base?.records ?? new Map(),
    baseLines: base?.lines ?? new Map(),
    baseRunId: base?.runId ?? null,
    recipients,
    operationalPublicKey: options.recipients.operational,
    signerSecretKey: signer.secret,
    signerPublicKey: signer.public,
    packSize,
    chunker,
    compress: options.compress ?? true,
    codec: frameCodec(options.workers),
    onPack: options.onPack,
    beforeCommit: options.beforeCommit,
    writeRecovery: options.writeRecovery ?? true,
  });
}

/** @internal What a writer is built from (createChunkedWriter, or chunked-resume.ts from a checkpoint). */
export interface Config {
  store: ObjectStore;
  job: string;
  runId: string;
  prevRunId: string | null;
  source: ArchiveSource;
  startedAt: string;
  now: () => Date;
  keys: ChunkKeys;
  map: ChunkMap;
  baseRecords: ReadonlyMap<string, IndexEntry>;
  /** The base run's signed line of each record (ChunkedBase.lines). */
  baseLines: ReadonlyMap<string, string>;
  baseRunId: string | null;
  operationalPublicKey: Uint8Array;
  recipients: ManifestRecipient[];
  signerSecretKey: Uint8Array;
  signerPublicKey: Uint8Array;
  packSize: number;
  chunker: ContentChunker;
  compress: boolean;
  codec: FrameCodec;
  onPack: ChunkedWriterOptions['onPack'];
  beforeCommit: ChunkedWriterOptions['beforeCommit'];
  writeRecovery: boolean;
}

type State = 'open' | 'busy' | 'finished' | 'failed';

/** A record hashed on the record-hash thread: its running hash's key, and whether it has begun. */
interface Offloaded {
  key: number;
  begun: boolean;
}

/** @internal */
export class ChunkedRunWriter implements ChunkedWriter {
  readonly job: string;
  readonly runId: string;
  private readonly c: Config;
  private state: State = 'open';
  private readonly salt = sessionSalt();
  /** The run index, its full frames sealed while later records are added. */
  private readonly index: IndexSealer;
  /** Chunks this run stored, by id: pack id. */
  private readonly fresh = new Map<string, string>();
  /** Packs the run's records reference. */
  private readonly referenced = new Set<string>();
  private readonly newPacks: PackLine[] = [];
  /** newPacks[0..flushed) are described by a pack index already stored. */
  private flushed = 0;
  private readonly inFlight: Promise<void>[] = [];
  private lastFlight: Promise<void> = Promise.resolve();
  /** Pack buffers whose pack's bytes the store has, ready for reuse; and callers waiting for one. */
  private readonly spare: Buffer[] = [];
  private readonly waiting: ((b: Buffer) => void)[] = [];
  private buffers = 1;
  private flightError: unknown = null;
  // The open pack: committed chunks in [0, packLen), the chunk being cut in [packLen, packLen + openLen).
  private pack: Buffer;
  private packId = newObjectId();
  private packLen = 0;
  private openLen = 0;
  private packChunks: PackLine['chunks'] = [];
  private bytes = 0;
  private chunkRefs = 0;
  private newBytes = 0;
  private unchanged = 0;
  /**
   * Records `wouldReuse` answered yes for and not yet added, by name, with their base record. A
   * caller asks ahead of adding (the engine's read-ahead asks up to its concurrency, 8, records
   * before it adds the first), so the last answer alone was never the record added next and every
   * unchanged record was looked up twice. Bounded: past REUSE_MEMO_MAX the oldest answer is
   * dropped (and looked up again if its record is added).
   */
  private readonly reusable = new Map<
    string,
    { change: string; size: number | undefined; prev: IndexEntry }
  >();

  /** Large records' SHA-384 runs on the record-hash thread, reading their chunks in the pack buffer. */
  private readonly hasher: RecordHasher;
  /**
   * Hash ranges of the open pack buffer not yet sent (one message per pack, per duplicate chunk
   * and per record end rather than per chunk), and the last request sent: the pack buffer is
   * sealed in place, and a duplicate's bytes overwritten, only once the hash thread read them.
   */
  private hashOps: number[] = [];
  /** The codec workers were asked to start (at the first record read). */
  private warmed = false;
  private lastHash: Promise<HashDigest[]> = Promise.resolve([]);

  constructor(c: Config) {
    this.c = c;
    this.job = c.job;
    this.runId = c.runId;
    this.pack = packBuffer(c.packSize + c.chunker.params.maxSize + TABLE_ROOM);
    this.hasher = recordHasher(c.codec !== inlineCodec);
    this.index = new IndexSealer({
      key: runIndexKey(c.keys, c.runId),
      binding: runBinding(c.job, c.runId),
      tag: runTag(c.job, c.runId),
      salt: this.salt,
      compress: c.compress,
    });
  }

  async addRecord(record: RecordInput): Promise<RecordResult> {
    const input = this.checkInput(record);
    checkBody(record.body);
    this.state = 'busy';
    try {
      const same = this.unchangedFrom(input.name, record);
      if (same !== null) return this.takeUnchanged(input, record, same);
      const { size, digest, refs } = await this.readBody(record.body, record.size);
      return this.push(input, record, size, digest, refs, false);
    } catch (e) {
      this.state = 'failed';
      throw e;
    }
  }

  addUnchanged(record: Omit<RecordInput, 'body'>): RecordResult | null {
    const input = this.checkInput(record);
    const same = this.unchangedFrom(input.name, record);
    if (same === null) return null;
    try {
      return this.takeUnchanged(input, record, same);
    } catch (e) {
      this.state = 'failed';
      throw e;
    }
  }

  /** The checks every record passes before anything is added; throws for a writer not open. */
  private checkInput(record: Omit<RecordInput, 'body'>): CheckedInput {
    if (this.state !== 'open') {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_STATE', {
        detail: this.state === 'busy' ? 'addRecord calls must not overlap' : `writer is ${this.state}`,
      });
    }
    if (typeof record !== 'object' || record === null) throw invalid('record must be an object');
    const name = checkName(record.name);
    const metadata = checkMetadata(record.metadata ?? {});
    if (record.change !== undefined && typeof record.change !== 'string')
      throw invalid('change must be a string');
    return {
      name,
      metadata,
      sourceType: record.sourceType ?? this.c.source.type,
      binding: record.binding ?? this.c.source.binding ?? '',
      namespace: record.namespace ?? this.c.source.namespace ?? '',
    };
  }

  /** Adds a record taken unread from the base run: its chunks are referenced where they are. */
  private takeUnchanged(input: CheckedInput, record: { change?: string }, same: IndexEntry): RecordResult {
    const refs = same.chunks!;
    for (const r of refs) this.reference(r.id);
    this.unchanged++;
    return this.push(input, record, same.size, same.sha384, refs, true);
  }

  /** Appends the record's index line (and leaves the writer open for the next record). */
  private push(
    input: CheckedInput,
    record: { size?: number; change?: string },
    size: number,
    digest: Digest,
    refs: ChunkRef[],
    unchanged: boolean,
  ): RecordResult {
    const { name, metadata, sourceType, binding, namespace } = input;
    const seq = this.index.records;
    this.chunkRefs += refs.length;
    this.bytes += size;
    // An unchanged record with the same fields has the same line as in the base run (lines are
    // canonical JSON, §5, and the base verified): reuse it rather than build it again.
    const base = unchanged ? this.c.baseRecords.get(name)! : null;
    const reused = base !== null && sameFields(base, sourceType, binding, namespace, metadata);
    this.index.add(
      reused
        ? this.c.baseLines.get(name)!
        : chunkedEntryLine({
            name,
            size,
            sha384: digest,
            sourceType,
            binding,
            namespace,
            metadata,
            chunks: refs,
            ...(record.change === undefined ? {} : { change: record.change }),
          }),
    );
    this.state = 'open';
    return {
      seq,
      name,
      size,
      sha384: digest,
      sizeChanged: record.size !== undefined && record.size !== size,
    };
  }

  wouldReuse(record: { name: string; size?: number; change?: string }): boolean {
    const prev = this.baseRecordFor(record.name, record);
    if (prev === null) return false;
    const memo = this.reusable;
    memo.delete(record.name);
    memo.set(record.name, { change: record.change!, size: record.size, prev });
    if (memo.size > REUSE_MEMO_MAX) memo.delete(memo.keys().next().value!);
    return true;
  }

  /**
   * The base record this one may reuse unread (same name, size and change token, every chunk
   * held), as `wouldReuse` answered it when it was asked: a yes stays a yes within a run (the
   * chunks held only grow), so it is not looked up again (a name lookup and two chunk lookups per
   * chunk; profiled: 40-45 ms of a 20,000-file run with nothing changed).
   */
  private unchangedFrom(name: string, record: { size?: number; change?: string }): IndexEntry | null {
    const r = this.reusable.get(name);
    if (r !== undefined) {
      this.reusable.delete(name);
      if (r.change === record.change && r.size === record.size) return r.prev;
    }
    return this.baseRecordFor(name, record);
  }

  /** The base record this one may reuse unread, looked up. */
  private baseRecordFor(name: string, record: { size?: number; change?: string }): IndexEntry | null {
    if (record.change === undefined) return null;
    const prev = this.c.baseRecords.get(name);
    if (prev === undefined || prev.change !== record.change || prev.chunks === undefined) return null;
    if (record.size !== undefined && record.size !== prev.size) return null;
    for (const r of prev.chunks) if (!this.c.map.chunks.has(r.id) && !this.fresh.has(r.id)) return null;
    return prev;
  }

  private reference(id: string): void {
    const pack = this.fresh.get(id) ?? this.c.map.chunks.get(id)?.pack;
    if (pack === undefined)
      throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'chunk referenced before it was stored' });
    this.referenced.add(pack);
  }

  private async readBody(
    body: RecordInput['body'],
    declared: number | undefined,
  ): Promise<{ size: number; digest: Digest; refs: ChunkRef[] }> {
    if (!this.warmed) {
      // The first record read: its packs will be sealed on a codec worker, which an idle engine
      // stopped; it boots (~30 ms) while this thread reads.
      this.warmed = true;
      this.c.codec.warm();
    }
    if (body instanceof Uint8Array) declared = body.length;
    // A large record is hashed on the record-hash thread chunk by chunk, from the pack buffer the
    // chunk was cut in (this thread meanwhile computes the chunk's id and reads on). The thread is
    // started by the first such record (a run whose changes are all small never starts it).
    let offload = this.hasher.offThread && declared !== undefined && declared >= OFFLOAD_MIN;
    if (offload && !this.hasher.ready) {
      // The thread is not up (an idle engine stopped it): hashed here while it boots for the next
      // large record. Offloaded, this record's duplicate chunks could not be overwritten in the
      // pack buffer until the booting thread read them: a run whose one changed large file came
      // first in the listing spent 100-130 ms of its 1.5 s waiting.
      this.hasher.warm();
      offload = false;
    }
    const hash = offload ? null : createHash('sha384');
    const rec: Offloaded | null = offload ? { key: this.hasher.newKey(), begun: false } : null;
    const chunker = this.c.chunker;
    chunker.reset();
    this.openLen = 0;
    const refs: ChunkRef[] = [];
    let size = 0;
    try {
      const it = bodyChunks(body)[Symbol.asyncIterator]();
      for (;;) {
        let step: IteratorResult<Uint8Array>;
        try {
          step = await it.next();
        } catch (e) {
          throw new ArchiveError('ERR_ARCHIVE_SOURCE_READ', { cause: e });
        }
        if (step.done) break;
        const piece = step.value;
        if (!(piece instanceof Uint8Array)) throw invalid('record body yielded a non-Uint8Array piece');
        hash?.update(piece);
        size += piece.length;
        let from = 0;
        while (from < piece.length) {
          const cut = chunker.next(piece, from);
          const end = cut < 0 ? piece.length : cut;
          this.pack.set(piece.subarray(from, end), this.packLen + this.openLen);
          this.openLen += end - from;
          from = end;
          if (cut >= 0) await this.closeChunk(refs, rec);
        }
      }
      if (this.openLen > 0) await this.closeChunk(refs, rec);
      if (hash !== null) return { size, digest: formatDigest(hash.digest()), refs };
      this.hashOps.push(rec!.key, 0, 0, (rec!.begun ? 0 : BEGIN) | END);
      const replies = await this.sendHashes();
      return { size, digest: formatDigest(replies.find((r) => r.key === rec!.key)!.digest), refs };
    } catch (e) {
      if (rec !== null) {
        this.hashOps = [];
        this.hasher.forget([rec.key]);
      }
      throw e;
    }
  }

  private async closeChunk(refs: ChunkRef[], rec: Offloaded | null): Promise<void> {
    const length = this.openLen;
    const bytes = this.pack.subarray(this.packLen, this.packLen + length);
    if (rec !== null) {
      this.hashOps.push(rec.key, this.packLen, this.packLen + length, rec.begun ? 0 : BEGIN);
      rec.begun = true;
    }
    const id = chunkId(this.c.keys, bytes);
    this.openLen = 0;
    refs.push({ id, length });
    if (this.fresh.has(id) || this.c.map.chunks.has(id)) {
      // The next chunk is cut where this one lies: the hash thread must have read it first.
      if (rec !== null) await this.sendHashes();
      this.reference(id);
      return;
    }
    this.packChunks.push({ id, offset: this.packLen, length });
    this.packLen += length;
    this.fresh.set(id, this.packId);
    this.referenced.add(this.packId);
    this.newBytes += length;
    if (this.packLen >= this.c.packSize) await this.sealPack();
  }

  /** Seals the open pack and stores it while the next one fills (a bounded number in flight). */
  private async sealPack(): Promise<void> {
    if (this.packLen === 0) return;
    if (this.flightError !== null) throw this.flightError;
    const packId = this.packId;
    const chunks = this.packChunks;
    // The pack's own chunk table follows its chunks (§12.4): in place when the buffer has room.
    const table = tableBytes(chunks.length);
    let plain: Uint8Array;
    let out: Uint8Array | null = null;
    if (this.packLen + table <= this.pack.length) {
      writeTable(this.pack, this.packLen, chunks);
      plain = this.pack.subarray(0, this.packLen + table);
      out = sealOut(plain);
    } else {
      const whole = Buffer.allocUnsafe(this.packLen + table);
      whole.set(this.pack.subarray(0, this.packLen));
      writeTable(whole, this.packLen, chunks);
      plain = whole;
    }
    const recordsDone = this.index.records;
    const { c } = this;
    const before = this.lastFlight;
    const buffer = this.pack;
    // The store has the bytes (the fs store: written, before its fsync, which on a busy disk takes
    // longer than writing): the buffer takes the next pack (fresh 16 MiB buffers cost a page fault
    // per 4 KiB and leave the collector gigabytes to sweep over a run).
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      const waiter = this.waiting.shift();
      if (waiter !== undefined) waiter(buffer);
      else this.spare.push(buffer);
    };
    // The pack is sealed in place: the hash thread must have read its chunks first.
    const hashed = this.hashOps.length > 0 ? this.sendHashes() : this.lastHash;
    hashed.catch(() => undefined);
    const flight = (async () => {
      let line: PackLine;
      try {
        await hashed;
        line = await storePack(c.store, c.codec, c.job, c.keys, packId, plain, chunks, {
          compress: c.compress,
          salt: this.salt,
          out,
          onBodyWritten: release,
        });
      } finally {
        release();
      }
      // Packs are sealed concurrently but reported (and described) in the order they were cut.
      await before.catch(() => undefined);
      this.newPacks.push(line);
      await c.onPack?.({
        pack: packId,
        size: line.size,
        plainSize: line.plainSize,
        compression: line.compression,
        chunks: chunks.length,
        recordsDone,
      });
    })();
    flight.catch((e: unknown) => {
      if (this.flightError === null) this.flightError = e;
    });
    this.inFlight.push(flight);
    this.lastFlight = flight;
    this.packId = newObjectId();
    this.packLen = 0;
    this.packChunks = [];
    // Bounded memory: at most `parallel + BUFFERS_AHEAD` pack buffers; packs whose buffer is free
    // but whose store has not settled (an fsync, an upload's last round trip) are bounded apart.
    this.pack = await this.nextBuffer();
    while (this.inFlight.length > c.codec.parallel + STORE_AHEAD) await this.inFlight.shift();
  }

  /** Sends the pending hash ranges of the open pack buffer (FIFO after every earlier request). */
  private sendHashes(): Promise<HashDigest[]> {
    const ops = this.hashOps;
    this.hashOps = [];
    const sent = this.hasher.run(this.pack, ops).catch((e: unknown) => {
      throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'record hash failed', cause: e });
    });
    this.lastHash = sent;
    return sent;
  }

  /** A free pack buffer: a spare one, a new one while fewer exist than the bound, else the next released. */
  private nextBuffer(): Promise<Buffer> {
    const b = this.spare.pop();
    if (b !== undefined) return Promise.resolve(b);
    const { c } = this;
    if (this.buffers < c.codec.parallel + BUFFERS_AHEAD) {
      this.buffers++;
      return Promise.resolve(packBuffer(c.packSize + c.chunker.params.maxSize + TABLE_ROOM));
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /**
   * Every pack is stored: the pack buffers go to the process-wide cache of shared buffers, where
   * the read-back that follows takes them to open the new packs in (a pack is never larger than
   * the buffer it was sealed in). Measured on the 1 GiB bench set: the read-back, the run's peak,
   * held about 25 MiB less (peak 364-368 MiB before, 334-347 after).
   */
  private givePackBuffers(): void {
    for (const b of [this.pack, ...this.spare.splice(0)]) putSpare(b);
    this.pack = NO_PACK;
  }

  /** Stores a pack index describing the packs stored since the last one (none: nothing). */
  private async flushIndex(): Promise<void> {
    const packs = this.newPacks.slice(this.flushed);
    if (packs.length === 0) return;
    const { c } = this;
    this.flushed += packs.length;
    const ix = sealPackIndex(c.job, c.keys, newObjectId(), packs, this.salt);
    try {
      await putObject(c.store, ix.key, ix.bytes, {
        contentLength: ix.bytes.length,
        contentType: 'application/octet-stream',
        ifNoneMatch: '*',
      });
    } catch (e) {
      this.flushed -= packs.length;
      throw e;
    }
  }

  async exportCheckpoint(): Promise<Uint8Array> {
    if (this.state === 'failed' || this.state === 'finished') {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_STATE', { detail: `writer is ${this.state}` });
    }
    // Best effort: the key and base in the checkpoint matter most (a new attempt keeps the job's
    // chunk key); packs left undescribed by a failed flush are stored again and pruned later.
    await this.flushIndex().catch(() => undefined);
    const { c } = this;
    const state: ChunkedCheckpointState = {
      format: CHUNKED_CHECKPOINT_FORMAT,
      formatVersion: CHUNKED_FORMAT_VERSION,
      job: c.job,
      runId: c.runId,
      prevRunId: c.prevRunId,
      source: c.source,
      startedAt: c.startedAt,
      chunkKey: toBase64Url(c.keys.chunkKey),
      baseRunId: c.baseRunId,
      recipients: c.recipients,
      packSize: c.packSize,
      chunking: {
        minSize: c.chunker.params.minSize,
        avgSize: c.chunker.params.avgSize,
        maxSize: c.chunker.params.maxSize,
      },
      compress: c.compress,
    };
    return sealCheckpoint(state, c.operationalPublicKey, c.signerSecretKey);
  }

  async finish(): Promise<ChunkedRunSummary> {
    if (this.state !== 'open')
      throw new ArchiveError('ERR_ARCHIVE_INVALID_STATE', { detail: `writer is ${this.state}` });
    this.state = 'busy';
    try {
      const summary = await this.commit();
      this.state = 'finished';
      return summary;
    } catch (e) {
      this.state = 'failed';
      throw e;
    }
  }

  private async commit(): Promise<ChunkedRunSummary> {
    const { c } = this;
    const { store, job, runId } = c;
    await this.sealPack();
    await Promise.all(this.inFlight.splice(0));
    if (this.flightError !== null) throw this.flightError;
    this.givePackBuffers();
    const { refs, described } = await this.checkReferencedPacks();
    await c.beforeCommit?.();

    // The pack index of the new packs goes first: a committed run never references an undescribed chunk.
    await this.flushIndex();

    const index = this.sealRunIndex(refs, described);
    const sealedAt = c.now().toISOString();
    const signer = fingerprint(c.signerPublicKey);
    const newChunks = this.newPacks.reduce((n, p) => n + p.chunks.length, 0);
    const doc = this.manifestDocument({ index, packs: refs.length, sealedAt, signer, newChunks });
    const manifestBytes = canonicalJsonBytes(doc);
    const { manifestKey, manifestDigest, sigBytes } = await commitManifest({
      store,
      job,
      runId,
      formatVersion: CHUNKED_FORMAT_VERSION,
      index,
      manifestBytes,
      signer,
      signerSecretKey: c.signerSecretKey,
      signerPublicKey: c.signerPublicKey,
      beforeCommit: c.beforeCommit,
      writeRecovery: c.writeRecovery,
    });

    let storedBytes = index.size + manifestBytes.length + sigBytes.length;
    for (const p of this.newPacks) storedBytes += p.size;
    return {
      formatVersion: CHUNKED_FORMAT_VERSION,
      job,
      runId,
      prevRunId: c.prevRunId,
      manifestKey,
      manifestDigest,
      signer,
      records: this.index.records,
      bytes: this.bytes,
      shards: this.newPacks.length,
      storedBytes,
      startedAt: c.startedAt,
      sealedAt,
      chunks: this.chunkRefs,
      newChunks,
      newBytes: this.newBytes,
      newPacks: this.newPacks.length,
      unchangedRecords: this.unchanged,
      packIds: this.newPacks.map((p) => p.pack),
    };
  }

  /**
   * Every pack the run references must be in the store with the size its description gives: the
   * new ones just stored, and the older ones (a prune may have removed one since the base was
   * read). One listing. Returns the referenced packs in order and every pack's description.
   */
  private async checkReferencedPacks(): Promise<{ refs: string[]; described: Map<string, PackLine> }> {
    const { store, job, keys, map } = this.c;
    const described = new Map<string, PackLine>(map.packs);
    for (const p of this.newPacks) described.set(p.pack, p);
    const listed = new Map<string, number>();
    for (const o of await listObjects(store, layout.packDataPrefix(job, keys.keyId)))
      listed.set(o.key, o.size);
    const refs = [...this.referenced].sort();
    for (const pack of refs) {
      const key = layout.pack(job, keys.keyId, pack);
      const line = described.get(pack);
      const size = listed.get(key);
      if (line === undefined || size !== line.size) {
        throw new ArchiveError('ERR_ARCHIVE_TRUNCATED', {
          object: key,
          detail:
            size === undefined ? 'pack not found in the destination' : 'pack size differs in the destination',
        });
      }
    }
    return { refs, described };
  }

  /** The run index (§12.6): header, one line per record, one per referenced pack; sealed. */
  private sealRunIndex(refs: readonly string[], described: ReadonlyMap<string, PackLine>): SealedIndex {
    const { c } = this;
    return this.index.finish(
      chunkedHeaderLine(c.job, c.runId, this.index.records, refs.length),
      refs.map((pack) => {
        const line = described.get(pack)!;
        return packRefLine({ pack, sha256: line.sha256, size: line.size });
      }),
    );
  }

  /** The signed root manifest of the run (§12.8). */
  private manifestDocument(o: {
    index: SealedIndex;
    packs: number;
    sealedAt: string;
    signer: Digest;
    newChunks: number;
  }): ChunkedManifestDocument {
    const { c } = this;
    return {
      format: FORMAT_NAME,
      formatVersion: CHUNKED_FORMAT_VERSION,
      job: c.job,
      runId: c.runId,
      prevRunId: c.prevRunId,
      startedAt: c.startedAt,
      sealedAt: o.sealedAt,
      source: c.source,
      signer: { fingerprint: o.signer, publicKey: toBase64Url(c.signerPublicKey) },
      recipients: c.recipients,
      chunkKey: c.keys.keyId,
      chunking: {
        minSize: c.chunker.params.minSize,
        avgSize: c.chunker.params.avgSize,
        maxSize: c.chunker.params.maxSize,
        packSize: c.packSize,
      },
      index: { size: o.index.size, sha384: o.index.digest, chunks: o.index.chunks },
      totals: {
        records: this.index.records,
        bytes: this.bytes,
        chunks: this.chunkRefs,
        newChunks: o.newChunks,
        newBytes: this.newBytes,
        packs: o.packs,
      },
    };
  }

  async abort(): Promise<void> {
    if (this.state === 'finished') return;
    this.state = 'failed';
    await Promise.allSettled(this.inFlight.splice(0));
  }
}
