/**
 * Archive writer (format 0.1; docs/archive-format.md "Write algorithm" is normative).
 *
 * Security-relevant behaviour: a fresh random 32-byte data key per run; every shard and index
 * chunk is an AEAD frame bound to job, run, position and final flag; the data key leaves the
 * writer only wrapped for the two recipients (manifest) or sealed to the operational key and
 * signed (checkpoint); the manifest is signed only after every shard was listed back from the
 * store with its exact size (ERR_ARCHIVE_TRUNCATED otherwise) and the shard list is contiguous and
 * in order (ERR_ARCHIVE_SHARD_ID_OVERFLOW otherwise). Memory is bounded by the shard size times the
 * number of frames in flight, whatever the record or run size (the index lines, about 200 bytes per
 * record, are the only state that grows with the run).
 */
import { createHash, type Hash, hash as hashOnce } from 'node:crypto';
import {
  canonicalJsonBytes,
  type Digest,
  fingerprint,
  formatDigest,
  fromBase64Url,
  randomBytes,
  sha384,
  sign,
  signerPublicKeyFromSecret,
  toBase64Url,
  toHex,
  wrapKey,
} from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import { BufferPool } from './internal/buffer-pool.ts';
import {
  type CheckpointPartial,
  type CheckpointState,
  openCheckpoint,
  sealCheckpoint,
} from './internal/checkpoint.ts';
import { type FrameCodec, frameCodec, inlineCodec } from './internal/codec-pool.ts';
import { entryLine, headerLine, indexChunks } from './internal/index-codec.ts';
import {
  dataKeyAad,
  isSupportedVersion,
  MANIFEST_SIGNATURE_CONTEXT,
  SIGNATURE_FORMAT,
  type SignatureDocument,
} from './internal/manifest.ts';
import { BEGIN, END, PREFIX, type RecordHasher, recordHasher } from './internal/record-hash.ts';
import { runBinding, runTag } from './internal/run-binding.ts';
import { assertRuntime } from './internal/runtime.ts';
import { deleteObject, headObject, listObjects, putObject } from './internal/store.ts';
import { assertId, layout } from './layout.ts';
import { writeRecoveryFiles } from './recovery.ts';
import {
  type ArchiveSource,
  type ArchiveWriter,
  type ArchiveWriterOptions,
  FORMAT_NAME,
  FORMAT_VERSION,
  type ManifestDocument,
  type ManifestRecipient,
  type ManifestShard,
  type RecordInput,
  type RecordMetadata,
  type RecordResult,
  type ResumeArchiveWriterOptions,
  type ResumePoint,
  type RunSummary,
  type ShardEvent,
} from './types.ts';

export const DEFAULT_SHARD_SIZE = 8 * 1024 * 1024;
const MIN_SHARD_SIZE = 64 * 1024;
/** Frame header (32) and tag (16) around the payload. */
const FRAME_OVERHEAD = 48;
/**
 * Shards being stored while the codec workers seal the next ones: storing (a write and an fsync
 * on the fs store, a PUT on S3) takes longer than sealing, so without this the pipeline waits on
 * the store.
 */
const STORE_AHEAD = 2;
const MAX_SHARD_SIZE = 64 * 1024 * 1024;
/** The header's shard number is a u32. */
const MAX_SHARDS = 0xffffffff;
const MAX_NAME_BYTES = 4096;
const MAX_METADATA_BYTES = 64 * 1024;
const LONE_SURROGATE = /\p{Cs}/u;
/** Records at least this large are hashed on the record-hash thread (smaller ones inline: cheaper than a message). */
const OFFLOAD_MIN = 512 * 1024;

interface Snapshot {
  shardsDone: number;
  recordsDone: number;
  partial: CheckpointPartial | null;
}

interface CurrentRecord {
  seq: number;
  name: string;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: RecordMetadata;
  shard: number;
  offset: number;
  bytes: number;
  /** Inline hash, or null when the record is hashed on the record-hash thread. */
  hash: Hash | null;
  /** Record-hash key (offloaded records only). */
  key: number;
  /** Start in the current shard buffer of this record's bytes not yet sent to the hash thread. */
  hashFrom: number;
  /** Whether the hash thread has seen this record yet. */
  begun: boolean;
}

interface WriterConfig {
  store: ObjectStore;
  job: string;
  runId: string;
  prevRunId: string | null;
  source: ArchiveSource;
  startedAt: string;
  shardSize: number;
  compress: boolean;
  maxShards: number;
  dataKey: Uint8Array;
  recipients: ManifestRecipient[];
  signerSecretKey: Uint8Array;
  signerPublicKey: Uint8Array;
  operationalPublicKey: Uint8Array;
  onShard: ArchiveWriterOptions['onShard'];
  writeRecovery: boolean;
  now: () => Date;
  codec: FrameCodec;
}

function invalid(detail: string, cause?: unknown): ArchiveError {
  return new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail, ...(cause ? { cause } : {}) });
}

function checkSource(source: unknown): ArchiveSource {
  if (typeof source !== 'object' || source === null) throw invalid('source must be an object');
  const s = source as Record<string, unknown>;
  if (typeof s.type !== 'string' || s.type.length === 0)
    throw invalid('source.type must be a non-empty string');
  const out: Record<string, string> = { type: s.type };
  for (const k of ['binding', 'namespace', 'origin'] as const) {
    if (s[k] === undefined) continue;
    if (typeof s[k] !== 'string') throw invalid(`source.${k} must be a string`);
    out[k] = s[k] as string;
  }
  return out as unknown as ArchiveSource;
}

function checkMetadata(m: unknown): RecordMetadata {
  if (m === undefined) return {};
  if (typeof m !== 'object' || m === null || Array.isArray(m)) throw invalid('metadata must be an object');
  const out: RecordMetadata = {};
  for (const [k, v] of Object.entries(m)) {
    if (v === undefined) continue;
    if (
      v !== null &&
      typeof v !== 'string' &&
      typeof v !== 'boolean' &&
      !(typeof v === 'number' && Number.isFinite(v))
    ) {
      throw invalid('metadata values must be strings, finite numbers, booleans or null');
    }
    out[k] = v;
  }
  if (Buffer.byteLength(JSON.stringify(out)) > MAX_METADATA_BYTES)
    throw invalid('metadata larger than 64 KiB');
  return out;
}

function checkName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || LONE_SURROGATE.test(name)) {
    throw invalid('record name must be a non-empty, well-formed Unicode string');
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) throw invalid('record name longer than 4096 bytes');
  return name;
}

async function* bodyChunks(body: RecordInput['body']): AsyncIterable<Uint8Array> {
  if (body instanceof Uint8Array) {
    yield body;
    return;
  }
  yield* body;
}

function checkBody(body: RecordInput['body']): void {
  if (body instanceof Uint8Array) return;
  if (body === null || typeof body !== 'object' || !(Symbol.asyncIterator in body)) {
    throw invalid('record body must be a Uint8Array or an AsyncIterable<Uint8Array>');
  }
}

function internal(e: unknown): unknown {
  return e instanceof ArchiveError ? e : new ArchiveError('ERR_ARCHIVE_INTERNAL', { cause: e });
}

class Writer implements ArchiveWriter {
  readonly job: string;
  readonly runId: string;
  private readonly cfg: WriterConfig;
  private buf: Uint8Array;
  private fill = 0;
  private nextShard: number;
  private readonly shards: (ManifestShard | undefined)[];
  private durable: number;
  private readonly lines: string[];
  private readonly snapshots = new Map<number, Snapshot>();
  private checkpoint: Snapshot;
  private inFlight: Promise<void>[] = [];
  private readonly maxPending: number;
  private shardChain: Promise<void> = Promise.resolve();
  private current: CurrentRecord | null = null;
  private expectPartial: CheckpointPartial | null;
  private state: 'open' | 'busy' | 'finishing' | 'finished' | 'aborted' | 'failed' = 'open';
  private failure: unknown = null;
  private readonly binding: Uint8Array;
  private readonly tag: Uint8Array;
  // Shard and frame buffers come from fixed pools, allocated once per writer: a fresh 8 MiB buffer
  // costs a page fault per 4 KiB on first touch (slower than the cipher) and leaves garbage the GC
  // frees late, inflating RSS. The pools' sizes bound the memory in flight: one shard filling, one
  // waiting, one per codec worker being sealed; frames being sealed or stored.
  private readonly plainPool: BufferPool;
  private readonly framePool: BufferPool;
  private readonly hasher: RecordHasher;

  constructor(cfg: WriterConfig, resumed?: CheckpointState) {
    this.cfg = cfg;
    this.job = cfg.job;
    this.runId = cfg.runId;
    this.maxPending = cfg.codec.parallel + STORE_AHEAD;
    // Shard buffers: one filling, one full and waiting, one per codec worker; frames: one per shard
    // not yet durable (being sealed or stored). Both pools hold frame-sized buffers, so the
    // process-wide cache serves either (and the reader).
    const size = cfg.shardSize + FRAME_OVERHEAD;
    this.plainPool = new BufferPool({ size, count: cfg.codec.parallel + 2, shared: true });
    this.framePool = new BufferPool({ size, count: this.maxPending, shared: true });
    this.hasher = recordHasher(cfg.codec !== inlineCodec);
    this.buf = this.plainPool.tryAcquire()!.subarray(0, cfg.shardSize);
    this.shards = resumed ? [...resumed.shards] : [];
    this.nextShard = this.shards.length;
    this.durable = this.shards.length;
    this.lines = resumed ? [...resumed.lines] : [];
    this.expectPartial = resumed?.partial ?? null;
    this.checkpoint = {
      shardsDone: this.durable,
      recordsDone: this.lines.length,
      partial: this.expectPartial,
    };
    this.binding = runBinding(cfg.job, cfg.runId);
    this.tag = runTag(cfg.job, cfg.runId);
  }

  private fail(e: unknown): unknown {
    if (this.failure === null) this.failure = e;
    this.state = 'failed';
    return this.failure;
  }

  private assertUsable(): void {
    if (this.failure !== null) throw this.failure;
    if (this.state !== 'open') {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_STATE', {
        detail: this.state === 'busy' ? 'addRecord calls must not overlap' : `writer is ${this.state}`,
      });
    }
  }

  async addRecord(record: RecordInput): Promise<RecordResult> {
    this.assertUsable();
    if (typeof record !== 'object' || record === null) throw invalid('record must be an object');
    const name = checkName(record.name);
    const metadata = checkMetadata(record.metadata);
    for (const k of ['sourceType', 'binding', 'namespace'] as const) {
      if (record[k] !== undefined && typeof record[k] !== 'string') throw invalid(`${k} must be a string`);
    }
    if (record.size !== undefined && !(Number.isSafeInteger(record.size) && record.size >= 0)) {
      throw invalid('size must be a non-negative integer');
    }
    this.state = 'busy';
    try {
      const result = await this.consume(record, name, metadata);
      this.state = 'open';
      return result;
    } catch (e) {
      throw this.fail(e);
    }
  }

  /**
   * A whole small record that fits in the current shard buffer without filling it: copied and
   * hashed in one step, with no per-record hash object, iterator or await (a run of many small
   * files spends more time in per-record overhead than in hashing them).
   */
  private addSmall(
    record: RecordInput,
    body: Uint8Array,
    name: string,
    metadata: RecordMetadata,
  ): RecordResult {
    const seq = this.lines.length;
    const offset = this.fill;
    this.buf.set(body, offset);
    this.fill += body.length;
    const digest = `sha384:${hashOnce('sha384', body, 'hex')}` as Digest;
    this.lines.push(
      entryLine({
        name,
        size: body.length,
        sha384: digest,
        shard: this.nextShard,
        offset,
        sourceType: record.sourceType ?? this.cfg.source.type,
        binding: record.binding ?? this.cfg.source.binding ?? '',
        namespace: record.namespace ?? this.cfg.source.namespace ?? '',
        metadata,
      }),
    );
    return {
      seq,
      name,
      size: body.length,
      sha384: digest,
      sizeChanged: record.size !== undefined && record.size !== body.length,
    };
  }

  private async consume(record: RecordInput, name: string, metadata: RecordMetadata): Promise<RecordResult> {
    const body = record.body;
    if (
      this.expectPartial === null &&
      body instanceof Uint8Array &&
      this.fill + body.length < this.buf.length
    )
      return this.addSmall(record, body, name, metadata);
    const partial = this.expectPartial;
    this.expectPartial = null;
    const cur0 = this.lines.length;
    if (partial !== null && partial.name !== name) {
      throw new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT', {
        detail: `the checkpoint stopped inside record ${cur0} and another record was fed`,
      });
    }
    checkBody(record.body);
    const declared = record.body instanceof Uint8Array ? record.body.length : record.size;
    const offload =
      partial === null && this.hasher.offThread && declared !== undefined && declared >= OFFLOAD_MIN;
    const cur: CurrentRecord = partial
      ? {
          seq: this.lines.length,
          name,
          sourceType: partial.sourceType,
          binding: partial.binding,
          namespace: partial.namespace,
          metadata: partial.metadata,
          shard: partial.shard,
          offset: partial.offset,
          bytes: 0,
          hash: createHash('sha384'),
          key: 0,
          hashFrom: 0,
          begun: false,
        }
      : {
          seq: this.lines.length,
          name,
          sourceType: record.sourceType ?? this.cfg.source.type,
          binding: record.binding ?? this.cfg.source.binding ?? '',
          namespace: record.namespace ?? this.cfg.source.namespace ?? '',
          metadata,
          shard: this.nextShard,
          offset: this.fill,
          bytes: 0,
          hash: offload ? null : createHash('sha384'),
          key: offload ? this.hasher.newKey() : 0,
          hashFrom: this.fill,
          begun: false,
        };
    this.current = cur;
    const skip = partial ? partial.bytesDone : 0;
    const checkPrefix = () => {
      if (partial && toHex(cur.hash!.copy().digest()) !== partial.prefixSha384) {
        throw new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT', {
          detail: `record ${cur.seq} changed since the checkpoint`,
        });
      }
    };
    if (partial && skip === 0) checkPrefix();
    try {
      if (record.body instanceof Uint8Array && skip === 0) await this.write(record.body, cur);
      else await this.pull(record.body, cur, skip, checkPrefix);
    } catch (e) {
      if (cur.hash === null) this.hasher.forget([cur.key]);
      throw e;
    }
    let digestBytes: Uint8Array;
    if (cur.hash !== null) {
      digestBytes = cur.hash.digest();
    } else {
      // The record's last bytes are in the current buffer: the hash thread reads them from there.
      const flags = (cur.begun ? 0 : BEGIN) | END;
      try {
        digestBytes = (await this.hasher.run(this.buf, [cur.key, cur.hashFrom, this.fill, flags]))[0]!.digest;
      } catch (e) {
        throw internal(e);
      }
    }
    const digest = formatDigest(digestBytes);
    this.lines.push(
      entryLine({
        name,
        size: cur.bytes,
        sha384: digest,
        shard: cur.shard,
        offset: cur.offset,
        sourceType: cur.sourceType,
        binding: cur.binding,
        namespace: cur.namespace,
        metadata: cur.metadata,
      }),
    );
    this.current = null;
    return {
      seq: cur.seq,
      name,
      size: cur.bytes,
      sha384: digest,
      sizeChanged: record.size !== undefined && record.size !== cur.bytes,
    };
  }

  /** Feeds a streamed body (or a resumed record's body, whose first `skip` bytes are only re-hashed). */
  private async pull(
    body: RecordInput['body'],
    cur: CurrentRecord,
    skip: number,
    checkPrefix: () => void,
  ): Promise<void> {
    const iterator = bodyChunks(body)[Symbol.asyncIterator]();
    for (;;) {
      let step: IteratorResult<Uint8Array>;
      try {
        step = await iterator.next();
      } catch (e) {
        if (e instanceof ArchiveError) throw e;
        throw new ArchiveError('ERR_ARCHIVE_SOURCE_READ', {
          detail: `record ${cur.seq}`,
          cause: e,
        });
      }
      if (step.done) break;
      let chunk = step.value;
      if (!(chunk instanceof Uint8Array)) throw invalid('record body pieces must be Uint8Array');
      if (skip > 0) {
        // Resuming inside this record: its first bytes are already sealed; hash them again only.
        const n = Math.min(skip, chunk.length);
        cur.hash!.update(chunk.subarray(0, n));
        cur.bytes += n;
        skip -= n;
        chunk = chunk.subarray(n);
        if (skip === 0) checkPrefix();
        if (chunk.length === 0) continue;
      }
      await this.write(chunk, cur);
    }
    if (skip > 0) {
      throw new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT', {
        detail: `record ${cur.seq} is shorter than when the checkpoint was taken`,
      });
    }
  }

  private async write(chunk: Uint8Array, cur: CurrentRecord): Promise<void> {
    let o = 0;
    while (o < chunk.length) {
      const n = Math.min(chunk.length - o, this.buf.length - this.fill);
      const piece = chunk.subarray(o, o + n);
      // Hashed piece by piece so a checkpoint's prefix digest covers exactly the bytes sealed
      // (an offloaded record is hashed from the shard buffer instead, see flush).
      cur.hash?.update(piece);
      this.buf.set(piece, this.fill);
      this.fill += n;
      o += n;
      cur.bytes += n;
      // Shards are flushed as soon as they are full, so a record always starts inside the buffer.
      if (this.fill === this.buf.length) await this.flush(false);
    }
  }

  /** Seals the buffered shard (in the background unless final) and starts the next buffer. */
  private async flush(final: boolean): Promise<void> {
    const index = this.nextShard;
    if (index >= this.cfg.maxShards) {
      throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', {
        object: layout.shard(this.job, this.runId, index),
        detail: `run would need more than ${this.cfg.maxShards} shards`,
      });
    }
    this.nextShard++;
    const buffer = this.buf;
    const plain = buffer.subarray(0, this.fill);
    const cur = this.current;
    const partial: CheckpointPartial | null =
      cur && cur.bytes > 0
        ? {
            name: cur.name,
            sourceType: cur.sourceType,
            binding: cur.binding,
            namespace: cur.namespace,
            metadata: cur.metadata as CheckpointPartial['metadata'],
            shard: cur.shard,
            offset: cur.offset,
            bytesDone: cur.bytes,
            prefixSha384: cur.hash ? toHex(cur.hash.copy().digest()) : '',
          }
        : null;
    // An offloaded record in progress: its bytes in this buffer go to the hash thread (before the
    // buffer can be reused), which also reports the prefix digest for the checkpoint.
    let hashed: Promise<void> | null = null;
    if (cur && cur.hash === null && partial) {
      const ops = [cur.key, cur.hashFrom, this.fill, (cur.begun ? 0 : BEGIN) | PREFIX];
      cur.begun = true;
      cur.hashFrom = 0;
      hashed = this.hasher.run(buffer, ops).then((r) => {
        partial.prefixSha384 = toHex(r[0]!.digest);
      });
      hashed.catch(() => undefined);
    }
    this.snapshots.set(index, { shardsDone: index + 1, recordsDone: this.lines.length, partial });
    this.fill = 0;
    this.buf = new Uint8Array(0);
    // A run that fits in one shard never wakes the worker pool.
    const codec = final && index === 0 ? inlineCodec : this.cfg.codec;
    const job = this.sealAndStore(codec, index, final, plain, hashed);
    job.catch((e) => this.fail(internal(e)));
    this.inFlight.push(job);
    // At most `workers + STORE_AHEAD` shards are not yet durable when this returns (being sealed or
    // stored). That bounds memory; exportCheckpoint waits for them, so checkpoints stay fresh.
    while (this.inFlight.length > (final ? 0 : this.maxPending)) {
      await this.inFlight.shift()!.catch(() => undefined);
      if (this.failure !== null) throw this.failure;
    }
    // Back-pressure: waits here while every shard buffer is being sealed.
    if (!final) this.buf = (await this.plainPool.acquire()).subarray(0, this.cfg.shardSize);
    if (this.failure !== null) throw this.failure;
  }

  private async sealAndStore(
    codec: FrameCodec,
    index: number,
    final: boolean,
    plain: Uint8Array,
    hashed: Promise<void> | null,
  ): Promise<void> {
    const plainSize = plain.length;
    let out: Uint8Array | null = null;
    let r: Awaited<ReturnType<FrameCodec['seal']>>;
    try {
      out = await this.framePool.acquire();
      r = await codec.seal({
        domain: 0,
        seq: index,
        final,
        plain,
        compress: this.cfg.compress,
        key: this.cfg.dataKey,
        binding: this.binding,
        runTag: this.tag,
        out,
      });
      if (hashed) await hashed;
    } catch (e) {
      if (out !== null) this.framePool.release(out);
      throw e;
    } finally {
      // The shard buffer is free once sealed and (for an offloaded record) hashed.
      if (hashed) await hashed.catch(() => undefined);
      this.plainPool.release(plain);
    }
    try {
      const key = layout.shard(this.job, this.runId, index);
      await putObject(this.cfg.store, key, r.frame, {
        contentLength: r.frame.length,
        contentType: 'application/octet-stream',
      });
    } finally {
      this.framePool.release(out);
    }
    this.shards[index] = {
      size: r.frame.length,
      plainSize,
      compression: r.zstd ? 'zstd' : 'none',
      sha384: formatDigest(r.digest),
    };
    this.advanceDurable();
  }

  /** Hands the pools' buffers to the process-wide cache once nothing is in flight. */
  private releasePools(): void {
    if (this.buf.length > 0) this.plainPool.release(this.buf);
    this.buf = new Uint8Array(0);
    this.plainPool.dispose();
    this.framePool.dispose();
  }

  private advanceDurable(): void {
    while (this.shards[this.durable] !== undefined) {
      const index = this.durable++;
      const snap = this.snapshots.get(index);
      this.snapshots.delete(index);
      if (snap) this.checkpoint = snap;
      const onShard = this.cfg.onShard;
      if (onShard) {
        const shard = this.shards[index]!;
        const event: ShardEvent = {
          index,
          size: shard.size,
          plainSize: shard.plainSize,
          compression: shard.compression,
          recordsDone: snap?.recordsDone ?? this.lines.length,
        };
        this.shardChain = this.shardChain.then(() => onShard(event));
        this.shardChain.catch((e) => this.fail(e));
      }
    }
  }

  async exportCheckpoint(): Promise<Uint8Array> {
    // The shards already handed to the pipeline become durable first, so the checkpoint covers
    // every byte fed so far that fills a shard (a stalled store is reported by the next call).
    await Promise.allSettled([...this.inFlight]);
    const snap = this.checkpoint;
    const state: CheckpointState = {
      format: 'coffer-archive-checkpoint',
      formatVersion: FORMAT_VERSION,
      job: this.job,
      runId: this.runId,
      prevRunId: this.cfg.prevRunId,
      source: this.cfg.source,
      startedAt: this.cfg.startedAt,
      shardSize: this.cfg.shardSize,
      compress: this.cfg.compress,
      maxShards: this.cfg.maxShards,
      dataKey: toBase64Url(this.cfg.dataKey),
      recipients: this.cfg.recipients,
      shards: this.shards.slice(0, snap.shardsDone) as ManifestShard[],
      lines: this.lines.slice(0, snap.recordsDone),
      partial: snap.partial,
    };
    return sealCheckpoint(state, this.cfg.operationalPublicKey, this.cfg.signerSecretKey);
  }

  async abort(): Promise<void> {
    if (this.state === 'finished') return;
    this.state = 'aborted';
    await Promise.allSettled(this.inFlight);
    this.inFlight = [];
    this.releasePools();
    // Let every onShard callback for a stored shard run (the caller may save checkpoints there).
    await this.shardChain.catch(() => undefined);
  }

  async finish(): Promise<RunSummary> {
    this.assertUsable();
    if (this.expectPartial !== null) {
      throw this.fail(
        new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT', {
          detail: `the checkpoint stopped inside record ${this.lines.length}, which was not fed again`,
        }),
      );
    }
    this.state = 'finishing';
    try {
      const summary = await this.seal();
      this.state = 'finished';
      return summary;
    } catch (e) {
      throw this.fail(e);
    }
  }

  private async seal(): Promise<RunSummary> {
    const { store, job, runId } = this.cfg;
    await this.flush(true);
    for (const p of this.inFlight) await p.catch(() => undefined);
    this.inFlight = [];
    this.releasePools();
    if (this.failure !== null) throw this.failure;
    await this.shardChain;
    if (this.failure !== null) throw this.failure;

    // Refuse a misordered list: exactly shards 0..n-1, each sealed once, in order.
    const n = this.nextShard;
    if (this.shards.length !== n || this.durable !== n) {
      throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', {
        detail: `shard list has ${this.shards.length} entries for ${n} shards`,
      });
    }
    const shards: ManifestShard[] = [];
    for (let i = 0; i < n; i++) {
      const s = this.shards[i];
      if (s === undefined) {
        throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', { object: layout.shard(job, runId, i) });
      }
      shards.push(s);
    }

    // Refuse a truncated archive: list the shards back from the store; every one must be there with
    // its exact size. Objects beyond the list (left by an attempt before a resume) are not part of
    // the run and are removed.
    const prefix = layout.shardsPrefix(job, runId);
    const found = new Map<string, number>();
    for (const o of await listObjects(store, prefix)) found.set(o.key, o.size);
    for (let i = 0; i < n; i++) {
      const key = layout.shard(job, runId, i);
      const size = found.get(key);
      if (size !== shards[i]!.size) {
        throw new ArchiveError('ERR_ARCHIVE_TRUNCATED', {
          object: key,
          detail:
            size === undefined
              ? 'shard not found in the destination'
              : 'shard size differs in the destination',
        });
      }
      found.delete(key);
    }
    for (const key of found.keys()) await deleteObject(store, key);

    // The record index.
    const indexKey = layout.index(job, runId);
    const chunks = indexChunks([headerLine(job, runId, this.lines.length), ...this.lines]);
    const frames: Uint8Array[] = [];
    const indexHash = createHash('sha384');
    for (let i = 0; i < chunks.length; i++) {
      const r = await inlineCodec.seal({
        domain: 1,
        seq: i,
        final: i === chunks.length - 1,
        plain: chunks[i]!,
        compress: this.cfg.compress,
        key: this.cfg.dataKey,
        binding: this.binding,
        runTag: this.tag,
        out: null,
      });
      indexHash.update(r.frame);
      frames.push(r.frame);
    }
    const indexSize = frames.reduce((a, f) => a + f.length, 0);
    const indexDigest = formatDigest(indexHash.digest());
    await putObject(store, indexKey, Buffer.concat(frames), {
      contentLength: indexSize,
      contentType: 'application/octet-stream',
    });

    // The signed root manifest; manifest.json is written last and is the commit point.
    const sealedAt = this.cfg.now().toISOString();
    const signer = fingerprint(this.cfg.signerPublicKey);
    let bytes = 0;
    for (const s of shards) bytes += s.plainSize;
    const doc: ManifestDocument = {
      format: FORMAT_NAME,
      formatVersion: FORMAT_VERSION,
      job,
      runId,
      prevRunId: this.cfg.prevRunId,
      startedAt: this.cfg.startedAt,
      sealedAt,
      source: this.cfg.source,
      signer: { fingerprint: signer, publicKey: toBase64Url(this.cfg.signerPublicKey) },
      recipients: this.cfg.recipients,
      shardSize: this.cfg.shardSize,
      shards,
      index: { size: indexSize, sha384: indexDigest, chunks: frames.length },
      totals: { records: this.lines.length, bytes },
    };
    const manifestBytes = canonicalJsonBytes(doc);
    const manifestDigest = formatDigest(sha384(manifestBytes));
    const signature = sign(this.cfg.signerSecretKey, manifestBytes, MANIFEST_SIGNATURE_CONTEXT);
    const sigDoc: SignatureDocument = {
      format: SIGNATURE_FORMAT,
      formatVersion: FORMAT_VERSION,
      context: MANIFEST_SIGNATURE_CONTEXT,
      manifest: manifestDigest,
      signer,
      signature: toBase64Url(signature),
    };
    const sigBytes = canonicalJsonBytes(sigDoc);
    await putObject(store, layout.signature(job, runId), sigBytes, {
      contentLength: sigBytes.length,
      contentType: 'application/json',
    });
    const manifestKey = layout.manifest(job, runId);
    await putObject(store, manifestKey, manifestBytes, {
      contentLength: manifestBytes.length,
      contentType: 'application/json',
    });
    if (this.cfg.writeRecovery)
      await writeRecoveryFiles(store, { signerPublicKey: this.cfg.signerPublicKey });

    let storedBytes = indexSize + manifestBytes.length + sigBytes.length;
    for (const s of shards) storedBytes += s.size;
    return {
      formatVersion: FORMAT_VERSION,
      job,
      runId,
      prevRunId: this.cfg.prevRunId,
      manifestKey,
      manifestDigest,
      signer,
      records: this.lines.length,
      bytes,
      shards: n,
      storedBytes,
      startedAt: this.cfg.startedAt,
      sealedAt,
    };
  }
}

function clampShardSize(size: number | undefined): number {
  if (size === undefined) return DEFAULT_SHARD_SIZE;
  if (!Number.isSafeInteger(size) || size <= 0) throw invalid('shardSize must be a positive integer');
  return Math.min(MAX_SHARD_SIZE, Math.max(MIN_SHARD_SIZE, size));
}

function signerKeys(secretKey: unknown): { secret: Uint8Array; public: Uint8Array } {
  if (!(secretKey instanceof Uint8Array)) throw invalid('signerSecretKey must be a Uint8Array');
  try {
    return { secret: secretKey, public: signerPublicKeyFromSecret(secretKey) };
  } catch (e) {
    throw invalid('malformed signer secret key', e);
  }
}

/**
 * Starts a run. Returns a writer; throws ERR_ARCHIVE_INVALID_ARGUMENT for a bad job / run id,
 * key or option (or when the run is already sealed in the store), ERR_ARCHIVE_DESTINATION when the
 * store cannot be read.
 */
export async function createArchiveWriter(options: ArchiveWriterOptions): Promise<ArchiveWriter> {
  assertRuntime();
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const { store, job, runId, prevRunId } = options;
  assertId('job', job);
  assertId('runId', runId);
  if (prevRunId !== null) assertId('prevRunId', prevRunId);
  const source = checkSource(options.source);
  const signer = signerKeys(options.signerSecretKey);
  const op = options.recipients?.operational;
  const bg = options.recipients?.breakGlass;
  if (!(op instanceof Uint8Array) || !(bg instanceof Uint8Array)) {
    throw invalid('recipients.operational and recipients.breakGlass must be Uint8Array public keys');
  }
  const maxShards = options.maxShards ?? MAX_SHARDS;
  if (!Number.isSafeInteger(maxShards) || maxShards < 1 || maxShards > MAX_SHARDS)
    throw invalid('maxShards out of range');
  const shardSize = clampShardSize(options.shardSize);
  let opFp: string;
  let bgFp: string;
  try {
    opFp = fingerprint(op);
    bgFp = fingerprint(bg);
  } catch (e) {
    throw invalid('malformed recipient public key', e);
  }
  if (opFp === bgFp) throw invalid('the operational and break-glass recipients must be different keys');
  if ((await headObject(store, layout.manifest(job, runId))) !== null) {
    throw invalid(`run ${job}/${runId} is already sealed in this destination`);
  }
  const dataKey = randomBytes(32);
  let wrapped: Awaited<ReturnType<typeof wrapKey>>;
  try {
    wrapped = await wrapKey(dataKey, [op, bg], dataKeyAad(job, runId));
  } catch (e) {
    throw invalid('recipient public keys cannot be used for wrapping', e);
  }
  const recipients: ManifestRecipient[] = wrapped.map((w) => ({
    role: w.recipient === opFp ? 'operational' : 'break-glass',
    recipient: w.recipient,
    capsule: w.capsule,
  }));
  if (recipients.filter((r) => r.role === 'operational').length !== 1 || recipients.length !== 2) {
    throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'key wrapping returned unexpected recipients' });
  }
  const now = options.now ?? (() => new Date());
  return new Writer({
    store,
    job,
    runId,
    prevRunId,
    source,
    startedAt: now().toISOString(),
    shardSize,
    compress: options.compress ?? true,
    maxShards,
    dataKey,
    recipients,
    signerSecretKey: signer.secret,
    signerPublicKey: signer.public,
    operationalPublicKey: op,
    onShard: options.onShard,
    writeRecovery: options.writeRecovery ?? true,
    now,
    codec: frameCodec(options.workers),
  });
}

/**
 * Resumes a run from a checkpoint exported by `exportCheckpoint()`. Throws
 * ERR_ARCHIVE_CHECKPOINT_UNREADABLE when the checkpoint cannot be verified with this signer or
 * opened with this operational key, ERR_ARCHIVE_INVALID_ARGUMENT for malformed keys.
 */
export async function resumeArchiveWriter(
  checkpoint: Uint8Array,
  options: ResumeArchiveWriterOptions,
): Promise<{ writer: ArchiveWriter; resume: ResumePoint }> {
  assertRuntime();
  const signer = signerKeys(options.signerSecretKey);
  if (!(options.operationalSecretKey instanceof Uint8Array))
    throw invalid('operationalSecretKey must be a Uint8Array');
  const { state, operationalPublicKey } = await openCheckpoint(
    checkpoint,
    options.operationalSecretKey,
    signer.secret,
  );
  if (!isSupportedVersion(state.formatVersion)) {
    throw new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', {
      detail: 'checkpoint written by another format version',
    });
  }
  let dataKey: Uint8Array;
  try {
    assertId('job', state.job);
    assertId('runId', state.runId);
    dataKey = new Uint8Array(fromBase64Url(state.dataKey));
    if (dataKey.length !== 32 || !Array.isArray(state.shards) || !Array.isArray(state.lines))
      throw new Error('bad state');
  } catch (e) {
    throw new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', { detail: 'state malformed', cause: e });
  }
  if ((await headObject(options.store, layout.manifest(state.job, state.runId))) !== null) {
    throw invalid(`run ${state.job}/${state.runId} is already sealed in this destination`);
  }
  const now = options.now ?? (() => new Date());
  const writer = new Writer(
    {
      store: options.store,
      job: state.job,
      runId: state.runId,
      prevRunId: state.prevRunId,
      source: state.source,
      startedAt: state.startedAt,
      shardSize: state.shardSize,
      compress: state.compress,
      maxShards: state.maxShards,
      dataKey,
      recipients: state.recipients,
      signerSecretKey: signer.secret,
      signerPublicKey: signer.public,
      operationalPublicKey,
      onShard: options.onShard,
      writeRecovery: options.writeRecovery ?? true,
      now,
      codec: frameCodec(options.workers),
    },
    state,
  );
  const last = state.lines.at(-1);
  const resume: ResumePoint = {
    job: state.job,
    runId: state.runId,
    recordsDone: state.lines.length,
    lastRecordName: last === undefined ? null : (JSON.parse(last) as { name: string }).name,
    shardsDone: state.shards.length,
    partial: state.partial ? { name: state.partial.name, bytesDone: state.partial.bytesDone } : null,
  };
  return { writer, resume };
}
