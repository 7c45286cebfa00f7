/**
 * The `_RECOVERY/` prefix: format pointer, current signer public key, plain-text README.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import type { RecoveryPointer } from './types.ts';

/** Reads `_RECOVERY/FORMAT`; null when absent. Throws ERR_ARCHIVE_MANIFEST_MALFORMED, ERR_ARCHIVE_DESTINATION. */
export async function readRecoveryPointer(_store: ObjectStore): Promise<RecoveryPointer | null> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/** Reads `_RECOVERY/signer.pub` (the current signer public key); null when absent. */
export async function readRecoverySigner(_store: ObjectStore): Promise<Uint8Array | null> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/** Writes `_RECOVERY/FORMAT`, `_RECOVERY/signer.pub` and `_RECOVERY/README.txt` (idempotent). */
export async function writeRecoveryFiles(
  _store: ObjectStore,
  _options: { signerPublicKey: Uint8Array },
): Promise<void> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}
