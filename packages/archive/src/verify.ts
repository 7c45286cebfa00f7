/**
 * Read-back verification of a whole run (format 0.1).
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from './errors.ts';
import type { VerifyRunOptions, VerifyVerdict } from './types.ts';

/**
 * Reads the whole run back and checks everything: format version, signature (and pin), key
 * unwrap, index digest, every shard's digest and tag, the index's consistency with the shards, and
 * every record's plaintext SHA-384. Never throws for an archive fault: returns `{ ok: false,
 * failure: { code, reason, object } }` naming the first failing object. Throws only
 * ERR_ARCHIVE_INVALID_ARGUMENT for bad options.
 */
export async function verifyRun(_store: ObjectStore, _options: VerifyRunOptions): Promise<VerifyVerdict> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}
