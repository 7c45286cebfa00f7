/**
 * Signer trust for `verify` and `extract`. A run's manifest embeds its signer's public key, so a
 * signature alone proves only that whoever wrote the bucket signed it: someone able to write the
 * bucket can re-sign a forged run with a key of their own (docs/archive-format.md, threat model).
 * Only a pinned fingerprint (`--pin-signer`) ties the run to the engine. So without a pin these
 * commands refuse (exit 10) unless the user says, with `--trust-unpinned-signer`, that trusting
 * whatever key signed the run is what they want; the refusal names the fingerprint to pin, after
 * checking that the run is validly signed by it (a tampered run still exits 3).
 */
import { readRunManifest } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import { RecoverError } from '../errors.ts';
import { toRecoverError } from './translate.ts';

interface TrustOptions {
  run: string;
  job: string | undefined;
  pinSigner: string | undefined;
  trustUnpinnedSigner: boolean;
}

/** Throws ERR_RECOVER_SIGNER_UNPINNED (exit 10) when the command neither pins nor trusts the signer. */
export async function requireSignerTrust(
  store: ObjectStore,
  cmd: TrustOptions,
  runLabel: string,
): Promise<void> {
  if (cmd.pinSigner !== undefined || cmd.trustUnpinnedSigner) return;
  let manifest: Awaited<ReturnType<typeof readRunManifest>>;
  try {
    manifest = await readRunManifest(store, {
      runId: cmd.run,
      ...(cmd.job !== undefined ? { job: cmd.job } : {}),
    });
  } catch (e) {
    throw toRecoverError(e, runLabel);
  }
  throw new RecoverError(
    'ERR_RECOVER_SIGNER_UNPINNED',
    `${runLabel}: validly signed by ${manifest.signer}, but no signer is pinned. Check that fingerprint ` +
      `against your record of the engine's signer, then pass --pin-signer ${manifest.signer} ` +
      '(or --trust-unpinned-signer to trust whichever key signed the run)',
    { object: manifest.key },
  );
}
