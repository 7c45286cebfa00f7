/**
 * Archive reader (format 0.1). See docs/archive-format.md "Read algorithm".
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import type {
  OpenedRun,
  OpenRunOptions,
  ReadManifestOptions,
  RunListing,
  VerifiedManifest,
} from './types.ts';

/** Job ids that have at least one run manifest, sorted. Throws ERR_ARCHIVE_DESTINATION. */
export async function listJobs(_store: ObjectStore): Promise<string[]> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/** Runs (with a manifest) of one job or of every job, sorted by job then run id. */
export async function listRuns(_store: ObjectStore, _job?: string): Promise<RunListing[]> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/**
 * Reads and checks a run's manifest without any secret key: format version first
 * (ERR_ARCHIVE_UNSUPPORTED_VERSION), then the signature (ERR_ARCHIVE_SIGNATURE_MISSING,
 * ERR_ARCHIVE_MANIFEST_TAMPERED, ERR_ARCHIVE_BAD_SIGNATURE, ERR_ARCHIVE_SIGNER_NOT_PINNED), then
 * that the signed job and run id match the path (ERR_ARCHIVE_MANIFEST_REPLAYED).
 */
export async function readRunManifest(
  _store: ObjectStore,
  _options: ReadManifestOptions,
): Promise<VerifiedManifest> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/**
 * Opens a run for reading: `readRunManifest`, then unwraps the data key with the operational or
 * break-glass secret key (ERR_ARCHIVE_WRONG_KEY).
 */
export async function openRun(_store: ObjectStore, _options: OpenRunOptions): Promise<OpenedRun> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}
