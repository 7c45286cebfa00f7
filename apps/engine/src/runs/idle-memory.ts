/**
 * Hands a finished run's memory back to the system once the engine has nothing running
 * (docs/operations.md "Memory").
 *
 * Why: after a run the process still holds the archive's cached pack buffers (kept a few seconds
 * for a next pool) and whatever the run's garbage has not yet been collected; V8 collects when it
 * next allocates, which an idle engine hardly does, so the resident size stayed at the run's peak
 * until the next run, and every later run started from there. Measured on the 1 GiB bench set:
 * 300-330 MiB resident after a run; 240-265 MiB with a plain full collection here (and the
 * allocator setting beside it in node-flags.ts, without which freed buffers stay in glibc's heap);
 * 198-228 MiB with the memory-reducing one below.
 *
 * How: once the last run, restore apply, dry run, verify or drill has settled and a second has
 * passed with none started (one started meanwhile cancels it), the archive's cache of shared
 * buffers and the runs' read memory (runs/feed.ts, ~11 MiB) are dropped, its idle worker threads
 * (codec workers, record-hash thread: a V8 heap each, 15-19 MiB resident) are stopped, which the
 * next run that needs them starts again, and, when the engine runs with `--expose-gc` (its own node
 * flags add it), one memory-reducing collection runs with nothing running (V8's "last resort"
 * flavour: full collections until nothing more is freed, compaction, and the freed heap pages
 * handed back to the system). A plain full collection left them mapped: after a run over 200,000
 * files the main heap was 77 MiB, yet 460 MiB (first run) and 600 MiB (nothing changed) stayed
 * resident, 1,868 mappings of V8's 256 KiB pages; with this, 226 and 243 MiB. It takes
 * ~100-115 ms at 20,000 and at 200,000 files (a plain one 45-50 ms at 20,000), spent while nothing
 * runs. V8's own memory reducer did not release them within 20 s.
 *
 * Why a second: the collection stops the event loop while it runs, and a client waiting for the
 * run (the console, a script polling the history) asks right after it settles; at once, its reply
 * waited up to the whole collection (measured 40-60 ms after a 1 GiB run). A scheduler starting
 * the next job within the second skips a collection the next run would make moot.
 */
import { dropSpareBuffers, stopIdleWorkers } from '@coffer/archive';
import { dropReadMemory } from './feed.ts';

export interface IdleMemory {
  /**
   * Something settled: release once, after the delay, neither `busy()` nor any registered
   * activity is busy.
   */
  settled(busy?: () => boolean): void;
  /** Registers work that holds the release back while it reports busy (runs, restores). */
  addActivity(busy: () => boolean): void;
  /**
   * Releases now; returns how many cached buffers were dropped (the archive's pack buffers, and
   * the runs' read memory: feed.ts), how many idle archive worker threads were stopped, and
   * whether a collection ran.
   */
  release(): { buffers: number; readBuffers: number; workers: number; collected: boolean };
  /** Cancels a pending release (engine shutdown). */
  stop(): void;
}

export interface IdleMemoryOptions {
  /** Milliseconds to wait after the last run settles (default 1000). */
  delayMs?: number;
  /** A full collection (default: `globalThis.gc` when the process was started with --expose-gc). */
  gc?: Collector | null;
}

/** `globalThis.gc` under `--expose-gc` (a V8 that does not know the options runs a plain one). */
export type Collector = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** A full, synchronous, memory-reducing collection (see the module comment). */
export const LAST_RESORT = { type: 'major', execution: 'sync', flavor: 'last-resort' } as const;

/** The default wait after the last run settled before its memory is handed back. */
export const IDLE_DELAY_MS = 1000;

export function idleMemory(options: IdleMemoryOptions = {}): IdleMemory {
  const delay = options.delayMs ?? IDLE_DELAY_MS;
  const gc = options.gc === undefined ? ((globalThis as { gc?: Collector }).gc ?? null) : options.gc;
  let timer: NodeJS.Timeout | null = null;
  const activities: (() => boolean)[] = [];
  const release = () => {
    const buffers = dropSpareBuffers();
    const readBuffers = dropReadMemory();
    const workers = stopIdleWorkers();
    if (gc !== null) gc(LAST_RESORT);
    return { buffers, readBuffers, workers, collected: gc !== null };
  };
  const stop = () => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  };
  return {
    settled(busy = () => false) {
      stop();
      timer = setTimeout(() => {
        timer = null;
        if (!busy() && !activities.some((a) => a())) release();
      }, delay);
      timer.unref();
    },
    addActivity(busy) {
      activities.push(busy);
    },
    release,
    stop,
  };
}
