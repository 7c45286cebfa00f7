/**
 * Retention pins: a run that a restore apply, a drill or a pending restore approval is using is
 * never pruned while the pin holds (docs/runs.md "Retention").
 *
 * A pin is a setting `retention.pin.<id>` in the state store, so it survives an engine restart and
 * every replica on the same store sees it. Its id names what holds it (`apply.<applyId>`,
 * `drill.<sessionId>`, `approval.<approvalId>`), so acquiring twice is idempotent and the holder
 * releases it by the same id. Every pin also carries an expiry, because a holder that crashes never
 * releases: an approval's pin lapses with the approval, an apply's or drill's after `ttlMs`.
 * Expired pins are ignored and swept by the retention pass.
 */
import type { State } from '@coffer/state';

export const PIN_PREFIX = 'retention.pin.';

/** Longest a pin of an apply or a drill holds without being released (a crashed holder's pin). */
export const DEFAULT_PIN_TTL_MS = 7 * 86_400_000;

export type PinPurpose = 'restore-apply' | 'drill' | 'restore-approval';

export interface RetentionPin {
  id: string;
  purpose: PinPurpose;
  /** The job, when the holder knows it (a restore by bare run id may not). */
  job: string | null;
  runId: string;
  createdAt: string;
  expiresAt: string;
}

export const pinId = {
  apply: (applyId: string) => `apply.${applyId}`,
  drill: (sessionId: string) => `drill.${sessionId}`,
  approval: (approvalId: string) => `approval.${approvalId}`,
};

type Settings = Pick<State['settings'], 'get' | 'set' | 'delete' | 'list'>;

/** Pins `runId` until released or `expiresAt` (default now + DEFAULT_PIN_TTL_MS). */
export async function acquirePin(
  settings: Settings,
  pin: {
    id: string;
    purpose: PinPurpose;
    job: string | null;
    runId: string;
    expiresAt?: string | null;
    now?: Date;
  },
): Promise<RetentionPin> {
  const now = pin.now ?? new Date();
  const record: RetentionPin = {
    id: pin.id,
    purpose: pin.purpose,
    job: pin.job,
    runId: pin.runId,
    createdAt: now.toISOString(),
    expiresAt: pin.expiresAt ?? new Date(now.getTime() + DEFAULT_PIN_TTL_MS).toISOString(),
  };
  await settings.set(`${PIN_PREFIX}${pin.id}`, record);
  return record;
}

/** Releases a pin; never throws (a pin left behind lapses at its expiry). */
export async function releasePin(settings: Settings, id: string): Promise<void> {
  await settings.delete(`${PIN_PREFIX}${id}`).catch(() => undefined);
}

/**
 * Pins in force at `now`. Expired ones are deleted on the way (best effort). Throws when the
 * store cannot be read: a caller about to prune must then prune nothing.
 */
export async function activePins(settings: Settings, now: Date): Promise<RetentionPin[]> {
  const out: RetentionPin[] = [];
  for (const { key, value } of await settings.list(PIN_PREFIX)) {
    const pin = value as Partial<RetentionPin> | null;
    if (!pin || typeof pin.runId !== 'string') continue;
    const expires = typeof pin.expiresAt === 'string' ? Date.parse(pin.expiresAt) : Number.NaN;
    // A pin whose expiry cannot be read holds: keeping a run too long loses nothing.
    if (Number.isFinite(expires) && expires <= now.getTime()) {
      await settings.delete(key).catch(() => undefined);
      continue;
    }
    out.push(pin as RetentionPin);
  }
  return out;
}
