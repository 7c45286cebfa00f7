/**
 * RecordParts: a record handed over in parts by `OpenedRun.readRecords` as one streaming body, and
 * `recordsToWrite`, the records of `readRecords` one item each, whole or as such a body.
 */
import type { IndexEntry, RecordRead } from './types.ts';

/**
 * A record that `readRecords` hands over in parts (`partBytes`), as one streaming body for a
 * writer: each part's pieces in turn, each part released once the writer asked for what follows
 * it, so memory holds a part or two of the record rather than all of it.
 *
 * The body ends after the last part, which the reader hands over only once the record's SHA-384
 * matched (with `checkRecordDigest: false`, once its every chunk matched its keyed id); it throws
 * instead when the reader fails (`fail`, its error unchanged) or the signal aborts
 * (`interrupted()`). A writer that puts the bytes in place only once the body ended (a
 * temporary file renamed at the end, as @coffer/sources' files writer does) therefore never shows
 * a record that did not verify under its name. Call `close()` once the write settled, whatever
 * its outcome: it releases the parts still held (a writer that failed mid-part leaves the body
 * suspended on one) and tells the reader side (`push` returns false) to release the rest.
 */
export class RecordParts {
  #parts: RecordRead[] = [];
  #error: { error: unknown } | undefined;
  #closed = false;
  #wake: (() => void) | undefined;
  #drained: (() => void) | undefined;
  #body: AsyncGenerator<Uint8Array> | undefined;
  #complete = false;
  readonly #signal: AbortSignal | undefined;
  readonly #interrupted: () => Error;

  constructor(signal: AbortSignal | undefined, interrupted: () => Error) {
    this.#signal = signal;
    this.#interrupted = interrupted;
  }

  /** True once the record's last part was pushed (whether or not the write still wanted it). */
  get complete(): boolean {
    return this.#complete;
  }

  /** Queues the record's next part; false (the part released) once the write ended. */
  push(part: RecordRead): boolean {
    if (part.part?.last !== false) this.#complete = true;
    if (this.#closed) {
      part.release();
      return false;
    }
    this.#parts.push(part);
    this.#wake?.();
    return true;
  }

  /** Ends the body with `error` (the reader failed or stopped before the last part). */
  fail(error: unknown): void {
    if (this.#closed || this.#error !== undefined) return;
    this.#error = { error };
    this.#wake?.();
  }

  /** Resolves once no part waits to be written beside the one being written (the reader's back-pressure). */
  async room(): Promise<void> {
    while (this.#parts.length >= 1 && !this.#closed)
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
      });
  }

  /**
   * The write settled (whatever the outcome): every part still held is released, including one
   * a writer that failed mid-part left its body suspended on.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const part of this.#parts.splice(0)) part.release();
    this.#wake?.();
    this.#drained?.();
    this.#body?.return(undefined).catch(() => undefined);
  }

  /** The body to hand the writer (one per feed). */
  body(): AsyncGenerator<Uint8Array> {
    this.#body ??= this.#pieces();
    return this.#body;
  }

  async *#pieces(): AsyncGenerator<Uint8Array> {
    for (;;) {
      while (this.#parts.length === 0 && this.#error === undefined && !this.#closed)
        await new Promise<void>((resolve) => {
          this.#wake = resolve;
        });
      if (this.#error !== undefined) throw this.#error.error;
      if (this.#closed || this.#signal?.aborted) throw this.#interrupted();
      const part = this.#parts.shift()!;
      try {
        yield* part.pieces;
      } finally {
        part.release();
        this.#drained?.();
      }
      if (part.part?.last !== false) {
        this.#closed = true;
        return;
      }
    }
  }
}

/** One record of `readRecords` as a writer takes it: whole (`pieces`), or in parts (`parts`). */
export interface RecordToWrite {
  entry: IndexEntry;
  /** The whole record's plaintext (views of the reader's buffers); null for a record in parts. */
  pieces: Uint8Array[] | null;
  /** A record in parts: its body (`parts.body()`), fed as the reader goes on; else null. */
  parts: RecordParts | null;
  /** Call once the write settled, whatever its outcome (a record in parts: `parts.close()`). */
  release(): void;
}

/**
 * The records of `reads` (a `readRecords` with `partBytes`), one item each, in order. A record in
 * parts comes as soon as its first part does; its later parts go to its body while the consumer
 * asks for the next item (which therefore waits until the writer took all but the last of them:
 * start the write before asking). When the reader fails, or the consumer stops, while a record's
 * parts are still coming, its body ends with that error (or `interrupted()`), so the writer
 * never puts it in place.
 */
export async function* recordsToWrite(
  reads: AsyncIterable<RecordRead>,
  options: { signal?: AbortSignal | undefined; interrupted: () => Error },
): AsyncGenerator<RecordToWrite> {
  let open: RecordParts | null = null;
  try {
    for await (const r of reads) {
      if (open !== null) {
        if (open.push(r) && !r.part!.last) await open.room();
        if (open.complete) open = null;
        continue;
      }
      if (r.part === undefined) {
        yield { entry: r.entry, pieces: r.pieces, parts: null, release: () => r.release() };
        continue;
      }
      const parts = new RecordParts(options.signal, options.interrupted);
      parts.push(r);
      open = parts;
      yield { entry: r.entry, pieces: null, parts, release: () => parts.close() };
    }
  } catch (e) {
    open?.fail(e);
    throw e;
  } finally {
    open?.fail(options.interrupted());
  }
}
