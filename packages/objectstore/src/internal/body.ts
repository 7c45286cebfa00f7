/**
 * Body helpers shared by the drivers. Errors thrown by the caller's own body iterable are tagged
 * as SourceError so a driver can clean up and rethrow the caller's original error unchanged,
 * rather than disguising it as a store failure.
 */
import type { Body } from '../types.ts';

/** Wraps an error thrown by the caller's body iterable. */
export class SourceError extends Error {
  readonly original: unknown;
  constructor(original: unknown) {
    super('body source failed');
    this.original = original;
  }
}

/** Iterates `body` as chunks; errors from the caller's iterable come out as SourceError. */
export async function* chunksOf(body: Body): AsyncGenerator<Uint8Array> {
  if (body instanceof Uint8Array) {
    yield body;
    return;
  }
  const it = body[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (;;) {
      let step: IteratorResult<Uint8Array>;
      try {
        step = await it.next();
      } catch (err) {
        finished = true;
        throw new SourceError(err);
      }
      if (step.done) {
        finished = true;
        return;
      }
      const chunk = step.value;
      if (!(chunk instanceof Uint8Array))
        throw new SourceError(new TypeError('body chunks must be Uint8Array'));
      if (chunk.byteLength > 0) yield chunk;
    }
  } finally {
    // Stop the caller's iterable when the driver gives up early (store error, length mismatch).
    if (!finished) await Promise.resolve(it.return?.()).catch(() => {});
  }
}
