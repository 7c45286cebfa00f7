/**
 * @coffer/archive: archive format 0.1 (docs/archive-format.md is normative).
 *
 * Writer: records are packed in order into numbered shards (bounded plaintext size, zstd when it
 * pays), each sealed with AES-256-GCM under a fresh per-run data key with a nonce and associated
 * data binding job, run, position and a final-shard flag; a sealed record index; a root manifest
 * (canonical JSON) listing every shard's SHA-384, the index digest and the data key wrapped for the
 * operational and break-glass recipients, signed with the hybrid (Ed25519 + ML-DSA-87) signer.
 *
 * Reader: checks the format version first (exactly 0.1.x; anything else is
 * ERR_ARCHIVE_UNSUPPORTED_VERSION), then the signature (optionally pinned), the manifest's location,
 * then each object's digest before decrypting it, and each record's plaintext SHA-384 as it streams.
 * Every failure has its own code naming the object. Secrets never appear in messages.
 */

export {
  type ChunkedBase,
  isChunkedBaseCurrent,
  type LoadChunkedBaseOptions,
  loadChunkedBase,
} from './chunked-base.ts';
export { resumeChunkedWriter } from './chunked-resume.ts';
export {
  type ChunkedRunSummary,
  type ChunkedWriter,
  type ChunkedWriterOptions,
  createChunkedWriter,
  type PackEvent,
} from './chunked-writer.ts';
export {
  ARCHIVE_ERROR_CODES,
  ARCHIVE_ERROR_REASONS,
  ArchiveError,
  type ArchiveErrorCode,
  isArchiveError,
  SPEC_FAILURE_REASONS,
} from './errors.ts';
export { stopIdleWorkers } from './idle-workers.ts';
export { dropSpareBuffers } from './internal/buffer-pool.ts';
export { isChunkedCheckpoint } from './internal/checkpoint.ts';
export { CHUNK_PARAMS, type ChunkParams } from './internal/chunker.ts';
export { MANIFEST_MAX_BYTES, SIGNATURE_MAX_BYTES } from './internal/manifest.ts';
export { readKeyFile } from './key-file.ts';
export { layout } from './layout.ts';
export {
  type ChunkedPruneOptions,
  type ChunkedPrunePlan,
  type ChunkedPruneResult,
  type ChunkedPruneRunOptions,
  type PruneKeyPlan,
  type PruneProgress,
  type PruneRunRead,
  planChunkedPrune,
  pruneChunked,
  rebuildPackIndexes,
} from './prune.ts';
export { isOpenedRunCurrent, listJobs, listRuns, openRun, readRunManifest } from './reader.ts';
export { RecordParts, type RecordToWrite, recordsToWrite } from './record-parts.ts';
export { readRecoveryPointer, readRecoverySigner, writeRecoveryFiles } from './recovery.ts';
export {
  type ArchiveRecipients,
  type ArchiveSource,
  type ArchiveWriter,
  type ArchiveWriterOptions,
  CHUNKED_FORMAT_VERSION,
  type ChunkedManifestDocument,
  type ChunkRef,
  FORMAT_NAME,
  FORMAT_VERSION,
  type IndexEntry,
  isChunkedManifest,
  type KnownRecords,
  type ManifestDocument,
  type ManifestRecipient,
  type ManifestShard,
  type MetadataValue,
  type OpenedRun,
  type OpenRunOptions,
  type ReadManifestOptions,
  type RecordInput,
  type RecordMetadata,
  type RecordRead,
  type RecordResult,
  type RecordsReadOptions,
  type RecoveryPointer,
  type ResumeArchiveWriterOptions,
  type ResumePoint,
  type RunListing,
  type RunSummary,
  type ShardEvent,
  type ShardedManifestDocument,
  type VerifiedManifest,
  type VerifyChecks,
  type VerifyFailure,
  type VerifyProgress,
  type VerifyRunOptions,
  type VerifyVerdict,
} from './types.ts';
export { verifyRun } from './verify.ts';
export { createArchiveWriter, resumeArchiveWriter } from './writer.ts';
