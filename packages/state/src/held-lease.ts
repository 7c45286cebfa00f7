/**
 * The fenced-lease primitive shared by every lease loop of the engine (runs, restore applies,
 * drills): acquire -> fencing token, renewal with that token, `assertHeld()` at the commit point,
 * and an AbortSignal that fires the moment the lease is known lost.
 *
 * Why a renewal that merely fails (the store unreachable) also ends the lease: the holder cannot
 * tell whether another process took it over, so once the lease's last known expiry has passed it
 * must assume it did, and stop, rather than keep writing as a second holder.
 */
import type { HeldLease, Lease, LeasesRepository } from './api.ts';
import { StateError } from './errors.ts';

export interface KeepLeaseOptions {
  /** TTL each renewal extends the lease by. */
  ttlMs: number;
  /** Renewal interval; default a third of the TTL (at least 50 ms). */
  renewEveryMs?: number;
  /** Local clock, compared with the lease's expiry (same clock as the store's `now`). */
  now?: () => number;
  /** Called once when the lease is lost, with the reason (before `signal` aborts). */
  onLost?: (reason: string) => void;
}

export const LEASE_TAKEN = 'the lease was taken over by another holder or released';
export const LEASE_UNRENEWABLE = 'the lease could not be renewed before it expired (state store unreachable)';

/** Keeps an already acquired lease alive; see HeldLease. */
export function keepLease(leases: LeasesRepository, lease: Lease, options: KeepLeaseOptions): HeldLease {
  const now = options.now ?? Date.now;
  const controller = new AbortController();
  let expiresAt = lease.expiresAt;
  let lostReason: string | null = null;
  let stopped = false;
  const token = { name: lease.name, holder: lease.holder, fence: lease.fence };

  const lose = (reason: string): StateError => {
    const error = new StateError('ERR_STATE_LEASE_LOST', `${lease.name}: ${reason}`);
    if (lostReason === null) {
      lostReason = reason;
      clearInterval(timer);
      options.onLost?.(reason);
      controller.abort(error);
    }
    return error;
  };

  const renew = async () => {
    if (stopped || lostReason !== null) return;
    try {
      const l = await leases.renew(token.name, token.holder, options.ttlMs, token.fence);
      if (l === null) lose(LEASE_TAKEN);
      else expiresAt = l.expiresAt;
    } catch {
      if (now() >= expiresAt) lose(LEASE_UNRENEWABLE);
    }
  };
  const timer = setInterval(
    () => void renew(),
    options.renewEveryMs ?? Math.max(50, Math.floor(options.ttlMs / 3)),
  );
  timer.unref();

  return {
    ...token,
    signal: controller.signal,
    get lostReason() {
      return lostReason;
    },
    async assertHeld() {
      if (lostReason !== null) throw lose(lostReason);
      try {
        const l = await leases.assertHeld(token, { extendMs: options.ttlMs });
        expiresAt = l.expiresAt;
      } catch (e) {
        if (e instanceof StateError && e.code === 'ERR_STATE_LEASE_LOST') throw lose(LEASE_TAKEN);
        // Unknown whether it is still held: committing now could make a second holder.
        throw lose(LEASE_UNRENEWABLE);
      }
    },
    async release() {
      stopped = true;
      clearInterval(timer);
      if (lostReason === null) await leases.release(token.name, token.holder, token.fence);
    },
  };
}

/** Acquires `name` for `holder` and keeps it (see keepLease); null when another holder has it. */
export async function holdLease(
  leases: LeasesRepository,
  name: string,
  holder: string,
  options: KeepLeaseOptions,
): Promise<HeldLease | null> {
  const lease = await leases.acquire(name, holder, options.ttlMs);
  return lease === null ? null : keepLease(leases, lease, options);
}
