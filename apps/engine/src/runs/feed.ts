/**
 * Bounded read-ahead for the run executor.
 *
 * - `readAhead`: reads the bodies of upcoming small records concurrently (at most `concurrency`
 *   reads and `budgetBytes` buffered), yielding them strictly in order; a large record is passed
 *   through as a stream and never buffered, so memory stays bounded whatever the source holds.
 */

export interface AheadItem<T> {
  item: T;
  /** The whole body (small records) or a stream (large ones); or the read's error. */
  body: Uint8Array | AsyncIterable<Uint8Array> | null;
  error: unknown;
}

interface Pending<T> {
  item: T;
  size: number;
  promise: Promise<AheadItem<T>>;
}

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of stream) {
    parts.push(c);
    n += c.length;
  }
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts, n);
}

/**
 * Yields `{ item, body | error }` for every item of `items`, in order. `read(item)` opens a body;
 * items with `sizeOf(item) <= smallBytes` are read whole ahead of time.
 */
export async function* readAhead<T>(
  items: AsyncIterable<T>,
  read: (item: T) => Promise<AsyncIterable<Uint8Array>>,
  sizeOf: (item: T) => number,
  options: { concurrency: number; budgetBytes: number; smallBytes: number },
): AsyncGenerator<AheadItem<T>> {
  const queue: Pending<T>[] = [];
  let buffered = 0;
  const start = (item: T): Pending<T> => {
    const size = sizeOf(item);
    const small = size <= options.smallBytes;
    const promise = (async (): Promise<AheadItem<T>> => {
      try {
        const stream = await read(item);
        return { item, body: small ? await collect(stream) : stream, error: null };
      } catch (error) {
        return { item, body: null, error };
      }
    })();
    // A rejected read is reported in order; never an unhandled rejection meanwhile.
    promise.catch(() => undefined);
    return { item, size: small ? size : 0, promise };
  };
  const it = items[Symbol.asyncIterator]();
  let done = false;
  try {
    for (;;) {
      while (
        !done &&
        queue.length < options.concurrency &&
        (queue.length === 0 || buffered < options.budgetBytes)
      ) {
        const next = await it.next();
        if (next.done) {
          done = true;
          break;
        }
        const p = start(next.value);
        buffered += p.size;
        queue.push(p);
        // A large record is streamed by the consumer: do not open reads beyond it meanwhile.
        if (sizeOf(next.value) > options.smallBytes) break;
      }
      const head = queue.shift();
      if (!head) return;
      const result = await head.promise;
      buffered -= head.size;
      yield result;
    }
  } finally {
    if (!done) await it.return?.();
  }
}
