/**
 * The set-up acknowledgement (docs/posture.md "Set-up acknowledgement"): an owner's statement that
 * the key set-up is done, accepted only while the engine observes every key a run needs. Kept in
 * the settings store under SETUP_ACK_SETTING (shared by replicas), first acknowledgement wins.
 */
import type { State } from '@coffer/state';
import type { EngineKeys } from '../keys.ts';

export const SETUP_ACK_SETTING = 'setup.acknowledged';

export interface SetupAcknowledgement {
  at: string;
  /** The acknowledging caller's subject, or `admin-token`. */
  by: string;
  /** The key fingerprints observed when it was acknowledged. */
  fingerprints: { signer: string; operational: string; breakGlass: string };
}

/** The stored acknowledgement, or null (also for a row that does not have the expected shape). */
export async function readAcknowledgement(state: State): Promise<SetupAcknowledgement | null> {
  const v = await state.settings.get<SetupAcknowledgement>(SETUP_ACK_SETTING);
  if (typeof v !== 'object' || v === null || typeof v.at !== 'string' || typeof v.by !== 'string')
    return null;
  return v;
}

/** What keeps the keys from being observed present: variable names, empty when ready. */
export function keysMissing(keys: EngineKeys): string[] {
  const missing = [...keys.missing];
  if (keys.breakGlass === null && !missing.includes('ENGINE_BREAK_GLASS_PUBLIC_KEY'))
    missing.push('ENGINE_BREAK_GLASS_PUBLIC_KEY');
  return missing;
}

/**
 * Whether the acknowledgement still describes the keys in force (false when a key changed since,
 * for example a signer key file replaced): set-up state shows it so the owner acknowledges again.
 */
export function acknowledgementCurrent(ack: SetupAcknowledgement, keys: EngineKeys): boolean {
  return (
    ack.fingerprints.signer === keys.signer.fingerprint &&
    ack.fingerprints.operational === keys.operational.fingerprint &&
    ack.fingerprints.breakGlass === (keys.breakGlass?.fingerprint ?? null)
  );
}
