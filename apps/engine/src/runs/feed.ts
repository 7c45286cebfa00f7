/**
 * Bounded read-ahead for the run executor.
 *
 * - `readAhead`: reads the bodies of upcoming small records concurrently (at most `concurrency`
 *   reads and `budgetBytes` buffered), yielding them strictly in order; a large record is passed
 *   through as a stream and never buffered, so memory stays bounded whatever the source holds.
 * - Memory is reused, not allocated per record: with `readInto` (the files connector) each small
 *   record is read into one of `concurrency + 1` fixed slots of `smallBytes`, and a large record
 *   streams through one fixed `largeBuffer` (ReadOptions of @coffer/sources). A run over many
 *   small files otherwise allocates and frees a buffer per file: garbage the collector chases with
 *   full collections, memory the allocator keeps, and a page fault per 4 KiB of every fresh buffer.
 *   A slot is handed back when the consumer asks for the next record, so a yielded body is valid
 *   until then (the archive writer copies each record into its shard buffer before returning).
 */

/**
 * Read memory kept between runs (slots and stream buffers), by size: a run's buffers would
 * otherwise stay allocated until the next full garbage collection while the next run allocates
 * its own. At most a few are kept (about 11 MiB per concurrent run), and only while runs follow one
 * another: once nothing has run for a second the engine drops them (dropReadMemory, from
 * idle-memory.ts), so an idle engine, or one restoring, verifying or drilling (none reads through
 * here), does not hold them.
 */
const idle: Buffer[] = [];
const IDLE_MAX = 4;

/** Memory of `size` bytes for a run's reads: reused when one is idle, else allocated untouched. */
export function takeReadMemory(size: number): Buffer {
  const i = idle.findIndex((b) => b.length === size);
  return i >= 0 ? idle.splice(i, 1)[0]! : Buffer.allocUnsafeSlow(size);
}

/** Hands memory from `takeReadMemory` back once nothing reads into it any more. */
export function giveReadMemory(memory: Buffer): void {
  if (idle.length < IDLE_MAX && !idle.includes(memory)) idle.push(memory);
}

/**
 * Drops the read memory kept for a next run; returns how many buffers were kept. Safe at any time:
 * a buffer kept is in no run's use (each is given back only once nothing reads into it).
 */
export function dropReadMemory(): number {
  const n = idle.length;
  idle.length = 0;
  return n;
}

export interface AheadItem<T> {
  item: T;
  /**
   * The whole body (small records) or a stream (large ones); or the read's error. A body read
   * into a slot is valid until the next item is asked for.
   */
  body: Uint8Array | AsyncIterable<Uint8Array> | null;
  error: unknown;
}

export interface ReadAheadOptions<T> {
  concurrency: number;
  budgetBytes: number;
  smallBytes: number;
  /** Reads a small record whole into `buffer` (a view of it when it fits; see SourceConnector.readInto). */
  readInto?: ((item: T, buffer: Uint8Array) => Promise<Uint8Array>) | undefined;
  /** Scratch memory for the large records' streams (one at a time). */
  largeBuffer?: Uint8Array | undefined;
  /** Items whose body is not read at all: yielded with an empty body, taking no slot. */
  unread?: ((item: T) => boolean) | undefined;
}

const EMPTY = new Uint8Array(0);

interface Pending<T> {
  item: T;
  size: number;
  large: boolean;
  slot: Uint8Array | null;
  /** The read in flight; null for an unread item, whose result is `ready`. */
  promise: Promise<AheadItem<T>> | null;
  ready: AheadItem<T> | null;
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
 * Yields `{ item, body | error }` for every item of `items`, in order. `read(item, buffer)` opens a
 * body (`buffer`: scratch memory for a large record's stream, when configured); items with
 * `sizeOf(item) <= smallBytes` are read whole ahead of time.
 */
export async function* readAhead<T>(
  items: AsyncIterable<T>,
  read: (item: T, buffer: Uint8Array | undefined) => Promise<AsyncIterable<Uint8Array>>,
  sizeOf: (item: T) => number,
  options: ReadAheadOptions<T>,
): AsyncGenerator<AheadItem<T>> {
  const queue: Pending<T>[] = [];
  let buffered = 0;
  // Slots: one per read in flight plus the one the consumer holds, in memory reused across runs.
  const readInto = options.readInto;
  const free: Uint8Array[] = [];
  const memory =
    readInto === undefined ? null : takeReadMemory((options.concurrency + 1) * options.smallBytes);
  if (memory !== null) {
    for (let i = 0; i <= options.concurrency; i++)
      free.push(memory.subarray(i * options.smallBytes, (i + 1) * options.smallBytes));
  }
  const start = (item: T): Pending<T> => {
    if (options.unread?.(item) === true) {
      // No promise of its own: on a run with nothing changed every record is unread.
      const ready = { item, body: EMPTY, error: null };
      return { item, size: 0, large: false, slot: null, promise: null, ready };
    }
    const size = sizeOf(item);
    const small = size <= options.smallBytes;
    const slot = small && readInto !== undefined ? (free.pop() ?? null) : null;
    const promise = (async (): Promise<AheadItem<T>> => {
      try {
        if (slot !== null) return { item, body: await readInto!(item, slot), error: null };
        const stream = await read(item, small ? undefined : options.largeBuffer);
        return { item, body: small ? await collect(stream) : stream, error: null };
      } catch (error) {
        return { item, body: null, error };
      }
    })();
    // A rejected read is reported in order; never an unhandled rejection meanwhile.
    promise.catch(() => undefined);
    return { item, size: small ? size : 0, large: !small, slot, promise, ready: null };
  };
  const it = items[Symbol.asyncIterator]();
  let done = false;
  // A large record is streamed by the consumer (through the one large buffer): no read is opened
  // beyond it until it has been consumed.
  let largeQueued = false;
  try {
    for (;;) {
      while (
        !done &&
        !largeQueued &&
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
        if (p.large) largeQueued = true;
      }
      const head = queue.shift();
      if (!head) return;
      const result = head.ready ?? (await head.promise!);
      buffered -= head.size;
      yield result;
      // The consumer asked for the next item: it is done with this one's memory.
      if (head.slot !== null) free.push(head.slot);
      if (head.large) largeQueued = false;
    }
  } finally {
    // Stopped early: let the reads in flight finish (they write into the slots) and close the
    // streams opened ahead, before the memory can serve another run.
    for (const p of queue) {
      if (p.promise === null) continue;
      const r = await p.promise;
      if (r.body !== null && !(r.body instanceof Uint8Array))
        await (r.body as AsyncGenerator).return?.(undefined)?.catch(() => undefined);
    }
    if (memory !== null) giveReadMemory(memory);
    if (!done) await it.return?.();
  }
}
