/**
 * Handing an idle process's worker threads back (see `stopIdleWorkers`).
 */
import { stopIdleCodecWorkers } from './internal/codec-pool.ts';
import { stopIdleHasher } from './internal/record-hash.ts';

/**
 * Stops the archive's worker threads that are idle and returns how many it stopped: the codec
 * workers with nothing in flight, and the record-hash thread when no request is in flight and no
 * record's hash is half-way. For a process about to sit idle (an engine between runs): each thread
 * holds a V8 heap of its own (15-19 MiB resident, measured), and a run that does not need them (an
 * incremental run with nothing changed seals and reads back no pack) would otherwise carry them
 * in its peak. The next writer or reader that needs one starts it again (tens of milliseconds);
 * work in flight is never stopped.
 */
export function stopIdleWorkers(): number {
  return stopIdleCodecWorkers() + (stopIdleHasher() ? 1 : 0);
}
