/**
 * Typed errors of @coffer/archive. Callers switch on `code` (never on the message or the class).
 * Every error names the object it concerns (`object`, a store key, when there is one) and carries a
 * fixed one-line `reason`. Five reasons are members of the specification's closed list of
 * failed-run reasons and are reproduced verbatim (see SPEC_FAILURE_REASONS); the engine uses them
 * as the run's failure reason. Messages never contain key material or backup bytes: they are built
 * only from codes, store keys, record positions (never record names, which are sealed) and sizes.
 */

/** Every error code this package throws. */
export const ARCHIVE_ERROR_CODES = [
  'ERR_ARCHIVE_INVALID_ARGUMENT',
  'ERR_ARCHIVE_INVALID_STATE',
  'ERR_ARCHIVE_UNSUPPORTED_VERSION',
  'ERR_ARCHIVE_NOT_FOUND',
  'ERR_ARCHIVE_AMBIGUOUS_RUN',
  'ERR_ARCHIVE_MANIFEST_MALFORMED',
  'ERR_ARCHIVE_MANIFEST_TAMPERED',
  'ERR_ARCHIVE_MANIFEST_REPLAYED',
  'ERR_ARCHIVE_SIGNATURE_MISSING',
  'ERR_ARCHIVE_BAD_SIGNATURE',
  'ERR_ARCHIVE_SIGNER_NOT_PINNED',
  'ERR_ARCHIVE_WRONG_KEY',
  'ERR_ARCHIVE_SHARD_MISSING',
  'ERR_ARCHIVE_SHARD_TAMPERED',
  'ERR_ARCHIVE_SHARD_TRANSPLANTED',
  'ERR_ARCHIVE_SHARD_MISPLACED',
  'ERR_ARCHIVE_INDEX_MISSING',
  'ERR_ARCHIVE_INDEX_TAMPERED',
  'ERR_ARCHIVE_INDEX_INCONSISTENT',
  'ERR_ARCHIVE_RECORD_TAMPERED',
  'ERR_ARCHIVE_PACK_MISSING',
  'ERR_ARCHIVE_CHUNK_MISSING',
  'ERR_ARCHIVE_CHUNK_TAMPERED',
  'ERR_ARCHIVE_TRUNCATED',
  'ERR_ARCHIVE_SHARD_ID_OVERFLOW',
  'ERR_ARCHIVE_CHECKPOINT_UNREADABLE',
  'ERR_ARCHIVE_RESUME_DIVERGENT',
  'ERR_ARCHIVE_SOURCE_READ',
  'ERR_ARCHIVE_DESTINATION',
  'ERR_ARCHIVE_INTERNAL',
  'ERR_ARCHIVE_UNSUPPORTED_RUNTIME',
] as const;

export type ArchiveErrorCode = (typeof ARCHIVE_ERROR_CODES)[number];

/**
 * Exact strings from the specification's closed list of failed-run reasons, for the codes that
 * map onto one. The engine puts `error.reason` straight into the run's failure reason for these.
 */
export const SPEC_FAILURE_REASONS = {
  ERR_ARCHIVE_TRUNCATED: 'shard enumeration incomplete (refused to sign a truncated archive)',
  ERR_ARCHIVE_SHARD_ID_OVERFLOW: 'shard id overflow (refused to seal a misordered archive)',
  ERR_ARCHIVE_CHECKPOINT_UNREADABLE:
    'checkpoint unwrap failed (resume state unreadable; signer may have rotated)',
  ERR_ARCHIVE_RESUME_DIVERGENT: 'resume state divergent (mid-record resume refused)',
  ERR_ARCHIVE_INTERNAL: 'internal invariant violated',
} as const satisfies Partial<Record<ArchiveErrorCode, string>>;

/** The fixed one-line reason for each code (spec strings where the specification has one). */
export const ARCHIVE_ERROR_REASONS: Record<ArchiveErrorCode, string> = {
  ERR_ARCHIVE_INVALID_ARGUMENT: 'invalid argument',
  ERR_ARCHIVE_INVALID_STATE: 'writer used after finish, abort or failure',
  ERR_ARCHIVE_UNSUPPORTED_VERSION: 'unsupported archive format version',
  ERR_ARCHIVE_NOT_FOUND: 'run not found',
  ERR_ARCHIVE_AMBIGUOUS_RUN: 'run id exists under several jobs',
  ERR_ARCHIVE_MANIFEST_MALFORMED: 'manifest malformed',
  ERR_ARCHIVE_MANIFEST_TAMPERED: 'manifest changed after signing',
  ERR_ARCHIVE_MANIFEST_REPLAYED: 'manifest replayed from another job or run',
  ERR_ARCHIVE_SIGNATURE_MISSING: 'manifest signature missing',
  ERR_ARCHIVE_BAD_SIGNATURE: 'manifest signature does not verify',
  ERR_ARCHIVE_SIGNER_NOT_PINNED: 'manifest signed by a signer other than the pinned one',
  ERR_ARCHIVE_WRONG_KEY: 'secret key is not a recipient of this run',
  ERR_ARCHIVE_SHARD_MISSING: 'shard missing',
  ERR_ARCHIVE_SHARD_TAMPERED: 'shard tampered (digest or authentication tag mismatch)',
  ERR_ARCHIVE_SHARD_TRANSPLANTED: 'shard transplanted from another run',
  ERR_ARCHIVE_SHARD_MISPLACED: 'shard moved to another position in its run',
  ERR_ARCHIVE_INDEX_MISSING: 'record index missing',
  ERR_ARCHIVE_INDEX_TAMPERED: 'record index tampered',
  ERR_ARCHIVE_INDEX_INCONSISTENT: 'record index inconsistent with the shard list',
  ERR_ARCHIVE_RECORD_TAMPERED: 'record plaintext digest mismatch',
  ERR_ARCHIVE_PACK_MISSING: 'pack missing',
  ERR_ARCHIVE_CHUNK_MISSING: 'referenced chunk not found in any pack',
  ERR_ARCHIVE_CHUNK_TAMPERED: 'chunk does not match its signed id',
  ERR_ARCHIVE_TRUNCATED: SPEC_FAILURE_REASONS.ERR_ARCHIVE_TRUNCATED,
  ERR_ARCHIVE_SHARD_ID_OVERFLOW: SPEC_FAILURE_REASONS.ERR_ARCHIVE_SHARD_ID_OVERFLOW,
  ERR_ARCHIVE_CHECKPOINT_UNREADABLE: SPEC_FAILURE_REASONS.ERR_ARCHIVE_CHECKPOINT_UNREADABLE,
  ERR_ARCHIVE_RESUME_DIVERGENT: SPEC_FAILURE_REASONS.ERR_ARCHIVE_RESUME_DIVERGENT,
  ERR_ARCHIVE_SOURCE_READ: 'record body could not be read',
  ERR_ARCHIVE_DESTINATION: 'destination store error',
  ERR_ARCHIVE_INTERNAL: SPEC_FAILURE_REASONS.ERR_ARCHIVE_INTERNAL,
  ERR_ARCHIVE_UNSUPPORTED_RUNTIME: 'this Node.js cannot read or write archives (zstd missing)',
};

export interface ArchiveErrorOptions {
  /** Store key of the object concerned (e.g. `jobs/j/runs/r/shards/000003.bin`). */
  object?: string;
  /** Extra detail for the message (never secret). */
  detail?: string;
  /** For ERR_ARCHIVE_DESTINATION: the ObjectStoreError code (e.g. ERR_OBJECTSTORE_THROTTLED). */
  storeErrorCode?: string;
  /** For ERR_ARCHIVE_DESTINATION: the store's own error code (e.g. S3 `NoSuchBucket`). */
  storeCode?: string;
  /** The underlying error (kept for the engine's cause digest; never rendered in the message). */
  cause?: unknown;
}

/** Base class of every error @coffer/archive throws. */
export class ArchiveError extends Error {
  readonly code: ArchiveErrorCode;
  /** Fixed one-line reason for `code` (a spec failure reason where one applies). */
  readonly reason: string;
  /** Store key of the object concerned, when there is one. */
  readonly object: string | undefined;
  readonly storeErrorCode: string | undefined;
  readonly storeCode: string | undefined;

  constructor(code: ArchiveErrorCode, options: ArchiveErrorOptions = {}) {
    const reason = ARCHIVE_ERROR_REASONS[code];
    const parts = [reason];
    if (options.object !== undefined) parts.push(`object ${options.object}`);
    if (options.detail !== undefined) parts.push(options.detail);
    super(parts.join(': '), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ArchiveError';
    this.code = code;
    this.reason = reason;
    this.object = options.object;
    this.storeErrorCode = options.storeErrorCode;
    this.storeCode = options.storeCode;
  }
}

/** True when `e` is an ArchiveError (optionally with the given code). */
export function isArchiveError(e: unknown, code?: ArchiveErrorCode): e is ArchiveError {
  return e instanceof ArchiveError && (code === undefined || e.code === code);
}
