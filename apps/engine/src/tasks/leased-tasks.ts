/**
 * `LeasedTasks`: the one primitive behind every piece of background work that must run in exactly
 * one engine process at a time (backup runs under `run:<job>`, restore applies under
 * `restore-apply:<applyId>`, drills under `drill.session`).
 *
 * What it owns, so that no caller writes its own lease loop:
 * - acquire (or adopt an already acquired lease) and keep it: renewal every third of the TTL with
 *   its fencing token (@coffer/state `keepLease`);
 * - the commit point: a task calls `ctx.lease.assertHeld()` (one fenced compare-and-set in the
 *   store) before each write that only the holder may make; it throws ERR_STATE_LEASE_LOST when
 *   another process has taken the lease over;
 * - abort on a lost lease: `ctx.signal` fires the moment the lease is known lost (taken over, or
 *   unrenewable past its last known expiry), and `ctx.lost` tells the task's clean-up to record
 *   nothing more;
 * - the live map: which tasks of this kind run in this process (`get`, `has`, `size`, `keys`);
 * - graceful stop: `stop()` aborts every live task with `ctx.stopping` set (a task saves what it
 *   must and leaves itself resumable), waits for all of them, and releases their leases.
 *
 * Why the release happens here and not in the task: a task that returns (or throws) is finished
 * with the lease in every case, and a lease that outlived its task would block the next holder
 * for a whole TTL.
 */
import { type HeldLease, keepLease, type Lease, type LeasesRepository } from '@coffer/state';

export interface LeasedTaskContext {
  /** The held lease: `assertHeld()` at each commit point. */
  readonly lease: HeldLease;
  /** Aborted when the lease is lost or the service stops (see `lost` / `stopping`). */
  readonly signal: AbortSignal;
  /** True once the lease is known lost: record nothing more about the task. */
  readonly lost: boolean;
  /** True once `stop()` was called: leave the work resumable rather than cancelled. */
  readonly stopping: boolean;
}

export interface LeasedTaskHandle<T> {
  readonly key: string;
  readonly fence: number;
  /**
   * Settles when the task has ended and its lease is released: with the task's value, or
   * `undefined` when the task threw (the error goes to `onError`).
   */
  readonly done: Promise<T | undefined>;
  /** Aborts this task (its signal fires; the lease is released once it returns). */
  abort(reason?: unknown): void;
}

export interface LeasedTasksOptions {
  leases: LeasesRepository;
  /** This process's holder id (stable across restarts, so it takes its own leases back at once). */
  holder: string;
  /** Lease time-to-live; renewed every third of it. */
  ttlMs: number;
  /** Renewal interval (default a third of the TTL, at least 250 ms). */
  renewEveryMs?: number;
  /** Called once when a task's lease is lost (before its signal aborts). */
  onLost?: (key: string, lease: Lease, reason: string) => void;
  /** Called with an error a task threw (the task had no handler of its own for it). */
  onError?: (key: string, error: unknown) => void;
}

interface Live {
  readonly handle: LeasedTaskHandle<unknown>;
  readonly controller: AbortController;
}

export class LeasedTasks {
  private readonly o: LeasedTasksOptions;
  private readonly live = new Map<string, Live>();
  private stopped = false;

  constructor(options: LeasedTasksOptions) {
    this.o = options;
  }

  get holder(): string {
    return this.o.holder;
  }

  get ttlMs(): number {
    return this.o.ttlMs;
  }

  /** True after `stop()`: no new task starts. */
  get stopping(): boolean {
    return this.stopped;
  }

  get size(): number {
    return this.live.size;
  }

  has(key: string): boolean {
    return this.live.has(key);
  }

  get(key: string): LeasedTaskHandle<unknown> | undefined {
    return this.live.get(key)?.handle;
  }

  keys(): string[] {
    return [...this.live.keys()];
  }

  /** Takes the lease `name` for this holder; null when another holder has it. */
  acquire(name: string): Promise<Lease | null> {
    return this.o.leases.acquire(name, this.o.holder, this.o.ttlMs);
  }

  /** Gives back a lease acquired with `acquire` and never run (a no-op once it was taken over). */
  async release(lease: Lease): Promise<void> {
    await this.o.leases.release(lease.name, lease.holder, lease.fence).catch(() => undefined);
  }

  /**
   * Acquires `name` and runs `task` under it, as `key` in the live map. Null when another holder
   * has the lease, when `key` already runs here, or after `stop()`.
   */
  async run<T>(
    key: string,
    name: string,
    task: (ctx: LeasedTaskContext) => Promise<T>,
  ): Promise<LeasedTaskHandle<T> | null> {
    if (this.stopped || this.live.has(key)) return null;
    const lease = await this.acquire(name);
    if (lease === null) return null;
    if (this.stopped || this.live.has(key)) {
      await this.release(lease);
      return null;
    }
    return this.adopt(key, lease, task);
  }

  /**
   * Runs `task` under a lease this holder already acquired (the caller decided under it that the
   * task should run). Throws when `key` already runs here (a caller bug: two tasks, one lease).
   */
  adopt<T>(key: string, lease: Lease, task: (ctx: LeasedTaskContext) => Promise<T>): LeasedTaskHandle<T> {
    if (this.live.has(key)) throw new Error(`leased task ${key} is already running in this process`);
    const controller = new AbortController();
    const held = keepLease(this.o.leases, lease, {
      ttlMs: this.o.ttlMs,
      renewEveryMs: this.o.renewEveryMs ?? Math.max(250, Math.floor(this.o.ttlMs / 3)),
      onLost: (reason) => {
        this.o.onLost?.(key, lease, reason);
        controller.abort(held.signal.reason);
      },
    });
    const isStopping = () => this.stopped;
    const ctx: LeasedTaskContext = {
      lease: held,
      signal: controller.signal,
      get lost() {
        return held.lostReason !== null;
      },
      // Read at the time of asking, so a stop after the start is seen by the task.
      get stopping() {
        return isStopping();
      },
    };
    const done = (async (): Promise<T | undefined> => {
      try {
        return await task(ctx);
      } catch (error) {
        this.o.onError?.(key, error);
        return undefined;
      } finally {
        this.live.delete(key);
        await held.release().catch(() => undefined);
      }
    })();
    const handle: LeasedTaskHandle<T> = {
      key,
      fence: lease.fence,
      done,
      abort: (reason) => controller.abort(reason),
    };
    this.live.set(key, { handle, controller });
    return handle;
  }

  /** Resolves when no task of this service is live. */
  async idle(): Promise<void> {
    while (this.live.size > 0) await Promise.allSettled([...this.live.values()].map((l) => l.handle.done));
  }

  /**
   * Graceful stop: no new task starts; every live task is aborted with `stopping` set, and this
   * resolves once each has returned and released its lease.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const l of this.live.values()) l.controller.abort(new Error('the engine is stopping'));
    await this.idle();
  }

  /** Allows new tasks again after `stop()` (a service restarted in the same process). */
  resume(): void {
    this.stopped = false;
  }
}
