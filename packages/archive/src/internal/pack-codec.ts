/**
 * Packs of format 0.2 (docs/archive-format.md §12.4): one sealed frame (magic CFPK, nonce domain 2)
 * under a key derived from the pack's own id, whose plaintext is the chunks back to back followed
 * by the pack's chunk table, so a pack describes itself: if every pack index were lost, the packs
 * alone rebuild them (`rebuildPackIndexes`), as restic's pack headers do.
 *
 *   plaintext = chunk bytes ‖ table ‖ count (u32 BE)
 *   table     = per chunk, in order: chunk id (32 bytes) ‖ length (u32 BE)
 *
 * The writer, the repacker and every reader seal and open packs here only.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import { type ChunkKeys, chunkId, packKey } from './chunk-keys.ts';
import type { PackLine } from './chunked-index.ts';
import type { ChunkCheck } from './codec-core.ts';
import type { FrameCodec } from './codec-pool.ts';
import { formatPackDigest, type PackDigest, packDigestOf, parsePackDigest } from './pack-digest.ts';
import { runBinding, runTag } from './run-binding.ts';
import { getObject, putObject } from './store.ts';

const ENTRY = 36;

/** Bytes of the chunk table of `count` chunks. */
export function tableBytes(count: number): number {
  return count * ENTRY + 4;
}

/** Writes the table of `chunks` at `at` in `into` (which must have tableBytes(n) bytes there). */
export function writeTable(
  into: Uint8Array,
  at: number,
  chunks: readonly { id: string; length: number }[],
): number {
  const view = Buffer.from(into.buffer, into.byteOffset, into.byteLength);
  let o = at;
  for (const c of chunks) {
    view.write(c.id, o, 32, 'hex');
    view.writeUInt32BE(c.length, o + 32);
    o += ENTRY;
  }
  view.writeUInt32BE(chunks.length, o);
  return o + 4;
}

/** The chunks a pack's plaintext lists in its table (offsets from 0, back to back); null if malformed. */
export function readTable(plain: Uint8Array): PackLine['chunks'] | null {
  if (plain.length < 4) return null;
  const view = Buffer.from(plain.buffer, plain.byteOffset, plain.byteLength);
  const count = view.readUInt32BE(plain.length - 4);
  const table = tableBytes(count);
  if (table > plain.length) return null;
  const data = plain.length - table;
  const out: PackLine['chunks'] = [];
  let offset = 0;
  for (let i = 0, o = data; i < count; i++, o += ENTRY) {
    const length = view.readUInt32BE(o + 32);
    if (length === 0) return null;
    out.push({ id: view.toString('hex', o, o + 32), offset, length });
    offset += length;
  }
  return offset === data ? out : null;
}

/**
 * Seals `plain` (chunk bytes and table, as built by the caller) as pack `packId` and stores it
 * create-only. Returns its pack-index line.
 */
export async function storePack(
  store: ObjectStore,
  codec: FrameCodec,
  job: string,
  keys: ChunkKeys,
  packId: string,
  plain: Uint8Array,
  chunks: PackLine['chunks'],
  options: {
    compress: boolean;
    salt: Uint8Array;
    /** The frame-sized buffer `plain` lies in at offset 32 (sealed in place), or null. */
    out?: Uint8Array | null;
    /** Called once the store no longer needs the frame's bytes (see PutOptions.onBodyWritten). */
    onBodyWritten?: () => void;
  },
): Promise<PackLine> {
  const r = await codec.seal({
    domain: 2,
    seq: 0,
    final: true,
    plain,
    compress: options.compress,
    key: packKey(keys, packId),
    binding: runBinding(job, packId),
    runTag: runTag(job, packId),
    salt: options.salt,
    out: options.out ?? null,
    digestAlg: 'sha256',
  });
  await putObject(store, layout.pack(job, keys.keyId, packId), r.frame, {
    contentLength: r.frame.length,
    contentType: 'application/octet-stream',
    ifNoneMatch: '*',
    ...(options.onBodyWritten === undefined ? {} : { onBodyWritten: options.onBodyWritten }),
  });
  return {
    pack: packId,
    size: r.frame.length,
    plainSize: plain.length,
    compression: r.zstd ? 'zstd' : 'none',
    sha256: formatPackDigest(r.digest),
    chunks,
  };
}

/**
 * Reads and opens a pack: its SHA-256 must equal the pack index's before it is decrypted (when a
 * line is given), then its tag under its own key bound to its id. Returns the plaintext.
 * `line` null: a pack no index describes (a rebuild), checked by its tag and table alone.
 * `into` (a buffer of at least the pack's stored and plaintext sizes, shared memory when the codec
 * runs on workers): the frame is read and opened in it and the plaintext is a view of it, so a
 * read-back allocates nothing per pack; the caller owns it again once done with the plaintext.
 */
export async function openPack(
  store: ObjectStore,
  codec: FrameCodec,
  job: string,
  keys: ChunkKeys,
  pack: string,
  line: Pick<PackLine, 'size' | 'sha256' | 'plainSize'> | null,
  maxBytes: number,
  into?: Uint8Array,
  check?: { chunks: readonly { id: string; offset: number; length: number }[]; run: string },
): Promise<{ plain: Uint8Array; size: number; sha256: PackDigest | null }> {
  const object = layout.pack(job, keys.keyId, pack);
  const frame = await getObject(
    store,
    object,
    {
      maxBytes: line?.size ?? maxBytes,
      tooLarge: () =>
        new ArchiveError('ERR_ARCHIVE_SHARD_TAMPERED', { object, detail: 'larger than its pack index says' }),
    },
    into,
  );
  if (frame === null) throw new ArchiveError('ERR_ARCHIVE_PACK_MISSING', { object });
  const size = frame.length;
  const digest = line === null ? packDigestOf(frame) : null;
  const r = await codec.open({
    domain: 2,
    seq: 0,
    final: true,
    frame,
    key: packKey(keys, pack),
    binding: runBinding(job, pack),
    runTag: runTag(job, pack),
    digest: line === null ? null : parsePackDigest(line.sha256),
    plainLength: line?.plainSize ?? null,
    // Opened in place: each piece's plaintext lands where its ciphertext was read from, minus
    // the header (a compressed payload is then inflated and copied over itself).
    out: into !== undefined && line !== null ? into.subarray(0, line.plainSize) : null,
    chunks: check === undefined ? null : chunkCheck(keys, check.chunks),
  });
  if (!r.ok && r.failure === 'chunk') {
    const c = check!.chunks[r.at ?? 0]!;
    throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
      object,
      detail: `chunk ${c.id} of run ${check!.run}`,
    });
  }
  if (!r.ok) {
    throw new ArchiveError(
      r.failure === 'transplanted' ? 'ERR_ARCHIVE_SHARD_TRANSPLANTED' : 'ERR_ARCHIVE_SHARD_TAMPERED',
      {
        object,
        detail: `pack ${r.failure}`,
      },
    );
  }
  return { plain: r.plain, size, sha256: digest };
}

/** The codec's form of a list of chunks to check against their ids as a pack is opened. */
function chunkCheck(
  keys: ChunkKeys,
  chunks: readonly { id: string; offset: number; length: number }[],
): ChunkCheck {
  const ranges: number[] = [];
  const ids = Buffer.allocUnsafe(chunks.length * 32);
  chunks.forEach((c, i) => {
    ranges.push(c.offset, c.length);
    ids.write(c.id, i * 32, 32, 'hex');
  });
  return { key: keys.idKey, ranges, ids };
}

/**
 * The pack-index line of a pack no index describes, from its own table: every chunk is checked
 * against its id (a pack that lies about its chunks is refused). Throws the openPack errors,
 * ERR_ARCHIVE_CHUNK_TAMPERED.
 */
export async function describePack(
  store: ObjectStore,
  codec: FrameCodec,
  job: string,
  keys: ChunkKeys,
  pack: string,
  maxBytes: number,
): Promise<PackLine> {
  const { plain, size, sha256 } = await openPack(store, codec, job, keys, pack, null, maxBytes);
  const object = layout.pack(job, keys.keyId, pack);
  const chunks = readTable(plain);
  if (chunks === null)
    throw new ArchiveError('ERR_ARCHIVE_SHARD_TAMPERED', { object, detail: 'chunk table malformed' });
  for (const c of chunks) {
    if (chunkId(keys, plain.subarray(c.offset, c.offset + c.length)) !== c.id) {
      throw new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', { object, detail: `chunk ${c.id}: table lies` });
    }
  }
  return {
    pack,
    size,
    plainSize: plain.length,
    compression: plain.length === size - 48 ? 'none' : 'zstd',
    sha256: sha256!,
    chunks,
  };
}
