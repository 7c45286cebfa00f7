/**
 * A fixed ring of equal-sized byte buffers, allocated once and reused for the whole run.
 *
 * Why: a fresh multi-MiB buffer costs a page fault per 4 KiB on first touch (slower than the
 * cipher) and, once dropped, stays in RSS until its thread's garbage collector runs. A pool with a
 * fixed number of buffers also bounds the memory in flight whatever the record or run size:
 * `acquire()` waits while every buffer is out, which is the pipeline's back-pressure.
 *
 * Buffers are backed by SharedArrayBuffer when asked, so two worker threads (the one sealing a
 * shard and the one hashing the records in it) can read the same bytes without copying or
 * transferring them. A shared buffer's memory is freed only once every thread that saw it has
 * collected its copy of the reference, which a worker doing little JavaScript may not do for a
 * long time; so shared buffers of a disposed pool go to a small process-wide cache for the next
 * pool (the next run, the verify after a seal) rather than being dropped and allocated afresh;
 * a finished 0.2 writer puts its pack buffers there too, for its read-back. A pool takes the
 * smallest cached buffer at least its size. The cache empties itself after a few idle seconds
 * (or at once: dropSpareBuffers).
 */

/** Shared buffers kept for reuse, each a view of its whole SharedArrayBuffer. */
const spare: Uint8Array[] = [];
const SPARE_MAX = 8;
const SPARE_IDLE_MS = 5000;
let spareTimer: ReturnType<typeof setTimeout> | null = null;

/**
 * Puts a shared buffer (any view of it) in the process-wide cache, for the next pool that needs
 * one no larger. A run writer gives its pack buffers here when it is done, so the read-back that
 * follows opens packs into them instead of allocating as many again beside them.
 */
export function putSpare(view: Uint8Array): void {
  if (!(view.buffer instanceof SharedArrayBuffer) || spare.length >= SPARE_MAX) return;
  if (spare.some((b) => b.buffer === view.buffer)) return;
  spare.push(new Uint8Array(view.buffer));
  if (spareTimer !== null) clearTimeout(spareTimer);
  spareTimer = setTimeout(() => {
    spare.length = 0;
    spareTimer = null;
  }, SPARE_IDLE_MS);
  spareTimer.unref?.();
}

/** The smallest cached buffer of at least `size` bytes, taken out of the cache. */
function takeSpare(size: number): Uint8Array | undefined {
  let best = -1;
  for (let i = 0; i < spare.length; i++) {
    const n = spare[i]!.byteLength;
    if (n >= size && (best < 0 || n < spare[best]!.byteLength)) best = i;
  }
  return best < 0 ? undefined : spare.splice(best, 1)[0];
}

/**
 * Empties the archive's process-wide cache of shared buffers now rather than after its few idle
 * seconds, and returns how many it held: for a process about to sit idle (an engine between runs),
 * whose garbage collector can then return their memory. The next writer or reader allocates
 * afresh. Safe at any time: a buffer in the cache is in no one's use.
 */
export function dropSpareBuffers(): number {
  const n = spare.length;
  spare.length = 0;
  if (spareTimer !== null) clearTimeout(spareTimer);
  spareTimer = null;
  return n;
}

/** Shared buffers waiting in the process-wide cache (for tests). */
export function spareBuffers(): number {
  return spare.length;
}

export interface BufferPoolOptions {
  /** Bytes per buffer. */
  size: number;
  /** Most buffers ever allocated (at least 1). */
  count: number;
  /** Back buffers with SharedArrayBuffer (default false: plain ArrayBuffer). */
  shared?: boolean;
}

export class BufferPool {
  readonly size: number;
  readonly count: number;
  private readonly shared: boolean;
  private readonly free: Uint8Array[] = [];
  private readonly owned = new Set<ArrayBufferLike>();
  private readonly out = new Set<ArrayBufferLike>();
  private readonly waiters: ((b: Uint8Array) => void)[] = [];
  private disposed = false;

  constructor(options: BufferPoolOptions) {
    if (!Number.isSafeInteger(options.size) || options.size <= 0) throw new RangeError('pool buffer size');
    if (!Number.isSafeInteger(options.count) || options.count < 1) throw new RangeError('pool buffer count');
    this.size = options.size;
    this.count = options.count;
    this.shared = options.shared ?? false;
  }

  /** Buffers allocated so far (never more than `count`). */
  get allocated(): number {
    return this.owned.size;
  }

  /** Buffers currently handed out. */
  get inUse(): number {
    return this.out.size;
  }

  /** A buffer now if one is free (allocating up to `count`), else null. */
  tryAcquire(): Uint8Array | null {
    if (this.disposed) throw new RangeError('pool disposed');
    let b = this.free.pop();
    if (b === undefined) {
      if (this.owned.size >= this.count) return null;
      // A cached buffer may be larger than this pool's: its users see the pool's size of it.
      const taken = this.shared ? takeSpare(this.size) : undefined;
      b =
        taken === undefined
          ? new Uint8Array(this.shared ? new SharedArrayBuffer(this.size) : new ArrayBuffer(this.size))
          : new Uint8Array(taken.buffer, 0, this.size);
      this.owned.add(b.buffer);
    }
    this.out.add(b.buffer);
    return b;
  }

  /** A buffer, waiting (in FIFO order) until one is released when all are out. */
  acquire(): Promise<Uint8Array> {
    const b = this.waiters.length === 0 ? this.tryAcquire() : null;
    if (b !== null) return Promise.resolve(b);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Whether `view` lies in one of this pool's buffers. */
  owns(view: Uint8Array): boolean {
    return this.owned.has(view.buffer);
  }

  /**
   * Gives a buffer back (any view of it will do). Throws RangeError for a buffer the pool does not
   * own or one already released: either would let two users write the same bytes.
   */
  release(view: Uint8Array): void {
    const buffer = view.buffer;
    if (!this.owned.has(buffer)) throw new RangeError('buffer does not belong to this pool');
    if (!this.out.delete(buffer)) throw new RangeError('buffer released twice');
    const whole = new Uint8Array(buffer, 0, this.size);
    if (this.disposed) {
      this.owned.delete(buffer);
      if (this.shared) putSpare(whole);
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter !== undefined) {
      this.out.add(buffer);
      waiter(whole);
    } else {
      this.free.push(whole);
    }
  }

  /**
   * Ends the pool's use: free buffers (and those released later) go to the process-wide cache when
   * shared. Acquiring afterwards throws.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const b of this.free.splice(0)) {
      this.owned.delete(b.buffer);
      if (this.shared) putSpare(b);
    }
  }
}
