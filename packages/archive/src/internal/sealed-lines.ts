/**
 * Lines sealed as index frames (docs/archive-format.md §4-5: magic CFIX, nonce domain 1, at most
 * 1 MiB of whole lines per frame, the last one final): a run's index.bin in 0.1 and 0.2, and a 0.2
 * pack index, each under its own key and binding.
 */
import { createHash } from 'node:crypto';
import { type Digest, formatDigest } from '@coffer/crypto';
import { utf8Decode } from './bytes.ts';
import { core } from './codec-pool.ts';
import { indexChunks } from './index-codec.ts';

export interface SealedIndex {
  /** The frames one after the other. */
  bytes: Uint8Array;
  size: number;
  digest: Digest;
  chunks: number;
}

/** The key, binding and session salt index frames are sealed under (§4). */
export interface FrameSealing {
  key: Uint8Array;
  binding: Uint8Array;
  tag: Uint8Array;
  salt: Uint8Array;
  compress: boolean;
}

/** Seals lines into index frames (at most 1 MiB of whole lines each) under `key`. */
export function sealLines(
  lines: readonly string[],
  key: Uint8Array,
  binding: Uint8Array,
  tag: Uint8Array,
  salt: Uint8Array,
  compress: boolean,
): SealedIndex {
  // Each chunk's plaintext is cut as it is sealed, one ahead (to know which frame is final): the
  // whole index's plaintext (~100 MB for 200,000 records) is never held beside its frames.
  return joinFrames(sealChunks(indexChunks(lines), [], { key, binding, tag, salt, compress }));
}

/** One index frame of sequence number `seq`. */
export function sealIndexFrame(seq: number, final: boolean, plain: Uint8Array, o: FrameSealing): Uint8Array {
  return core.sealFrame({
    domain: 1,
    seq,
    final,
    plain,
    compress: o.compress,
    key: o.key,
    binding: o.binding,
    runTag: o.tag,
    salt: o.salt,
    out: null,
  }).frame;
}

/**
 * Seals `chunks` after the frames already in `frames` (numbered on from them), the last one
 * final, and returns `frames`. Each chunk is cut as it is sealed, one ahead.
 */
export function sealChunks(
  chunks: Iterator<Uint8Array>,
  frames: Uint8Array[],
  o: FrameSealing,
): Uint8Array[] {
  let next = chunks.next();
  while (next.done !== true) {
    const plain = next.value;
    next = chunks.next();
    frames.push(sealIndexFrame(frames.length, next.done === true, plain, o));
  }
  return frames;
}

/** The frames one after the other, with their size, SHA-384 and count. */
export function joinFrames(frames: readonly Uint8Array[]): SealedIndex {
  const hash = createHash('sha384');
  for (const f of frames) hash.update(f);
  const bytes = Buffer.concat(frames);
  return { bytes, size: bytes.length, digest: formatDigest(hash.digest()), chunks: frames.length };
}

/**
 * Opens sealed index frames back into lines; null when a frame is malformed or fails its tag (the
 * caller names the object and the error). The frames must be numbered 0..k-1, the last final.
 * `substitute`, given, is asked for each line as its frame opens and returns the string to keep
 * for it: an equal string the caller already holds, or '' for a line the caller parsed there and
 * then, lets that frame's decoded text go before the next frame opens, rather than every frame's
 * text staying alive under the lines sliced from it. Each frame is authenticated before its lines
 * are handed over; whether the frames make a whole index is judged only once every one opened.
 */
export function openLines(
  bytes: Uint8Array,
  key: Uint8Array,
  binding: Uint8Array,
  tag: Uint8Array,
  substitute?: (line: string) => string,
): string[] | null {
  const lines: string[] = [];
  for (const frame of frameLines(bytes, key, binding, tag)) {
    if (frame === null) return null;
    for (const line of frame) lines.push(substitute === undefined ? line : substitute(line));
  }
  return lines.length > 0 ? lines : null;
}

/**
 * The lines of each sealed index frame in turn, each frame authenticated (tag, sequence number,
 * binding; final only when it is the last) before its lines are yielded; null, and nothing more,
 * when a frame is malformed, fails its tag or does not end in a whole line. Whether the frames
 * make a whole index is for the caller to judge once the last one opened: a caller acting on the
 * lines before then (a streamed read, openChunkedIndex's `window`) acts only on authenticated
 * content, which only a holder of the frames' key could have made.
 */
export function* frameLines(
  bytes: Uint8Array,
  key: Uint8Array,
  binding: Uint8Array,
  tag: Uint8Array,
): Generator<string[] | null> {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let o = 0;
  for (let seq = 0; o < view.length; seq++) {
    const stored = view.length - o < 48 ? -1 : view.readUInt32BE(o + 16);
    const end = o + 32 + stored + 16;
    if (stored < 0 || end > view.length) {
      yield null;
      return;
    }
    const r = core.openFrame({
      domain: 1,
      seq,
      final: end === view.length,
      frame: view.subarray(o, end),
      key,
      binding,
      runTag: tag,
      digest: null,
      plainLength: null,
      out: null,
    });
    let text = '';
    try {
      if (r.ok) text = utf8Decode(r.plain);
    } catch {
      // not UTF-8: refused below, as a frame that does not open
    }
    if (!text.endsWith('\n')) {
      yield null;
      return;
    }
    o = end;
    yield text.slice(0, -1).split('\n');
  }
}
