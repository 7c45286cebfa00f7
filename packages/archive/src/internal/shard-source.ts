/**
 * The verified shards of one opened run (docs/archive-format.md "Read algorithm"): each shard's
 * SHA-384 is checked against the signed manifest and its frame opened (AEAD tag, run tag and
 * position) before any plaintext is handed out.
 */
import { parseDigest } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError, type ArchiveErrorCode } from '../errors.ts';
import { layout } from '../layout.ts';
import type { ShardedManifestDocument as ManifestDocument } from '../types.ts';
import type { OpenFailure } from './codec-core.ts';
import { type FrameCodec, inlineCodec } from './codec-pool.ts';
import { runBinding, runTag } from './run-binding.ts';
import { getObject } from './store.ts';

function shardError(failure: OpenFailure): ArchiveErrorCode {
  switch (failure) {
    case 'transplanted':
      return 'ERR_ARCHIVE_SHARD_TRANSPLANTED';
    case 'misplaced':
      return 'ERR_ARCHIVE_SHARD_MISPLACED';
    default:
      return 'ERR_ARCHIVE_SHARD_TAMPERED';
  }
}

/** Header and tag around a frame's payload. */
const FRAME_OVERHEAD = 48;

export const FAILURE_DETAIL: Record<OpenFailure, string> = {
  digest: 'SHA-384 differs from the signed manifest',
  transplanted: 'run tag names another run',
  misplaced: 'frame number names another position',
  header: 'frame header invalid',
  tag: 'authentication tag does not verify',
  length: 'plaintext length differs',
  chunk: "a chunk's bytes do not have its id",
};

/**
 * Verified shard plaintexts of one run, with read-ahead while the access pattern is sequential
 * (so reading records in index order decrypts each shard once and keeps the workers busy). Holds
 * at most `parallel + 1` shards.
 */
export class ShardSource {
  private readonly cache = new Map<number, Promise<Uint8Array>>();
  private last = -1;
  readonly verified = new Set<number>();
  onVerified: ((index: number, plainSize: number) => void) | null = null;

  private readonly store: ObjectStore;
  private readonly doc: ManifestDocument;
  private readonly key: Uint8Array;
  readonly codec: FrameCodec;
  private readonly binding: Uint8Array;
  private readonly tag: Uint8Array;

  constructor(store: ObjectStore, doc: ManifestDocument, key: Uint8Array, codec: FrameCodec) {
    this.store = store;
    this.doc = doc;
    this.key = key;
    this.codec = codec;
    this.binding = runBinding(doc.job, doc.runId);
    this.tag = runTag(doc.job, doc.runId);
  }

  /**
   * Fetches shard `i`, checks its digest and opens it; returns the plaintext, a view of `buf` from
   * offset 0 when `buf` (a whole pool buffer, at least shardSize + 48 bytes) is given, else a fresh
   * buffer. With `buf`, the frame is read into `buf` itself and opened in place: the plaintext of
   * each piece lands 32 bytes (the header) before the ciphertext it came from, which has been read
   * by then, and a compressed payload is decrypted into the codec's scratch first. So a shard read
   * back costs no allocation at all (a fresh frame buffer per shard was ~1 GiB of short-lived
   * external memory per GiB read back, and a page fault per 4 KiB). Throws the shard's error.
   */
  async openInto(i: number, buf: Uint8Array | null): Promise<Uint8Array> {
    const { job, runId } = this.doc;
    const objectKey = layout.shard(job, runId, i);
    const shard = this.doc.shards[i]!;
    const frame = await getObject(
      this.store,
      objectKey,
      {
        // No frame of this run is larger than a full shard's (what is signed bounds it either way);
        // reading up to that size, not just this shard's, keeps the diagnosis of a shard swapped
        // within the run (MISPLACED) rather than TAMPERED.
        maxBytes: Math.max(shard.size, this.doc.shardSize + FRAME_OVERHEAD),
        tooLarge: () =>
          new ArchiveError('ERR_ARCHIVE_SHARD_TAMPERED', {
            object: objectKey,
            detail: 'larger than any frame of the run',
          }),
      },
      buf ?? undefined,
    );
    if (frame === null) throw new ArchiveError('ERR_ARCHIVE_SHARD_MISSING', { object: objectKey });
    const out = buf === null ? null : buf.subarray(0, shard.plainSize);
    const codec = this.doc.shards.length === 1 ? inlineCodec : this.codec;
    const r = await codec.open({
      domain: 0,
      seq: i,
      final: i === this.doc.shards.length - 1,
      frame,
      key: this.key,
      binding: this.binding,
      runTag: this.tag,
      digest: parseDigest(shard.sha384),
      plainLength: shard.plainSize,
      out,
    });
    if (!r.ok)
      throw new ArchiveError(shardError(r.failure), { object: objectKey, detail: FAILURE_DETAIL[r.failure] });
    return r.plain;
  }

  /** Records `i` as verified (once) and reports it. */
  markVerified(i: number): void {
    if (!this.verified.has(i)) {
      this.verified.add(i);
      this.onVerified?.(i, this.doc.shards[i]!.plainSize);
    }
  }

  private async load(i: number): Promise<Uint8Array> {
    const plain = await this.openInto(i, null);
    this.markVerified(i);
    return plain;
  }

  private fetch(i: number): Promise<Uint8Array> {
    let p = this.cache.get(i);
    if (!p) {
      p = this.load(i);
      p.catch(() => undefined);
      this.cache.set(i, p);
    }
    return p;
  }

  get(i: number): Promise<Uint8Array> {
    const sequential = i === this.last || i === this.last + 1;
    this.last = i;
    for (const k of this.cache.keys()) {
      if (k < i || (!sequential && k !== i)) {
        this.cache.delete(k);
      }
    }
    const p = this.fetch(i);
    if (sequential) {
      const ahead = Math.min(this.doc.shards.length - 1, i + this.codec.parallel);
      for (let k = i + 1; k <= ahead; k++) this.fetch(k);
    }
    return p;
  }
}
