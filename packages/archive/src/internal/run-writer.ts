/**
 * The run writer behind createArchiveWriter / resumeArchiveWriter (docs/archive-format.md, "Write
 * (seal)"): streams records into shard buffers, hashes each record's plaintext, hands full shards
 * to the codec workers to seal and stores them a bounded number ahead, tracks the state a
 * checkpoint needs, and commits the run (internal/run-commit.ts) once every shard is stored.
 *
 * Security-relevant behaviour: the data key leaves this class only sealed to the operational key
 * and signed (checkpoint); a record resumed inside its body must re-hash to the checkpoint's prefix
 * digest (ERR_ARCHIVE_RESUME_DIVERGENT otherwise). Memory is bounded by the shard size times the
 * number of shards in flight, whatever the record or run size.
 */
import { createHash, type Hash, hash as hashOnce } from 'node:crypto';
import { type Digest, formatDigest, toBase64Url, toHex } from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import {
  type ArchiveWriter,
  FORMAT_VERSION,
  type ManifestShard,
  type RecordInput,
  type RecordMetadata,
  type RecordResult,
  type RunSummary,
  type ShardEvent,
} from '../types.ts';
import { BufferPool } from './buffer-pool.ts';
import { type CheckpointPartial, type CheckpointState, sealCheckpoint } from './checkpoint.ts';
import { type FrameCodec, inlineCodec } from './codec-pool.ts';
import { entryLine } from './index-codec.ts';
import { MANIFEST_MAX_SHARDS } from './manifest.ts';
import { holds, isPreconditionFailed } from './put-once.ts';
import { BEGIN, END, OFFLOAD_MIN, PREFIX, type RecordHasher, recordHasher } from './record-hash.ts';
import { runBinding, runTag, sessionSalt } from './run-binding.ts';
import { commitRun, sealIndex } from './run-commit.ts';
import { putObject } from './store.ts';
import type { WriterConfig } from './writer-config.ts';
import { bodyChunks, checkBody, checkMetadata, checkName, internal, invalid } from './writer-input.ts';

/** Frame header (32) and tag (16) around the payload. */
const FRAME_OVERHEAD = 48;
const FRAME_HEADER = 32;
/**
 * Shards being stored while the codec workers seal the next ones: storing (a write and an fsync
 * on the fs store, a PUT on S3) takes longer than sealing, so without this the pipeline waits on
 * the store. Concurrent fsyncs overlap on the disk, so a few in flight nearly double the
 * throughput of a busy disk; a shard past its write holds no buffer (see sealAndStore), so on
 * the fs store this costs no memory. More would tie up every libuv thread (the source's reads).
 */
const STORE_AHEAD = 5;
/**
 * Shard buffers beyond one per codec worker: one filling, one whose offloaded record bytes are
 * being hashed, one being written to the store (a frame is sealed in its shard buffer).
 */
const SHARDS_AHEAD = 3;

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

export class RunWriter implements ArchiveWriter {
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
  /** Resumed after the final shard was stored: nothing more is written but the index and manifest. */
  private readonly finalStored: boolean;
  private readonly binding: Uint8Array;
  private readonly tag: Uint8Array;
  // Drawn afresh by every writer (a resumed run's too), so no (data key, nonce) pair seals twice.
  private readonly salt = sessionSalt();
  // Shard buffers come from a fixed pool, allocated once per writer: a fresh 8 MiB buffer costs a
  // page fault per 4 KiB on first touch (slower than the cipher) and leaves garbage the GC frees
  // late, inflating RSS. The pool's size bounds the memory in flight. Each buffer is frame-sized:
  // the shard's plaintext after room for the header, sealed in place (see sealAndStore).
  private readonly plainPool: BufferPool;
  private readonly hasher: RecordHasher;

  constructor(cfg: WriterConfig, resumed?: CheckpointState) {
    this.cfg = cfg;
    this.job = cfg.job;
    this.runId = cfg.runId;
    this.maxPending = cfg.codec.parallel + STORE_AHEAD;
    // Frame-sized buffers, so the process-wide cache serves the reader too.
    const size = cfg.shardSize + FRAME_OVERHEAD;
    this.plainPool = new BufferPool({ size, count: cfg.codec.parallel + SHARDS_AHEAD, shared: true });
    this.hasher = recordHasher(cfg.codec !== inlineCodec);
    this.buf = this.plainPool.tryAcquire()!.subarray(FRAME_HEADER, FRAME_HEADER + cfg.shardSize);
    this.shards = resumed ? [...resumed.shards] : [];
    this.nextShard = this.shards.length;
    this.durable = this.shards.length;
    this.lines = resumed ? [...resumed.lines] : [];
    this.expectPartial = resumed?.partial ?? null;
    // Only the final flush seals a shard that is not full (a full buffer is flushed as it fills),
    // so a checkpoint whose last shard is not full was taken after the final shard was stored:
    // the run only lacks its index and manifest. Sealing another final shard would sign a
    // manifest no reader accepts (a short shard that is not the last).
    const lastShard = this.shards.at(-1);
    this.finalStored = lastShard !== undefined && lastShard.plainSize < cfg.shardSize;
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
    if (this.finalStored) {
      throw this.fail(
        new ArchiveError('ERR_ARCHIVE_RESUME_DIVERGENT', {
          detail: 'the checkpoint holds the final shard: no record can follow',
        }),
      );
    }
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
    // Also refused past the manifest ceiling: a reader would refuse the manifest as too large.
    const limit = Math.min(this.cfg.maxShards, MANIFEST_MAX_SHARDS);
    if (index >= limit) {
      throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', {
        object: layout.shard(this.job, this.runId, index),
        detail: `run would need more than ${limit} shards`,
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
    // (The final flush does not wait: seal() does, sealing the index meanwhile.)
    while (!final && this.inFlight.length > this.maxPending) {
      await this.inFlight.shift()!.catch(() => undefined);
      if (this.failure !== null) throw this.failure;
    }
    // Back-pressure: waits here while every shard buffer is being sealed.
    if (!final)
      this.buf = (await this.plainPool.acquire()).subarray(FRAME_HEADER, FRAME_HEADER + this.cfg.shardSize);
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
    // The frame is built in place, in the shard buffer itself: the plaintext sits after room for
    // the header and the tag fits after it, and each piece of ciphertext overwrites the piece of
    // plaintext (or of zstd output) it was made from. The buffer goes back to the pool as soon as
    // the store has the frame's bytes (the fs store: written, before the fsync), so shards waiting
    // on a slow fsync hold no buffer.
    let held: Uint8Array | null = new Uint8Array(
      plain.buffer,
      plain.byteOffset - FRAME_HEADER,
      this.cfg.shardSize + FRAME_OVERHEAD,
    );
    const release = () => {
      if (held !== null) this.plainPool.release(held);
      held = null;
    };
    try {
      // An offloaded record's bytes are read by the record-hash thread before they are overwritten.
      if (hashed) await hashed;
      const r = await codec.seal({
        domain: 0,
        seq: index,
        final,
        plain,
        compress: this.cfg.compress,
        key: this.cfg.dataKey,
        binding: this.binding,
        runTag: this.tag,
        salt: this.salt,
        out: held,
      });
      const key = layout.shard(this.job, this.runId, index);
      // Create-only: a shard in the way is never replaced here. It is this writer's own when a
      // retried put found its first attempt's object (same digest); else another writer of the
      // run stored it (a successor after this one stood still past its lease, or one this writer
      // resumed after while it still ran), and this attempt stops. A resume deletes the shards
      // past its checkpoint first, so an attempt's leftovers are not in its way.
      const digest = r.digest;
      const size = r.frame.length;
      await putObject(this.cfg.store, key, r.frame, {
        contentLength: size,
        contentType: 'application/octet-stream',
        onBodyWritten: release,
        ifNoneMatch: '*',
      }).catch(async (e: unknown) => {
        if (!isPreconditionFailed(e)) throw e;
        if (
          await holds(this.cfg.store, key, size, (there) =>
            hashOnce('sha384', there, 'buffer').equals(digest),
          )
        )
          return;
        throw new ArchiveError('ERR_ARCHIVE_DESTINATION', {
          object: key,
          detail: 'another writer of this run stored this shard',
          storeErrorCode: 'ERR_OBJECTSTORE_PRECONDITION_FAILED',
          cause: e,
        });
      });
      this.shards[index] = {
        size: r.frame.length,
        plainSize,
        compression: r.zstd ? 'zstd' : 'none',
        sha384: formatDigest(r.digest),
      };
      this.advanceDurable();
    } finally {
      release();
    }
  }

  /** Hands the pools' buffers to the process-wide cache once nothing is in flight. */
  private releasePools(): void {
    if (this.buf.length > 0) this.plainPool.release(this.buf);
    this.buf = new Uint8Array(0);
    this.plainPool.dispose();
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
    if (!this.finalStored) await this.flush(true);
    // Every record is in: the index is sealed on this thread while the last shards are sealed and
    // stored (it is stored only once every shard is listed back).
    const index = sealIndex(this.cfg, this.lines, this.binding, this.tag, this.salt);
    for (const p of this.inFlight) await p.catch(() => undefined);
    this.inFlight = [];
    this.releasePools();
    if (this.failure !== null) throw this.failure;
    await this.shardChain;
    if (this.failure !== null) throw this.failure;

    return commitRun({
      cfg: this.cfg,
      shards: this.shards,
      nextShard: this.nextShard,
      durable: this.durable,
      lines: this.lines,
      binding: this.binding,
      runTag: this.tag,
      index,
    });
  }
}
