/**
 * The sealed frame of format 0.1 (docs/archive-format.md "Sealed frame"), used for shards (magic
 * `CFSH`, nonce domain 0), record-index chunks (magic `CFIX`, nonce domain 1) and, in format 0.2,
 * packs (magic `CFPK`, nonce domain 2; docs/archive-format.md §12.4):
 *
 *   frame  = header(32) || ciphertext(storedLength) || tag(16)
 *   header = magic(4) || major(1)=0 || minor(1)=1 || flags(1) || reserved(1)=0 || seq(u32 BE)
 *            || plainLength(u32 BE) || storedLength(u32 BE) || runTag(12)
 *   flags  = bit 0 final, bit 1 zstd, bit 2 salted; other bits zero
 *   tail   = runTag[0..6] || salt(6)   when salted (every frame written now)
 *            runTag[0..12]             when not (frames written before salting: still readable)
 *   runTag = SHA-384("coffer/archive/v0.1/run" || lp(job) || lp(runId))
 *   nonce  = domain(1) || salt(6) (0x00 * 6 when not salted) || seq(u32 BE) || final(1)
 *   aad    = "coffer/archive/v0.1/frame" || header || lp(job) || lp(runId)
 *
 * The nonce and associated data bind each frame to its job, run, position and final flag (in the
 * manner of age's STREAM), so a truncated, reordered or transplanted frame fails to open. The salt
 * is drawn at random by every writer session: a resumed run keeps its data key and seals shard
 * numbers again that a crashed session may already have stored, so without it a (key, nonce) pair
 * would seal two plaintexts (fatal for AES-GCM). The salt sits in the header, which is in the
 * associated data and under the manifest's digest, so it cannot be altered. The run tag is a
 * diagnostic only: it lets a reader say "transplanted" rather than "tampered".
 *
 * Why this is one self-contained function taking node:crypto and node:zlib as arguments: the bulk
 * path (SHA-384 of the frame, AES-256-GCM, zstd) runs in worker threads to use both cores, and a
 * worker is started from this function's source text (`codecCore.toString()`, see codec-pool.ts)
 * so it survives bundling into the single-file recovery CLI. The same function runs inline on the
 * main thread for small runs, so there is exactly one implementation. The AEAD is the one the
 * @coffer/crypto contract specifies (AES-256-GCM, 12-byte nonce, 16-byte tag appended); a test
 * opens frames with @coffer/crypto's aeadDecrypt to keep the two in step. Everything it needs must
 * be defined inside it.
 */
import type * as NodeCrypto from 'node:crypto';
import type * as NodeZlib from 'node:zlib';

export interface SealMessage {
  domain: number;
  seq: number;
  final: boolean;
  plain: Uint8Array;
  compress: boolean;
  key: Uint8Array;
  /** lp(job) || lp(runId). */
  binding: Uint8Array;
  runTag: Uint8Array;
  /** The writer session's 6 random nonce bytes (always given by writers; null only in tests of old frames). */
  salt: Uint8Array | null;
  /**
   * A spare buffer to build the frame in (recycled by the caller: a fresh large buffer costs a page
   * fault per 4 KiB on first touch, which is slower than the cipher itself). It may hold `plain`
   * itself at offset 32 (the header's size): the frame is then sealed in place, because each piece
   * of ciphertext is written exactly over the piece of payload it was made from, after reading it
   * (AES-GCM output is as long as its input), and the plaintext is compressed before any of it is
   * overwritten.
   */
  out: Uint8Array | null;
  /** The frame digest's hash: SHA-384 (0.1 shards and indexes, the default) or SHA-256 (0.2 packs). */
  digestAlg?: 'sha384' | 'sha256';
}

export interface SealResult {
  /** A view of `out` (or of a fresh buffer when `out` was missing or too small). */
  frame: Uint8Array;
  /** The SealMessage.digestAlg digest of the whole frame. */
  digest: Uint8Array;
  zstd: boolean;
}

export interface OpenMessage {
  domain: number;
  seq: number;
  final: boolean;
  frame: Uint8Array;
  key: Uint8Array;
  binding: Uint8Array;
  runTag: Uint8Array;
  /**
   * When given, the frame's digest must equal it before anything else is looked at: SHA-256 when it
   * has 32 bytes (0.2 packs), SHA-384 when 48.
   */
  digest: Uint8Array | null;
  /** When given, the frame's plaintext length must equal it. */
  plainLength: number | null;
  /**
   * A spare buffer to decrypt into (see SealMessage.out). It may start where `frame` starts (the
   * reader opens a shard in the pool buffer it was read into): each piece's plaintext is written 32
   * bytes (the header) before the ciphertext it came from, after that ciphertext was consumed, and
   * the header and tag are copied into the decipher before the first write.
   */
  out: Uint8Array | null;
  /**
   * Chunks to check in the opened plaintext (0.2 packs): each range's HMAC-SHA-256 under `key` must
   * equal its id. Done here, on the thread that opened the pack while its bytes are in cache, so
   * the reading thread only moves bytes.
   */
  chunks?: ChunkCheck | null;
}

export interface ChunkCheck {
  /** The chunk-id key (a KeyObject crosses to a worker as a key, not as bytes in the message). */
  key: unknown;
  /** offset, length per chunk, in plaintext coordinates. */
  ranges: number[];
  /** The expected ids, 32 bytes each, in the order of `ranges`. */
  ids: Uint8Array;
}

export type OpenFailure = 'digest' | 'transplanted' | 'misplaced' | 'header' | 'tag' | 'length' | 'chunk';

export type OpenResult =
  | { ok: true; plain: Uint8Array }
  | { ok: false; failure: OpenFailure /** The chunk (its index in ChunkCheck) that failed. */; at?: number };

export interface CodecCore {
  sealFrame(m: SealMessage): SealResult;
  openFrame(m: OpenMessage): OpenResult;
  /** Frees a large temporary buffer now (detaches it) when it spans exactly `whole` bytes of its own. */
  drop(u: Uint8Array, whole?: number): void;
  frameHeader(
    domain: number,
    seq: number,
    final: boolean,
    zstd: boolean,
    plain: number,
    stored: number,
    runTag: Uint8Array,
    salt: Uint8Array | null,
  ): Uint8Array;
}

export function codecCore(crypto: typeof NodeCrypto, zlib: typeof NodeZlib): CodecCore {
  const HEADER = 32;
  const TAG = 16;
  const SALTED = 4; // flags bit 2
  const SALT = 6;
  const TAG_SALTED = 6; // run tag bytes kept in a salted header
  const MAGICS = [
    [0x43, 0x46, 0x53, 0x48], // "CFSH"
    [0x43, 0x46, 0x49, 0x58], // "CFIX"
    [0x43, 0x46, 0x50, 0x4b], // "CFPK" (format 0.2 packs)
  ];
  const LABEL = Buffer.from('coffer/archive/v0.1/frame', 'latin1');
  const PIECE = 256 * 1024; // the cipher runs fastest fed 64-256 KiB pieces
  const SAMPLE = 16 * 1024;
  const SAMPLES = 8;
  const level = { [zlib.constants.ZSTD_c_compressionLevel]: 1 };
  // Compresses into ONE output chunk that can hold any result (zstd's bound), so node:zlib neither
  // glues many small chunks together nor leaves them as garbage: the caller frees that one chunk
  // as soon as it is copied. Pages of the chunk past the output are never touched (not resident).
  function bound(n: number): number {
    return n + (n >>> 8) + 1024;
  }
  function zstd(input: Uint8Array): Buffer {
    return zlib.zstdCompressSync(input, { params: level, chunkSize: bound(input.length) });
  }
  let sampleBuf: Buffer | null = null;
  // Scratch for a compressed payload being decrypted (reused: see SealMessage.out).
  let scratch: Buffer | null = null;
  // Frees a temporary (cipher output, zstd output) right away by detaching its ArrayBuffer, rather
  // than leaving it for a garbage collector that, on a worker doing little JavaScript, may not run
  // for tens of MiB. Only a buffer known to be ours is freed: it starts at the view and has exactly
  // the length its producer allocated (`whole`), so a shared Buffer pool slab is never detached.
  function drop(u: Uint8Array, whole: number = u.byteLength): void {
    const b = u.buffer as ArrayBuffer & { transfer?: (n: number) => ArrayBuffer };
    if (!(b instanceof ArrayBuffer) || typeof b.transfer !== 'function') return;
    if (u.byteOffset !== 0 || b.byteLength !== whole || whole < 65536) return;
    try {
      b.transfer(0);
    } catch {
      // Buffers owned by native code cannot be detached; the collector frees them later.
    }
  }

  function frameHeader(
    domain: number,
    seq: number,
    final: boolean,
    zstd: boolean,
    plain: number,
    stored: number,
    runTag: Uint8Array,
    salt: Uint8Array | null,
  ): Uint8Array {
    const h = Buffer.alloc(HEADER);
    const magic = MAGICS[domain]!;
    for (let i = 0; i < 4; i++) h[i] = magic[i]!;
    h[4] = 0;
    h[5] = 1;
    h[6] = (final ? 1 : 0) | (zstd ? 2 : 0) | (salt !== null ? SALTED : 0);
    h[7] = 0;
    h.writeUInt32BE(seq, 8);
    h.writeUInt32BE(plain, 12);
    h.writeUInt32BE(stored, 16);
    if (salt === null) h.set(runTag.subarray(0, 12), 20);
    else {
      h.set(runTag.subarray(0, TAG_SALTED), 20);
      h.set(salt.subarray(0, SALT), 20 + TAG_SALTED);
    }
    return h;
  }

  // The nonce of the frame whose header is `h` (the salt, when there is one, is read from it).
  function nonce(domain: number, seq: number, final: boolean, h: Uint8Array): Buffer {
    const n = Buffer.alloc(12);
    n[0] = domain;
    if ((h[6]! & SALTED) !== 0) n.set(h.subarray(20 + TAG_SALTED, HEADER), 1);
    n.writeUInt32BE(seq, 7);
    n[11] = final ? 1 : 0;
    return n;
  }

  // Compress only when it pays: estimate from a few spread samples (cheap on random data, which is
  // most of what does not pay), then keep the result only if it saves at least 1/32.
  function maybeCompress(plain: Uint8Array): Uint8Array | null {
    if (plain.length < 64) return null;
    if (plain.length > SAMPLE * SAMPLES * 2) {
      const step = Math.floor((plain.length - SAMPLE) / (SAMPLES - 1));
      if (sampleBuf === null) sampleBuf = Buffer.allocUnsafeSlow(SAMPLE * SAMPLES);
      for (let i = 0; i < SAMPLES; i++)
        sampleBuf.set(plain.subarray(i * step, i * step + SAMPLE), i * SAMPLE);
      const est = zstd(sampleBuf);
      const skip = est.length > sampleBuf.length * 0.9;
      drop(est, bound(sampleBuf.length));
      if (skip) return null;
    }
    const out = zstd(plain);
    if (out.length <= plain.length - (plain.length >>> 5)) return out;
    drop(out, bound(plain.length));
    return null;
  }

  function sealFrame(m: SealMessage): SealResult {
    const packed = m.compress ? maybeCompress(m.plain) : null;
    const payload = packed ?? m.plain;
    const header = frameHeader(
      m.domain,
      m.seq,
      m.final,
      packed !== null,
      m.plain.length,
      payload.length,
      m.runTag,
      m.salt,
    );
    const size = HEADER + payload.length + TAG;
    const frame =
      m.out !== null && m.out.byteLength >= size
        ? Buffer.from(m.out.buffer, m.out.byteOffset, size)
        : Buffer.allocUnsafe(size);
    frame.set(header, 0);
    if (m.salt !== null && m.salt.length !== SALT) throw new RangeError('salt must be 6 bytes');
    const cipher = crypto.createCipheriv('aes-256-gcm', m.key, nonce(m.domain, m.seq, m.final, header));
    cipher.setAAD(Buffer.concat([LABEL, header, m.binding]));
    // The frame digest is taken piece by piece right after each piece is encrypted, while it is
    // still in cache, rather than in a second pass over the whole frame.
    const hash = crypto.createHash(m.digestAlg ?? 'sha384').update(header);
    let o = HEADER;
    for (let p = 0; p < payload.length; p += PIECE) {
      const c = cipher.update(payload.subarray(p, p + PIECE));
      hash.update(c);
      frame.set(c, o);
      o += c.length;
      drop(c);
    }
    const tail = Buffer.concat([cipher.final(), cipher.getAuthTag()]);
    hash.update(tail);
    frame.set(tail, o);
    if (packed !== null) drop(packed, bound(m.plain.length));
    return { frame, digest: hash.digest(), zstd: packed !== null };
  }

  function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
    if (a.length !== b.length) return false;
    let d = 0;
    for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
    return d === 0;
  }

  function diagnose(m: OpenMessage): OpenFailure | null {
    const f = m.frame;
    if (f.length < HEADER + TAG) return 'header';
    const magic = MAGICS[m.domain]!;
    for (let i = 0; i < 4; i++) if (f[i] !== magic[i]) return 'header';
    const tagBytes = (f[6]! & SALTED) !== 0 ? TAG_SALTED : 12;
    if (!sameBytes(f.subarray(20, 20 + tagBytes), m.runTag.subarray(0, tagBytes))) return 'transplanted';
    const view = Buffer.from(f.buffer, f.byteOffset, f.byteLength);
    if (view.readUInt32BE(8) !== m.seq) return 'misplaced';
    return null;
  }

  function openFrame(m: OpenMessage): OpenResult {
    return openBytes(m, m.chunks === undefined ? null : m.chunks);
  }

  /** True when chunk `i` of `check` lies in `plain` and its bytes have its id. */
  function chunkMatches(plain: Uint8Array, check: ChunkCheck, i: number): boolean {
    const start = check.ranges[2 * i]!;
    const end = start + check.ranges[2 * i + 1]!;
    if (end > plain.length) return false;
    const mac = crypto
      .createHmac('sha256', check.key as NodeCrypto.KeyObject)
      .update(plain.subarray(start, end))
      .digest();
    return sameBytes(mac, check.ids.subarray(i * 32, i * 32 + 32));
  }

  /** Checks every chunk of `check` in `plain` (a pass of its own); the first failure, in `ranges` order. */
  function checkChunks(plain: Uint8Array, check: ChunkCheck): OpenResult | null {
    const n = check.ranges.length >> 1;
    for (let i = 0; i < n; i++)
      if (!chunkMatches(plain, check, i)) return { ok: false, failure: 'chunk', at: i };
    return null;
  }

  /**
   * The chunk checks of an uncompressed pack, fed each piece of plaintext as the cipher produces it
   * (still in cache) rather than in a pass of their own over the whole pack afterwards: an 8 MiB
   * pack opened in 14 ms instead of 18 (the HMAC's second read of 8 MiB came from memory, not
   * cache). `verdict` answers exactly as `checkChunks` would, once the tag verified: the first
   * failing chunk in `ranges` order. Chunks that cannot be fed in order (empty, not whole numbers,
   * past the plaintext) are left to it, checked there as before.
   */
  function fusedChunks(check: ChunkCheck, plainLength: number) {
    const { key, ranges, ids } = check;
    const n = ranges.length >> 1;
    const order: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = ranges[2 * i]!;
      const l = ranges[2 * i + 1]!;
      if (Number.isSafeInteger(s) && Number.isSafeInteger(l) && s >= 0 && l > 0 && s + l <= plainLength)
        order.push(i);
    }
    // Pack order already, as readers ask; sorted otherwise so one forward pass meets every range.
    for (let k = 1; k < order.length; k++) {
      if (ranges[2 * order[k]!]! < ranges[2 * order[k - 1]!]!) {
        order.sort((a, b) => ranges[2 * a]! - ranges[2 * b]! || a - b);
        break;
      }
    }
    const macs: (NodeCrypto.Hmac | null)[] = new Array(n).fill(null);
    const verdicts = new Uint8Array(n); // 0: not fed, 1: matched, 2: differs
    let next = 0;
    let active: number[] = [];
    return {
      /** Plaintext bytes [at, at + piece.length), in order, each exactly once. */
      feed(piece: Uint8Array, at: number): void {
        const end = at + piece.length;
        while (next < order.length && ranges[2 * order[next]!]! < end) {
          const i = order[next++]!;
          macs[i] = crypto.createHmac('sha256', key as NodeCrypto.KeyObject);
          active.push(i);
        }
        if (active.length === 0) return;
        const open: number[] = [];
        for (const i of active) {
          const s = ranges[2 * i]!;
          const e = s + ranges[2 * i + 1]!;
          const lo = Math.max(s, at);
          const hi = Math.min(e, end);
          if (hi > lo) macs[i]!.update(piece.subarray(lo - at, hi - at));
          if (e <= end) {
            verdicts[i] = sameBytes(macs[i]!.digest(), ids.subarray(i * 32, i * 32 + 32)) ? 1 : 2;
            macs[i] = null;
          } else open.push(i);
        }
        active = open;
      },
      verdict(plain: Uint8Array): OpenResult | null {
        for (let i = 0; i < n; i++) {
          if (verdicts[i] === 1) continue;
          if (verdicts[i] === 2 || !chunkMatches(plain, check, i))
            return { ok: false, failure: 'chunk', at: i };
        }
        return null;
      },
    };
  }

  /**
   * Whether decrypting `frame` into `out` piece by piece never overwrites ciphertext not yet read:
   * another buffer, or `out` starting no later than the frame's payload.
   */
  function inPlace(out: Uint8Array, frame: Uint8Array): boolean {
    return out.buffer !== frame.buffer || out.byteOffset <= frame.byteOffset + HEADER;
  }

  function openBytes(m: OpenMessage, check: ChunkCheck | null): OpenResult {
    const f = Buffer.from(m.frame.buffer, m.frame.byteOffset, m.frame.byteLength);
    if (m.digest !== null) {
      const d = crypto
        .createHash(m.digest.length === 32 ? 'sha256' : 'sha384')
        .update(f)
        .digest();
      if (!sameBytes(d, m.digest)) return { ok: false, failure: diagnose(m) ?? 'digest' };
    }
    const bad = diagnose(m);
    if (bad !== null) return { ok: false, failure: bad };
    const flags = f[6]!;
    if (f[4] !== 0 || f[5] !== 1 || f[7] !== 0 || (flags & ~7) !== 0) return { ok: false, failure: 'header' };
    if ((flags & 1) !== (m.final ? 1 : 0)) return { ok: false, failure: 'header' };
    const plainLength = f.readUInt32BE(12);
    const stored = f.readUInt32BE(16);
    if (HEADER + stored + TAG !== f.length) return { ok: false, failure: 'header' };
    if (m.plainLength !== null && plainLength !== m.plainLength) return { ok: false, failure: 'length' };
    const zstd = (flags & 2) !== 0;
    if (!zstd && stored !== plainLength) return { ok: false, failure: 'header' };
    const decipher = crypto.createDecipheriv('aes-256-gcm', m.key, nonce(m.domain, m.seq, m.final, f));
    decipher.setAAD(Buffer.concat([LABEL, f.subarray(0, HEADER), m.binding]));
    decipher.setAuthTag(f.subarray(HEADER + stored));
    let payload: Buffer;
    if (m.out !== null && m.out.byteLength >= stored && inPlace(m.out, f)) {
      // Each piece's plaintext lands in `out` at or before where its ciphertext was read from. A
      // compressed payload too: it is inflated into a buffer of its own and only then copied
      // over itself, so no scratch buffer per thread stays allocated for the next pack.
      payload = Buffer.from(m.out.buffer, m.out.byteOffset, stored);
    } else if (m.out !== null && zstd) {
      if (scratch === null || scratch.length < stored) scratch = Buffer.allocUnsafeSlow(Math.max(stored, 1));
      payload = scratch.subarray(0, stored);
    } else {
      payload = Buffer.allocUnsafe(stored);
    }
    const fused = check !== null && !zstd ? fusedChunks(check, plainLength) : null;
    let o = 0;
    for (let p = HEADER; p < HEADER + stored; p += PIECE) {
      const c = decipher.update(f.subarray(p, Math.min(p + PIECE, HEADER + stored)));
      payload.set(c, o);
      fused?.feed(c, o);
      o += c.length;
      drop(c);
    }
    try {
      const tail = decipher.final();
      payload.set(tail, o);
      fused?.feed(tail, o);
    } catch {
      return { ok: false, failure: 'tag' };
    }
    if (!zstd) return (fused === null ? null : fused.verdict(payload)) ?? { ok: true, plain: payload };
    const r = inflate(payload, plainLength, m.out);
    if (!r.ok || check === null) return r;
    return checkChunks(r.plain, check) ?? r;
  }

  /** A compressed payload's plaintext of `plainLength` bytes, in `out` when it fits (OpenMessage.out). */
  function inflate(payload: Buffer, plainLength: number, out: Uint8Array | null): OpenResult {
    let plain: Buffer;
    try {
      // One output chunk one byte larger than expected: no gluing of chunks afterwards, and no
      // second (empty) chunk allocated because the first one filled up exactly.
      plain = zlib.zstdDecompressSync(payload, {
        maxOutputLength: Math.max(plainLength, 1),
        chunkSize: Math.min(Math.max(plainLength + 1, 64), 64 * 1024 * 1024 + 1),
      });
    } catch {
      return { ok: false, failure: 'length' };
    }
    if (plain.length !== plainLength) return { ok: false, failure: 'length' };
    if (out !== null && out.byteLength >= plainLength) {
      const into = Buffer.from(out.buffer, out.byteOffset, plainLength);
      into.set(plain);
      drop(plain, plainLength + 1);
      return { ok: true, plain: into };
    }
    return { ok: true, plain };
  }

  return { sealFrame, openFrame, frameHeader, drop };
}
