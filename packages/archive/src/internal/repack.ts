/**
 * Carrying a prune plan out (docs/archive-format.md §12.9), one step at a time in the crash-safe
 * order: 1 repack the live chunks of sparse packs into new packs and describe them, 2 write the pack
 * indexes again without the packs that go, 3 delete those packs. A crash between steps leaves
 * every referenced chunk described at least once; the next prune removes the leftovers.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import type { ChunkedPruneResult, PruneProgress } from '../prune.ts';
import { type ChunkKeys, chunkId, newObjectId } from './chunk-keys.ts';
import { type PackLine, sealPackIndex } from './chunked-index.ts';
import type { FrameCodec } from './codec-pool.ts';
import { openPack, storePack, tableBytes, writeTable } from './pack-codec.ts';
import type { KeyWork } from './prune-plan.ts';
import { sessionSalt } from './run-binding.ts';
import { deleteObject, listObjects, putObject } from './store.ts';

/** The counts a `ChunkedPruneResult` reports, added to as each step goes. */
export type Tally = Omit<ChunkedPruneResult, 'plan' | 'complete' | 'stopped' | 'freedBytes'>;

export const CREATE_ONLY = { contentType: 'application/octet-stream', ifNoneMatch: '*' } as const;

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

export type Progress = (step: PruneProgress['step'], done: number, total: number) => Promise<void>;

export async function repackAll(
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

export async function rewriteAll(
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

export async function deleteAll(
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
