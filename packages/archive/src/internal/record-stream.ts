/**
 * `OpenedRun.readRecords`: many records of one run, read back and verified in a pipeline.
 *
 * The same checks as reading the records one by one with `readRecord` (every shard's digest against
 * the signed manifest before it is opened, its AEAD tag and lengths, each record's plaintext
 * SHA-384), arranged as `verifyAll` arranges them: the shards holding the requested records are
 * fetched and opened on the codec workers a few ahead, into a fixed pool of shared buffers; the
 * record-hash thread hashes each shard's requested records in one batched request; the calling
 * thread only hands verified records over. A record is handed over only once its digest matched,
 * so a consumer never sees a byte that did not verify.
 *
 * Pieces are views of the pool's shard buffers, never copies. The consumer gives them back with
 * `release()`; a shard's buffer returns to the pool once the reader is done with it and every
 * record with a piece in it was released. Records held unreleased keep their buffers, and the
 * reader waits for a free buffer (back-pressure) when all are held: a consumer must release records
 * independently of asking for the next one (e.g. when its write finishes), never only after it.
 * Memory: (codec parallelism + 3 + the widest record's shard span + `holdShards`) shard buffers,
 * allocated as needed; a record bigger than `maxRecordBytes` is refused up front (read such a one
 * with `readRecord`).
 */
import { parseDigest } from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import type {
  IndexEntry,
  ShardedManifestDocument as ManifestDocument,
  RecordRead,
  RecordsReadOptions,
} from '../types.ts';
import { BufferPool } from './buffer-pool.ts';
import { bytesEqual } from './bytes.ts';
import { type FrameCodec, inlineCodec } from './codec-pool.ts';
import { BEGIN, END, type HashDigest, recordHasher } from './record-hash.ts';

/** What the pipeline needs from the run's reader (reader.ts's ShardSource). */
export interface ShardOpener {
  readonly codec: FrameCodec;
  /**
   * Fetches shard `i` into `buf` (a whole pool buffer, or null for a fresh one), checks its digest
   * and opens it in place; returns the plaintext (a view of `buf` from offset 0); throws the shard's
   * error.
   */
  openInto(i: number, buf: Uint8Array | null): Promise<Uint8Array>;
  /** Records shard `i` as verified (once). */
  markVerified(i: number): void;
}

export const DEFAULT_MAX_RECORD_BYTES = 64 * 1024 * 1024;
const DEFAULT_HOLD_SHARDS = 4;

/** A pool buffer with a count of its users (the reader, and each record with a piece in it). */
class Held {
  users = 1;
  readonly buf: Uint8Array;
  readonly pool: BufferPool;
  constructor(buf: Uint8Array, pool: BufferPool) {
    this.buf = buf;
    this.pool = pool;
  }
  drop(): void {
    if (--this.users === 0) this.pool.release(this.buf);
  }
}

/** A record being assembled: its pieces and the buffers they lie in. */
class Pending {
  readonly entry: IndexEntry;
  readonly pieces: Uint8Array[] = [];
  readonly held: Held[] = [];
  released = false;
  constructor(entry: IndexEntry) {
    this.entry = entry;
  }
  add(piece: Uint8Array, h: Held): void {
    this.pieces.push(piece);
    if (this.held.at(-1) !== h) {
      h.users++;
      this.held.push(h);
    }
  }
  release(): void {
    if (this.released) return;
    this.released = true;
    for (const h of this.held) h.drop();
  }
}

function shardsOf(doc: ManifestDocument, e: IndexEntry): number {
  let left = e.size - (doc.shards[e.shard]!.plainSize - e.offset);
  let n = 1;
  for (let s = e.shard + 1; left > 0 && s < doc.shards.length; s++, n++) left -= doc.shards[s]!.plainSize;
  return n;
}

/**
 * Yields `entries` (in strictly increasing `seq`, as `records()` lists them) with their verified
 * plaintext. Throws ERR_ARCHIVE_INVALID_ARGUMENT (entries out of order or over `maxRecordBytes`,
 * before anything is read), the shard errors, ERR_ARCHIVE_RECORD_TAMPERED, and
 * ERR_ARCHIVE_INDEX_INCONSISTENT; records before the failing one have been yielded.
 */
export async function* readRecordsPipelined(
  doc: ManifestDocument,
  shards: ShardOpener,
  entries: readonly IndexEntry[],
  options: RecordsReadOptions = {},
): AsyncGenerator<RecordRead> {
  const maxBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  const holdShards = options.holdShards ?? DEFAULT_HOLD_SHARDS;
  const n = doc.shards.length;
  const inconsistent = (e: IndexEntry) =>
    new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
      object: layout.index(doc.job, doc.runId),
      detail: `record ${e.seq}`,
    });
  // Which shards to open, and the widest span, decided before anything is read.
  const needed: number[] = [];
  let span = 1;
  let prev = -1;
  for (const e of entries) {
    if (!Number.isSafeInteger(e.seq) || e.seq <= prev)
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'entries must be in index order' });
    prev = e.seq;
    if (e.size > maxBytes)
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
        detail: `record ${e.seq} is larger than maxRecordBytes (read it with readRecord)`,
      });
    if (e.shard >= n || e.offset > doc.shards[e.shard]!.plainSize) throw inconsistent(e);
    const k = e.size === 0 ? 1 : shardsOf(doc, e);
    if (e.shard + k > n) throw inconsistent(e);
    span = Math.max(span, k);
    for (let s = Math.max(e.shard, (needed.at(-1) ?? -1) + 1); s < e.shard + k; s++) needed.push(s);
  }
  if (entries.length === 0) return;

  const ahead = shards.codec.parallel + 1;
  const hasher = recordHasher(shards.codec !== inlineCodec);
  const pool = new BufferPool({
    size: doc.shardSize + 48,
    count: ahead + 2 + span + holdShards,
    shared: hasher.offThread,
  });
  const opening: { index: number; buf: Promise<Uint8Array>; plain: Promise<Uint8Array> }[] = [];
  let nextOpen = 0;
  const startOpen = () => {
    const index = needed[nextOpen++]!;
    const buf = pool.acquire();
    const plain = buf.then((b) => shards.openInto(index, b));
    plain.catch(() => undefined);
    opening.push({ index, buf, plain });
  };
  // Hash requests in flight, in order: the buffer they read (the reader's own use of it) and the
  // records each completes.
  const hashing: { done: Promise<HashDigest[]>; held: Held; ends: Map<number, Pending> }[] = [];
  const building = new Set<Pending>(); // assembled, not yet yielded (released on failure)
  const openKeys: number[] = [];
  let at = 0; // next entry to place
  let spanning: { rec: Pending; key: number; left: number } | null = null;

  /**
   * Settles the oldest hash request: its records that verified, in entry order, and the failure
   * of the first one that did not (the records before it are still handed over first).
   */
  const settle = async (): Promise<{ good: Pending[]; failure: ArchiveError | null }> => {
    const h = hashing.shift()!;
    let replies: HashDigest[];
    try {
      replies = await h.done;
    } finally {
      h.held.drop();
    }
    const good: Pending[] = [];
    for (const r of replies) {
      const rec = h.ends.get(r.key)!;
      if (!bytesEqual(r.digest, parseDigest(rec.entry.sha384))) {
        const failure = new ArchiveError('ERR_ARCHIVE_RECORD_TAMPERED', {
          object: layout.shard(doc.job, doc.runId, rec.entry.shard),
          detail: `record ${rec.entry.seq}`,
        });
        return { good, failure };
      }
      good.push(rec);
    }
    return { good, failure: null };
  };
  const handOver = (rec: Pending): RecordRead => {
    building.delete(rec);
    return { entry: rec.entry, pieces: rec.pieces, release: () => rec.release() };
  };
  async function* settleOldest(): AsyncGenerator<RecordRead> {
    const { good, failure } = await settle();
    for (const rec of good) yield handOver(rec);
    if (failure !== null) throw failure;
  }

  try {
    while (nextOpen < needed.length && nextOpen < ahead) startOpen();
    for (let k = 0; k < needed.length; k++) {
      const o = opening.shift()!;
      let plain: Uint8Array;
      try {
        plain = await o.plain;
      } catch (e) {
        // Earlier records come first, as reading them one by one would give them.
        while (hashing.length > 0) yield* settleOldest();
        throw e;
      } finally {
        if (nextOpen < needed.length) startOpen();
      }
      shards.markVerified(o.index);
      const held = new Held(await o.buf, pool);
      const size = plain.length;
      const ops: number[] = [];
      const ends = new Map<number, Pending>();
      if (spanning !== null) {
        const take = Math.min(spanning.left, size);
        spanning.left -= take;
        if (take > 0) spanning.rec.add(plain.subarray(0, take), held);
        const done = spanning.left === 0;
        ops.push(spanning.key, 0, take, done ? END : 0);
        if (done) {
          ends.set(spanning.key, spanning.rec);
          openKeys.splice(openKeys.indexOf(spanning.key), 1);
          spanning = null;
        }
      }
      while (spanning === null && at < entries.length && entries[at]!.shard === o.index) {
        const e = entries[at++]!;
        const rec = new Pending(e);
        building.add(rec);
        const key = hasher.newKey();
        const take = Math.min(e.size, size - e.offset);
        if (take > 0) rec.add(plain.subarray(e.offset, e.offset + take), held);
        const done = take === e.size;
        ops.push(key, e.offset, e.offset + take, BEGIN | (done ? END : 0));
        if (done) ends.set(key, rec);
        else {
          openKeys.push(key);
          spanning = { rec, key, left: e.size - take };
        }
      }
      const done = hasher.run(plain, ops);
      done.catch(() => undefined);
      hashing.push({ done, held, ends });
      // One request queued behind the one being hashed keeps the hash thread busy while this
      // thread hands the records of the older one over.
      while (hashing.length > 1) yield* settleOldest();
    }
    while (hashing.length > 0) yield* settleOldest();
    if (spanning !== null || at < entries.length)
      throw inconsistent(entries[Math.min(at, entries.length - 1)]!);
  } finally {
    hasher.forget(openKeys);
    // Let everything started settle, so no buffer is read or written after this returns.
    for (const h of hashing) {
      await h.done.catch(() => undefined);
      h.held.drop();
    }
    for (const rec of building) rec.release();
    await Promise.allSettled(opening.map((o) => o.plain));
    for (const o of opening) pool.release(await o.buf);
    pool.dispose();
  }
}
