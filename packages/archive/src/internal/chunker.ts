/**
 * Content-defined chunking of record bodies for archive format 0.2: FastCDC (Xia et al., "FastCDC:
 * a Fast and Efficient Content-Defined Chunking Approach for Data Deduplication", USENIX ATC 2016;
 * extended in IEEE TPDS 2020) with normalised chunking at level 2, written here because no
 * well-kept JavaScript implementation exists. The boundaries are part of the format's
 * deduplication behaviour (two runs share a chunk only if both cut it at the same bytes), so the
 * algorithm below is normative and pinned by test/fixtures/chunker/ vectors:
 *
 * 1. Gear table: gear[i] = the first 4 bytes, big-endian, of SHA-256(UTF-8
 *    "coffer/archive/v0.2/gear" || one byte i), for i = 0..255.
 * 2. bits = log2(avgSize); maskS = the top (bits + 2) bits of a 32-bit word set, maskL = the top
 *    (bits - 2) bits set. The most significant bits are used because with a shift-left hash they
 *    are the ones that depend on the last 32 bytes (the low bits depend on the last few only).
 * 3. Each chunk starts with h = 0. Its first minSize bytes are not hashed. For each byte at chunk
 *    position p in [minSize, avgSize): h = ((h << 1) + gear[byte]) mod 2^32, and cut after the
 *    byte when (h & maskS) = 0. For p in [avgSize, maxSize): the same with maskL. A chunk that
 *    reaches maxSize bytes is cut there.
 * 4. The end of a record ends its last chunk whatever its length; chunks never span records (an
 *    empty record has no chunk).
 *
 * The boundaries depend only on the bytes, never on how they are split into pieces when streamed.
 * Nothing here sees keys; the chunker reads plaintext and keeps only a 32-bit hash and a count.
 */
import { createHash } from 'node:crypto';
import { ArchiveError } from '../errors.ts';

export interface ChunkParams {
  /** Bytes at the start of every chunk that are never a boundary (and are not hashed). */
  minSize: number;
  /** Target size: the cut condition is stricter below it and looser above it. */
  avgSize: number;
  /** A chunk is cut at this size if the content has not cut it before. */
  maxSize: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;

/** Format 0.2 defaults: 512 KiB / 1 MiB / 8 MiB. */
export const CHUNK_PARAMS: Readonly<ChunkParams> = Object.freeze({
  minSize: 512 * KIB,
  avgSize: 1 * MIB,
  maxSize: 8 * MIB,
});

/** Smallest allowed minSize and largest allowed maxSize. */
export const CHUNK_SIZE_LIMITS = Object.freeze({ minSize: 64, maxSize: 64 * MIB });

const GEAR_DOMAIN = 'coffer/archive/v0.2/gear';

function makeGear(): Int32Array {
  // Int32Array (not Uint32Array) so the hot loop stays in int32 arithmetic: a Uint32Array element
  // above 2^31 would be loaded as a double. The bits are the same.
  const gear = new Int32Array(256);
  const prefix = Buffer.from(GEAR_DOMAIN, 'utf8');
  for (let i = 0; i < 256; i++) {
    const d = createHash('sha256').update(prefix).update(Uint8Array.of(i)).digest();
    gear[i] = d.readInt32BE(0);
  }
  return gear;
}

const GEAR = makeGear();

/** The gear table as unsigned 32-bit values (a copy; for vectors and documentation). */
export function gearTable(): Uint32Array {
  return new Uint32Array(GEAR.buffer.slice(0));
}

/** The top `k` bits of a 32-bit word set, as an int32 (what `&` works on). */
function topBits(k: number): number {
  return k >= 32 ? -1 : ~(-1 >>> k);
}

function isPowerOfTwo(n: number): boolean {
  return Number.isSafeInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

/** Checks and completes `params` (missing fields take the defaults); throws ERR_ARCHIVE_INVALID_ARGUMENT. */
export function chunkParams(params: Partial<ChunkParams> = {}): ChunkParams {
  const p: ChunkParams = {
    minSize: params.minSize ?? CHUNK_PARAMS.minSize,
    avgSize: params.avgSize ?? CHUNK_PARAMS.avgSize,
    maxSize: params.maxSize ?? CHUNK_PARAMS.maxSize,
  };
  const fail = (why: string): never => {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: `chunk parameters ${p.minSize}/${p.avgSize}/${p.maxSize} (min/avg/max): ${why}`,
    });
  };
  for (const k of ['minSize', 'avgSize', 'maxSize'] as const) {
    // Powers of two keep avgSize = 2^bits exact and the masks well defined.
    if (typeof p[k] !== 'number' || !isPowerOfTwo(p[k])) fail(`${k} must be a power of two`);
  }
  if (p.minSize < CHUNK_SIZE_LIMITS.minSize) fail(`minSize must be at least ${CHUNK_SIZE_LIMITS.minSize}`);
  if (p.maxSize > CHUNK_SIZE_LIMITS.maxSize) fail(`maxSize must be at most ${CHUNK_SIZE_LIMITS.maxSize}`);
  if (!(p.minSize < p.avgSize && p.avgSize < p.maxSize)) fail('need minSize < avgSize < maxSize');
  return p;
}

/**
 * Streaming FastCDC chunker for one record at a time. Feed the record's bytes in pieces of any
 * size with `next`; each boundary it returns ends a chunk, and the chunker starts the next one
 * there. At the record's end the bytes since the last boundary (`pending` of them) are the last
 * chunk; call `reset()` before the next record. No allocation after construction.
 */
export class ContentChunker {
  readonly params: Readonly<ChunkParams>;
  readonly #min: number;
  readonly #avg: number;
  readonly #max: number;
  readonly #maskS: number;
  readonly #maskL: number;
  /** Bytes of the current chunk already scanned (in earlier pieces). */
  #pos = 0;
  /** Gear hash of the current chunk's hashed bytes so far (int32 bits). */
  #h = 0;
  /** The buffer of the last piece and its word view (pieces usually come from a few reused buffers). */
  #wordsOf: ArrayBufferLike | null = null;
  #words: Int32Array | null = null;

  /** Throws ERR_ARCHIVE_INVALID_ARGUMENT for parameters outside the rules of `chunkParams`. */
  constructor(params?: Partial<ChunkParams>) {
    const p = chunkParams(params);
    this.params = Object.freeze(p);
    this.#min = p.minSize;
    this.#avg = p.avgSize;
    this.#max = p.maxSize;
    const bits = Math.log2(p.avgSize);
    this.#maskS = topBits(bits + 2);
    this.#maskL = topBits(bits - 2);
  }

  /** Bytes scanned since the last boundary (or the record's start): the length of the open chunk. */
  get pending(): number {
    return this.#pos;
  }

  /** Starts a new record: forgets the open chunk. */
  reset(): void {
    this.#pos = 0;
    this.#h = 0;
  }

  /**
   * Scans `bytes[from..]` as the continuation of the current chunk. Returns the index in `bytes`
   * just past the next boundary (from < result <= bytes.length; the chunker then starts a new
   * chunk there, so call again with that index as `from`), or -1 when the chunk continues past
   * the end of `bytes` (all of bytes[from..] then belongs to it).
   */
  next(bytes: Uint8Array, from = 0): number {
    const n = bytes.length;
    if (!(Number.isInteger(from) && from >= 0 && from <= n)) {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
        detail: `chunker offset ${from} outside 0..${n}`,
      });
    }
    // base: where the current chunk started, in bytes' coordinates (negative when it started in
    // an earlier piece); chunk position p is at index base + p.
    const base = from - this.#pos;
    let i = from;
    const minEnd = base + this.#min;
    if (i < minEnd) {
      if (minEnd >= n) {
        this.#pos = n - base;
        return -1;
      }
      i = minEnd;
    }
    let h = this.#h;
    if (bytes.buffer !== this.#wordsOf) {
      this.#wordsOf = bytes.buffer;
      this.#words = wordView(bytes.buffer);
    }
    const words = this.#words;
    const offset = bytes.byteOffset;
    const avgEnd = base + this.#avg;
    if (i < avgEnd) {
      const stop = Math.min(avgEnd, n);
      const cut = scan(bytes, i, stop, h, this.#maskS, words, offset);
      if (cut >= 0) return this.#boundary(cut);
      h = scanHash;
      i = stop;
    }
    const maxEnd = base + this.#max;
    if (i < maxEnd) {
      const stop = Math.min(maxEnd, n);
      const cut = scan(bytes, i, stop, h, this.#maskL, words, offset);
      if (cut >= 0) return this.#boundary(cut);
      h = scanHash;
      i = stop;
    }
    if (i === maxEnd) return this.#boundary(i);
    this.#pos = i - base;
    this.#h = h;
    return -1;
  }

  #boundary(end: number): number {
    this.#pos = 0;
    this.#h = 0;
    return end;
  }
}

/** The hash after the last `scan` that found no cut (a module slot: `scan` returns one number). */
let scanHash = 0;

/** Word-at-a-time reads take bytes in memory order only on a little-endian machine. */
const LITTLE_ENDIAN = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/**
 * A 32-bit view of `buffer` for `scan`, or null where the byte path must be used: big-endian
 * machines, and buffers that can change length (a fixed view of them could go out of bounds and
 * read as zeros) or are too large for int32 word indices.
 */
function wordView(buffer: ArrayBufferLike): Int32Array | null {
  const b = buffer as ArrayBufferLike & { resizable?: boolean; growable?: boolean };
  if (!LITTLE_ENDIAN || b.resizable === true || b.growable === true || b.byteLength >= 2 ** 31) return null;
  return new Int32Array(buffer, 0, buffer.byteLength >>> 2);
}

/**
 * The hot loop: hashes bytes[i..stop) into h and returns the index just past the first byte whose
 * hash has no bit of `mask` set, or -1 (with the hash left in scanHash). With a word view of the
 * buffer (`words`, `offset` = bytes.byteOffset) it reads four aligned 32-bit words per round and
 * takes their bytes with shifts, which is faster than sixteen byte loads each with its own bounds
 * check. Every byte is still hashed and checked in order; a boundary can fall on any byte.
 */
function scan(
  bytes: Uint8Array,
  i: number,
  stop: number,
  h: number,
  mask: number,
  words: Int32Array | null,
  offset: number,
): number {
  const gear = GEAR;
  if (words !== null) {
    while (((offset + i) & 3) !== 0 && i < stop) {
      h = ((h << 1) + gear[bytes[i]!]!) | 0;
      i++;
      if ((h & mask) === 0) return i;
    }
    let w = (offset + i) >> 2;
    const wEnd = w + ((stop - i) >> 4) * 4;
    while (w < wEnd) {
      const a = words[w]!;
      const b = words[w + 1]!;
      const c = words[w + 2]!;
      const d = words[w + 3]!;
      h = ((h << 1) + gear[a & 255]!) | 0;
      if ((h & mask) === 0) return i + 1;
      h = ((h << 1) + gear[(a >>> 8) & 255]!) | 0;
      if ((h & mask) === 0) return i + 2;
      h = ((h << 1) + gear[(a >>> 16) & 255]!) | 0;
      if ((h & mask) === 0) return i + 3;
      h = ((h << 1) + gear[a >>> 24]!) | 0;
      if ((h & mask) === 0) return i + 4;
      h = ((h << 1) + gear[b & 255]!) | 0;
      if ((h & mask) === 0) return i + 5;
      h = ((h << 1) + gear[(b >>> 8) & 255]!) | 0;
      if ((h & mask) === 0) return i + 6;
      h = ((h << 1) + gear[(b >>> 16) & 255]!) | 0;
      if ((h & mask) === 0) return i + 7;
      h = ((h << 1) + gear[b >>> 24]!) | 0;
      if ((h & mask) === 0) return i + 8;
      h = ((h << 1) + gear[c & 255]!) | 0;
      if ((h & mask) === 0) return i + 9;
      h = ((h << 1) + gear[(c >>> 8) & 255]!) | 0;
      if ((h & mask) === 0) return i + 10;
      h = ((h << 1) + gear[(c >>> 16) & 255]!) | 0;
      if ((h & mask) === 0) return i + 11;
      h = ((h << 1) + gear[c >>> 24]!) | 0;
      if ((h & mask) === 0) return i + 12;
      h = ((h << 1) + gear[d & 255]!) | 0;
      if ((h & mask) === 0) return i + 13;
      h = ((h << 1) + gear[(d >>> 8) & 255]!) | 0;
      if ((h & mask) === 0) return i + 14;
      h = ((h << 1) + gear[(d >>> 16) & 255]!) | 0;
      if ((h & mask) === 0) return i + 15;
      h = ((h << 1) + gear[d >>> 24]!) | 0;
      if ((h & mask) === 0) return i + 16;
      w += 4;
      i += 16;
    }
  }
  while (i < stop) {
    h = ((h << 1) + gear[bytes[i]!]!) | 0;
    i++;
    if ((h & mask) === 0) return i;
  }
  scanHash = h;
  return -1;
}

/**
 * The cut offsets of one whole record: ascending, each the end of a chunk, the last equal to
 * `bytes.length` (empty for an empty record). Throws ERR_ARCHIVE_INVALID_ARGUMENT for bad params.
 */
export function chunkBoundaries(bytes: Uint8Array, params?: Partial<ChunkParams>): number[] {
  const chunker = new ContentChunker(params);
  const cuts: number[] = [];
  let at = 0;
  for (;;) {
    const end = chunker.next(bytes, at);
    if (end < 0) break;
    cuts.push(end);
    at = end;
  }
  if (at < bytes.length) cuts.push(bytes.length);
  return cuts;
}
