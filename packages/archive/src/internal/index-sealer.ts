/**
 * A 0.2 run index sealed while it grows (docs/archive-format.md §5, §12.6).
 *
 * Record lines are cut into frames of at most 1 MiB of whole lines as they are added, and each
 * full frame is sealed at once, so the writer holds the index as sealed frames (about a third of
 * the lines' size, compressed) rather than every line until the end: a first run over 200,000
 * files held ~100 MB of index lines as strings until its commit. The header states the record and
 * pack counts, so it is sealed last, alone, as frame 0; then come the frames sealed meanwhile,
 * then the rest of the record lines and the pack references, the last frame final. §5 asks only
 * for whole lines and at most 1 MiB per frame, which every frame here keeps.
 *
 * The frames are sealed on the writer's thread, not a codec worker: measured on the 1 GiB bench
 * set, sealing them on the worker took the index's 60-90 ms off the end of a run with nothing
 * changed, but starting the worker for it (such a run reads no record and seals no pack) added
 * 20-25 MiB to its peak, and 15-20 MiB to a run with changes, which crossed the 256 MiB target.
 *
 * A frame is cut only when a line follows it, so a frame sealed ahead is never the last one. An
 * index that never filled a frame is sealed at the end exactly as before (`sealLines`: the header
 * and the lines together, from frame 0), so small runs' index bytes do not change.
 */
import { utf8 } from './bytes.ts';
import { INDEX_CHUNK_BYTES, indexChunks } from './index-codec.ts';
import {
  type FrameSealing,
  joinFrames,
  type SealedIndex,
  sealChunks,
  sealIndexFrame,
  sealLines,
} from './sealed-lines.ts';

export class IndexSealer {
  readonly #o: FrameSealing;
  /** Record lines not yet in a frame, and their size with newlines. */
  #pending: string[] = [];
  #pendingBytes = 0;
  #records = 0;
  /** Frames 1, 2, ... sealed ahead, in order. */
  #ahead: Uint8Array[] = [];

  constructor(sealing: FrameSealing) {
    this.#o = sealing;
  }

  /** Record lines added so far. */
  get records(): number {
    return this.#records;
  }

  /** Adds the next record line; seals the lines before it when it would overflow their frame. */
  add(line: string): void {
    const n = Buffer.byteLength(line, 'utf8') + 1;
    if (this.#pendingBytes + n > INDEX_CHUNK_BYTES && this.#pending.length > 0) {
      const plain = utf8(`${this.#pending.join('\n')}\n`);
      this.#ahead.push(sealIndexFrame(this.#ahead.length + 1, false, plain, this.#o));
      this.#pending = [];
      this.#pendingBytes = 0;
    }
    this.#pending.push(line);
    this.#pendingBytes += n;
    this.#records++;
  }

  /** The sealed index: `header` first, then every record line, then `after` (the pack references). */
  finish(header: string, after: readonly string[]): SealedIndex {
    const o = this.#o;
    const rest = [...this.#pending, ...after];
    this.#pending = [];
    if (this.#ahead.length === 0)
      return sealLines([header, ...rest], o.key, o.binding, o.tag, o.salt, o.compress);
    const frames = [sealIndexFrame(0, false, utf8(`${header}\n`), o), ...this.#ahead];
    this.#ahead = [];
    return joinFrames(sealChunks(indexChunks(rest), frames, o));
  }
}
