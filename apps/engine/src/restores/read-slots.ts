/**
 * Concurrency limits of the restore reads that every role may start: a dry run and a verify read
 * and hash every record in scope (and retention's pack reclaim dry run, `GET
 * /admin/retention/packs`, reads every index of a job), so a viewer looping them could take the CPU
 * and the store's bandwidth from scheduled backups. At most `perEngine` run at once in this process and at most
 * `perCaller` per caller (`ENGINE_RESTORE_READS_PER_ENGINE` / `_PER_CALLER`, docs/configuration.md).
 * A read over either limit is refused at once (the routes answer the specification's 429), never
 * queued: a queue would still let one caller hold the engine's slots for as long as it keeps asking.
 */

export const READS_POLICY = 'restore-reads';

export class ReadSlots {
  readonly perEngine: number;
  readonly perCaller: number;
  private inFlight = 0;
  private readonly byCaller = new Map<string, number>();

  /** Called when a read's slot is given back. */
  private readonly onReleased: (() => void) | undefined;

  constructor(limits: { perEngine: number; perCaller: number }, onReleased?: () => void) {
    this.perEngine = limits.perEngine;
    this.perCaller = limits.perCaller;
    this.onReleased = onReleased;
  }

  /** Reads running now (all callers). */
  get active(): number {
    return this.inFlight;
  }

  /** Takes a slot for `caller`; returns its release (idempotent), or null when a limit is reached. */
  acquire(caller: string): (() => void) | null {
    const mine = this.byCaller.get(caller) ?? 0;
    if (this.inFlight >= this.perEngine || mine >= this.perCaller) return null;
    this.inFlight++;
    this.byCaller.set(caller, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      const left = (this.byCaller.get(caller) ?? 1) - 1;
      if (left <= 0) this.byCaller.delete(caller);
      else this.byCaller.set(caller, left);
      this.onReleased?.();
    };
  }

  /**
   * Runs `work` in a slot of `caller`; `{ busy: true }` (nothing run) when a limit is reached.
   */
  async run<T>(caller: string, work: () => Promise<T>): Promise<{ busy: false; value: T } | { busy: true }> {
    const release = this.acquire(caller);
    if (release === null) return { busy: true };
    try {
      return { busy: false, value: await work() };
    } finally {
      release();
    }
  }
}
