/**
 * Counting the process's worker threads from the kernel's side, so a test can say that a thread
 * really ended (not only that its owner forgot it). Linux only (/proc).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Node names each worker thread `WorkerThread`; the process's own threads have other names. */
export function workerThreadCount(): number {
  return readdirSync('/proc/self/task').filter((id) => nameOf(id) === 'WorkerThread').length;
}

/** A thread's name, or null when it ended between the listing and the read (not counted). */
function nameOf(id: string): string | null {
  try {
    return readFileSync(`/proc/self/task/${id}/comm`, 'utf8').trim();
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT' || (e as { code?: string }).code === 'ESRCH') return null;
    throw e;
  }
}

/**
 * Waits until the process has `n` worker threads (a terminate or a start is asynchronous), or
 * `timeoutMs`; returns the count then, so the caller asserts it.
 */
export async function waitForWorkerThreads(n: number, timeoutMs = 2000): Promise<number> {
  const until = Date.now() + timeoutMs;
  while (workerThreadCount() !== n && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  return workerThreadCount();
}

/**
 * The worker thread count once it stopped changing for `quietMs` (threads told to stop end
 * asynchronously), or after `timeoutMs`: the baseline a test compares later counts with.
 */
export async function steadyWorkerThreads(quietMs = 200, timeoutMs = 3000): Promise<number> {
  const until = Date.now() + timeoutMs;
  let count = workerThreadCount();
  let since = Date.now();
  while (Date.now() - since < quietMs && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 20));
    const now = workerThreadCount();
    if (now !== count) {
      count = now;
      since = Date.now();
    }
  }
  return count;
}
