/**
 * The reclaim marker: retention's pack reclaim of a job announces itself to the readers of the
 * job's runs (restore applies and drills), which announce themselves to it with retention pins
 * (pins.ts). A reclaim repacks packs and deletes the old ones, so a reader that planned its pack
 * visits before would find them gone half-way.
 *
 * Why both sides write before they read: the reclaim sets this marker and then reads the pins; a
 * reader takes its pin and then reads the marker. Both go through the one state store and each
 * write is committed before the read that follows it, so whichever side writes second sees the
 * other's write: either the reclaim finds the pin and stands down, or the reader finds the marker
 * and refuses to start (409, try again), never both missing each other.
 *
 * The marker is `retention.reclaiming.<job>` = `{ job, holder, fence, since }`, set while the
 * reclaim holds the job's run lock (retention.ts `JobExclusive`) and deleted when it ends. A marker
 * left by a crashed engine is recognised as stale: it counts only while the job's run lock is held,
 * unexpired, by the holder it names under the fence it names. (The fence, because an engine takes
 * its own leases back at once after a restart: the same holder running the job afterwards must not
 * count as the reclaim it crashed in; every acquisition raises the fence, a renewal keeps it.)
 */
import type { State } from '@coffer/state';
import { runLock } from './instance-id.ts';

export const RECLAIM_PREFIX = 'retention.reclaiming.';

/** What a trigger, a restore apply or a drill refused during a reclaim answers (409). */
export const RECLAIM_REFUSAL = 'job packs are being reclaimed by retention: try again shortly';

interface ReclaimMarker {
  job: string;
  holder: string;
  fence: number;
  since: string;
}

/**
 * Announces a reclaim of `job` under the run lock `holder` holds with `fence` (call under the job's
 * hold, before reading the pins).
 */
export async function markReclaim(
  state: State,
  job: string,
  hold: { holder: string; fence: number },
  now: Date,
): Promise<void> {
  const marker: ReclaimMarker = { job, holder: hold.holder, fence: hold.fence, since: now.toISOString() };
  await state.settings.set(`${RECLAIM_PREFIX}${job}`, marker);
}

/** Ends the announcement (best effort: a marker left behind is stale once the hold is gone). */
export async function clearReclaim(state: State, job: string): Promise<void> {
  await state.settings.delete(`${RECLAIM_PREFIX}${job}`).catch(() => undefined);
}

/**
 * True when a reclaim of `job` is under way (of any job when `job` is null: a restore by bare run
 * id may not know its job). Call after taking the reader's pin. Throws when the state store cannot
 * be read: the caller then does not start.
 */
export async function reclaimUnderWay(state: State, job: string | null, now: Date): Promise<boolean> {
  const markers =
    job === null
      ? (await state.settings.list(RECLAIM_PREFIX)).map((e) => e.value)
      : [await state.settings.get(`${RECLAIM_PREFIX}${job}`)];
  for (const value of markers) {
    const m = value as Partial<ReclaimMarker> | null | undefined;
    if (!m || typeof m.job !== 'string' || typeof m.holder !== 'string' || typeof m.fence !== 'number')
      continue;
    const lease = await state.leases.get(runLock(m.job));
    if (lease?.holder === m.holder && lease.fence === m.fence && lease.expiresAt > now.getTime()) return true;
  }
  return false;
}
