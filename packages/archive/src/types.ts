/**
 * Public types of @coffer/archive (archive format 0.1). The JSON documents are described
 * normatively in docs/archive-format.md; these interfaces mirror them field for field.
 */
import type { Digest, WrappedKey } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import type { ChunkedBase } from './chunked-base.ts';

/** The format `createArchiveWriter` writes (0.1: one self-contained copy per run). */
export const FORMAT_VERSION = '0.1.0';
/** The format `createChunkedWriter` writes (0.2: incremental, deduplicated runs; §12 of the format document). */
export const CHUNKED_FORMAT_VERSION = '0.2.0';
/** The `format` field of every archive JSON document. */
export const FORMAT_NAME = 'coffer-archive';

/** Metadata values are plain JSON scalars, so the index stays canonical-JSON friendly. */
export type MetadataValue = string | number | boolean | null;

/** Per-record metadata. Well-known keys are typed; any other scalar key is kept as is. */
export interface RecordMetadata {
  /** MIME type, e.g. `text/plain`. */
  contentType?: string;
  /** Absolute expiry (RFC 3339), e.g. a KV key's expiration. */
  expiresAt?: string;
  /** Remaining time to live in seconds at capture time. */
  ttlSeconds?: number;
  /** POSIX mode bits of a file. */
  mode?: number;
  /** Modification time (RFC 3339). */
  mtime?: string;
  [key: string]: MetadataValue | undefined;
}

/** What the run was taken from (stored in the signed manifest, so visible to a bucket reader). */
export interface ArchiveSource {
  /** Source connector type, e.g. `files`, `sqlite`, `redis`, `s3`. */
  type: string;
  /** The configured connection name of the source. */
  binding?: string;
  /** Key space / database / bucket. */
  namespace?: string;
  /** Human-readable origin, e.g. a path or URL without credentials. */
  origin?: string;
}

/** One record handed to the writer. */
export interface RecordInput {
  /** Record name (non-empty, well-formed Unicode, at most 4096 UTF-8 bytes). Sealed in the index. */
  name: string;
  /** Defaults to the run's `source.type`. */
  sourceType?: string;
  /** Defaults to the run's `source.binding` (or ''). */
  binding?: string;
  /** Defaults to the run's `source.namespace` (or ''). */
  namespace?: string;
  metadata?: RecordMetadata;
  /** Expected size; a mismatch is reported in the result (`sizeChanged`), never fatal. */
  size?: number;
  /** Record bytes: whole, or streamed (e.g. range reads of a large object). */
  body: Uint8Array | AsyncIterable<Uint8Array>;
  /**
   * Chunked writer only: the source's change token (files: inode, size, times; S3 and Redis: the
   * version the source reports). When the base run holds a record of the same name, size and
   * token, its chunks are referenced and `body` is never read.
   */
  change?: string;
}

/** What `addRecord` returns once the record's bytes are all in the shard stream. */
export interface RecordResult {
  /** Position of the record in the run (0-based). */
  seq: number;
  name: string;
  size: number;
  sha384: Digest;
  /** True when `size` was given and the body had another length (the record keeps the real length). */
  sizeChanged: boolean;
}

/** After each shard is stored durably. */
export interface ShardEvent {
  index: number;
  /** Stored object size (header + ciphertext + tag). */
  size: number;
  /** Plaintext bytes before compression. */
  plainSize: number;
  compression: 'none' | 'zstd';
  /** Records completed so far. */
  recordsDone: number;
}

export interface ArchiveRecipients {
  /** Operational recipient public key (the engine holds the secret half). */
  operational: Uint8Array;
  /** Break-glass recipient public key (only the operator holds the secret half). */
  breakGlass: Uint8Array;
}

export interface ArchiveWriterOptions {
  /** Destination store (already scoped to the destination prefix). */
  store: ObjectStore;
  /** Job id: 1-128 chars of `[A-Za-z0-9._-]`, starting with a letter or digit. */
  job: string;
  /** Run id: same alphabet as `job`. */
  runId: string;
  prevRunId: string | null;
  /** Hybrid signer secret key (from @coffer/crypto generateSigner). */
  signerSecretKey: Uint8Array;
  recipients: ArchiveRecipients;
  source: ArchiveSource;
  /** Plaintext bytes per shard; default 8 MiB, clamped to [64 KiB, 64 MiB]. */
  shardSize?: number;
  /** Compress shards with zstd when it pays (default true); false never compresses. */
  compress?: boolean;
  /** Called after each shard is stored; `exportCheckpoint()` then reflects that shard. */
  onShard?: (event: ShardEvent) => void | Promise<void>;
  /**
   * Called by `finish()` before the commit touches the destination (removing stray shards,
   * storing the index and signature) and again right before the manifest is stored; a throw
   * aborts the commit and fails the writer with that error. The engine checks its run lease's
   * fencing token here, so a holder that lost the lease never commits.
   */
  beforeCommit?: () => void | Promise<void>;
  /** Write `_RECOVERY/` (format pointer, signer public key, README) on finish; default true. */
  writeRecovery?: boolean;
  /** Clock for `startedAt` / `sealedAt`; default `() => new Date()`. */
  now?: () => Date;
  /**
   * Upper bound on shards in this run (default 2^32 - 1, the header field's range); a run that
   * would need more fails with ERR_ARCHIVE_SHARD_ID_OVERFLOW rather than seal a misordered archive.
   */
  maxShards?: number;
  /**
   * Worker threads that compress, encrypt and hash shards (default: cores - 1, at least 1, at most 4, or the
   * COFFER_ARCHIVE_WORKERS environment variable); 0 does all work on the calling thread.
   */
  workers?: number;
}

/** Options of `resumeArchiveWriter`; job, run, recipients and source come from the checkpoint. */
export interface ResumeArchiveWriterOptions {
  store: ObjectStore;
  /** Must be the signer that sealed the checkpoint (a rotated signer cannot resume it). */
  signerSecretKey: Uint8Array;
  /** Operational secret key: the checkpoint is sealed to the operational public key. */
  operationalSecretKey: Uint8Array;
  onShard?: ArchiveWriterOptions['onShard'];
  beforeCommit?: ArchiveWriterOptions['beforeCommit'];
  writeRecovery?: boolean;
  now?: () => Date;
  workers?: number;
}

/** Where a resumed writer continues. The caller re-enumerates its records and skips `recordsDone`. */
export interface ResumePoint {
  job: string;
  runId: string;
  /** Records wholly inside finished shards; the caller feeds records from this position on. */
  recordsDone: number;
  /** Name of the last completed record (for the caller to check its enumeration lines up). */
  lastRecordName: string | null;
  /** Shards already stored (they are never rewritten). */
  shardsDone: number;
  /**
   * Set when the checkpoint falls inside a record: the next `addRecord` must be this record again
   * with its WHOLE body; the writer re-hashes the first `bytesDone` bytes without resealing them and
   * refuses (ERR_ARCHIVE_RESUME_DIVERGENT) when they differ from what was sealed.
   */
  partial: { name: string; bytesDone: number } | null;
}

/** What `finish()` returns. */
export interface RunSummary {
  formatVersion: string;
  job: string;
  runId: string;
  prevRunId: string | null;
  /** Store key of the signed root manifest. */
  manifestKey: string;
  /** SHA-384 of the manifest.json bytes. */
  manifestDigest: Digest;
  signer: Digest;
  records: number;
  /** Plaintext bytes over all records. */
  bytes: number;
  shards: number;
  /** Bytes stored: shards + index + manifest + signature. */
  storedBytes: number;
  startedAt: string;
  sealedAt: string;
}

export interface ArchiveWriter {
  readonly job: string;
  readonly runId: string;
  /**
   * Appends one record (its bytes stream through bounded memory). Records are stored in call
   * order; calls must not overlap. Throws ERR_ARCHIVE_SOURCE_READ (body failed; cause kept),
   * ERR_ARCHIVE_DESTINATION (store failed), ERR_ARCHIVE_RESUME_DIVERGENT, ERR_ARCHIVE_SHARD_ID_OVERFLOW,
   * ERR_ARCHIVE_INVALID_ARGUMENT, ERR_ARCHIVE_INVALID_STATE. After any throw the writer is failed;
   * resume from the last checkpoint.
   */
  addRecord(record: RecordInput): Promise<RecordResult>;
  /**
   * Writer state as of the last stored shard, sealed to the operational key and signed by the
   * signer. Finished shards are never rewritten by a resume.
   */
  exportCheckpoint(): Promise<Uint8Array>;
  /**
   * Seals the final shard, the record index and the signed manifest (and `_RECOVERY/`). Refuses to
   * sign when a shard is missing from the store (ERR_ARCHIVE_TRUNCATED) or the shard list is
   * misordered (ERR_ARCHIVE_SHARD_ID_OVERFLOW).
   */
  finish(): Promise<RunSummary>;
  /** Stops the writer; stored shards stay so a checkpoint can still resume. */
  abort(): Promise<void>;
}

/** One shard as listed in the manifest. */
export interface ManifestShard {
  /** Stored object size in bytes. */
  size: number;
  /** Plaintext bytes (before compression). */
  plainSize: number;
  compression: 'none' | 'zstd';
  /** SHA-384 of the whole stored object. */
  sha384: Digest;
}

/** A wrapped data key, labelled with its role. */
export interface ManifestRecipient extends WrappedKey {
  role: 'operational' | 'break-glass';
}

/** The root manifest document of a 0.1 run (manifest.json), exactly as signed. */
export interface ShardedManifestDocument {
  format: typeof FORMAT_NAME;
  formatVersion: string;
  job: string;
  runId: string;
  prevRunId: string | null;
  startedAt: string;
  sealedAt: string;
  source: ArchiveSource;
  signer: { fingerprint: Digest; publicKey: string };
  recipients: ManifestRecipient[];
  shardSize: number;
  shards: ManifestShard[];
  index: { size: number; sha384: Digest; chunks: number };
  totals: { records: number; bytes: number };
}

/** The root manifest document of a 0.2 run (docs/archive-format.md §12.6), exactly as signed. */
export interface ChunkedManifestDocument {
  format: typeof FORMAT_NAME;
  formatVersion: string;
  job: string;
  runId: string;
  prevRunId: string | null;
  startedAt: string;
  sealedAt: string;
  source: ArchiveSource;
  signer: { fingerprint: Digest; publicKey: string };
  /** The job's chunk key, wrapped for each recipient. */
  recipients: ManifestRecipient[];
  /** keyId of the chunk key (32 hex digits). */
  chunkKey: string;
  chunking: { minSize: number; avgSize: number; maxSize: number; packSize: number };
  index: { size: number; sha384: Digest; chunks: number };
  totals: {
    records: number;
    bytes: number;
    /** Chunk references over all records. */
    chunks: number;
    /** Chunks this run stored (the rest were stored by earlier runs). */
    newChunks: number;
    /** Plaintext bytes this run stored. */
    newBytes: number;
    /** Packs the run's chunks are in. */
    packs: number;
  };
}

/** A run's root manifest: format 0.1 (shards) or 0.2 (chunks and packs). */
export type ManifestDocument = ShardedManifestDocument | ChunkedManifestDocument;

/** True for a 0.2 (chunked) manifest. */
export function isChunkedManifest(doc: ManifestDocument): doc is ChunkedManifestDocument {
  return (doc as { chunkKey?: unknown }).chunkKey !== undefined;
}

/** One chunk of a 0.2 record: its keyed id (64 hex digits) and plaintext length. */
export interface ChunkRef {
  id: string;
  length: number;
}

/** One record of the sealed index, as the reader returns it. */
export interface IndexEntry {
  seq: number;
  name: string;
  size: number;
  sha384: Digest;
  /** 0.1: shard holding the record's first byte. 0.2: -1 (the record is `chunks`). */
  shard: number;
  /** 0.1: offset of that byte in the shard's plaintext. 0.2: -1. */
  offset: number;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: RecordMetadata;
  /** 0.2: the record's chunks in order (their lengths sum to `size`). */
  chunks?: ChunkRef[];
  /** 0.2: the source's change token, when it gave one. */
  change?: string;
}

/** A run found under `jobs/`. */
export interface RunListing {
  job: string;
  runId: string;
  manifestKey: string;
  lastModified?: Date;
}

export interface ReadManifestOptions {
  /** The job; when absent the run id is looked up under every job. */
  job?: string;
  runId: string;
  /** Refuse a manifest signed by any other key (fingerprint `sha384:<hex>`). */
  pinSigner?: string;
  /** Trusted signer public key (the engine's own); refuse any other signer. */
  signerPublicKey?: Uint8Array;
}

/** A manifest whose format version, signature and location were checked. */
export interface VerifiedManifest {
  key: string;
  document: ManifestDocument;
  digest: Digest;
  /** Signer fingerprint. */
  signer: Digest;
  /** True when the signer was pinned (pinSigner) or supplied (signerPublicKey); false = trusted on first use. */
  signerPinned: boolean;
}

export interface OpenRunOptions extends ReadManifestOptions {
  /** Operational or break-glass recipient secret key. */
  secretKey: Uint8Array;
  /** Worker threads that verify and decrypt shards (see ArchiveWriterOptions.workers). */
  workers?: number;
  /**
   * Format 0.2: records already parsed from signed lines of this job, such as the base an engine
   * keeps for the job's next run (a `ChunkedBase`). When the index loads, a line equal to a known
   * record's line is taken as that record (the same text parses to the same entry) instead of
   * being parsed again, so a reader of the kept base's own run shares its records and line text
   * rather than holding a second copy (on a 20,000-file run, about 15-20 MiB of heap). The index's
   * digest, frames and totals are checked either way. A `ChunkedBase` of the run's job and chunk
   * key also lends its chunk map, read-only: the reader reads through it instead of loading every
   * pack index again, when it is still exactly the job's pack indexes (one listing) and names
   * every chunk the run uses; otherwise the reader loads a map of its own. A reader never writes
   * to a lent map (it never scans packs into it) and never hands it on as a base's, so the base
   * stays as it was kept for the job's next run. Ignored for a 0.1 run.
   */
  knownRecords?: KnownRecords;
}

export interface OpenedRun {
  readonly manifest: VerifiedManifest;
  /**
   * The record index in write order. The whole index object is digest-checked against the signed
   * manifest before the first entry is yielded. Throws ERR_ARCHIVE_INDEX_MISSING / _TAMPERED /
   * _INCONSISTENT.
   */
  records(): AsyncIterable<IndexEntry>;
  /**
   * The same records in windows of up to `size` (default 4,096), for a caller that reads a run
   * of any size without holding its index: format 0.2 reads the index again on each call and
   * parses each window as its frames open, keeping nothing (once `records()` loaded the index,
   * its entries are handed out instead); format 0.1 holds its index and hands it out in windows.
   * The index's digest is checked before the first window; whether the index is whole (its
   * counts and totals) is checked before the last window is yielded, so act on the records only
   * once iteration ended without error, or as a verify does (reading, writing nothing that is not
   * put in place later). Throws as `records()` does; ERR_ARCHIVE_INVALID_ARGUMENT for a `size`
   * that is not a positive integer.
   */
  recordWindows(size?: number): AsyncIterable<readonly IndexEntry[]>;
  /**
   * The record's plaintext, in pieces. Every piece comes from a shard whose digest and tag were
   * verified; the record's SHA-384 is checked at the end and a mismatch throws
   * ERR_ARCHIVE_RECORD_TAMPERED, so treat the bytes as final only once iteration ends without error.
   * Reading records in index order decrypts each shard once.
   */
  readRecord(entry: IndexEntry): AsyncIterable<Uint8Array>;
  /**
   * Many records (`entries` from `records()`, in index order, a subset or all), read back in a
   * pipeline: the same checks as `readRecord` (shard digest and tag, record SHA-384), with shards
   * opened ahead on the codec workers and record hashes on the record-hash thread. Each record is
   * yielded only after its SHA-384 matched (a record handed over in parts, `partBytes`: its last
   * part). Its `pieces` are views of the reader's pooled shard
   * buffers (not copies): they stay valid and unchanged until `release()` is called, and are
   * reused afterwards. Release every record (records never released hold their buffers; when all
   * are held the reader waits for one, so release independently of asking for the next record).
   * Throws ERR_ARCHIVE_INVALID_ARGUMENT before reading anything (entries not in increasing `seq`,
   * or one over `maxRecordBytes`), the shard errors, ERR_ARCHIVE_RECORD_TAMPERED,
   * ERR_ARCHIVE_INDEX_INCONSISTENT; every record before the failing one has been yielded.
   * `entries` may also come in windows (`recordWindows`, filtered or not): format 0.2 then plans
   * each window as the one before it is read and holds a few windows at a time, checking each
   * window's entries as it comes (ERR_ARCHIVE_INVALID_ARGUMENT then arrives after the records
   * before it); format 0.1 gathers the windows first.
   */
  readRecords(
    entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
    options?: RecordsReadOptions,
  ): AsyncIterable<RecordRead>;
}

/** One verified record from `OpenedRun.readRecords`, or one part of a record handed over in parts. */
export interface RecordRead {
  entry: IndexEntry;
  /**
   * The plaintext in order (several pieces when the record spans shards; none when empty). For a
   * part, the record's next bytes.
   */
  pieces: Uint8Array[];
  /**
   * Present only for a record handed over in parts (`RecordsReadOptions.partBytes`, format 0.2):
   * its parts come in a row, `index` from 0. Every part's bytes are chunks whose keyed ids
   * verified; the record's SHA-384 is checked before the part with `last: true` is handed over,
   * and a mismatch throws ERR_ARCHIVE_RECORD_TAMPERED instead, so treat the bytes written from
   * earlier parts as final only once the last part arrived.
   */
  part?: { index: number; last: boolean };
  /** Gives the pieces' memory back to the reader (idempotent). */
  release(): void;
}

export interface RecordsReadOptions {
  /**
   * Largest record accepted (default 64 MiB): memory holds a whole record until it verified. A
   * record handed over in parts (over `partBytes`, format 0.2) is never held whole and is accepted
   * whatever its size.
   */
  maxRecordBytes?: number;
  /**
   * Format 0.2 runs: a record larger than this is handed over in parts (`RecordRead.part`), each
   * part once it holds at least this many bytes and the record moves on to another pack, so a
   * consumer that writes each part and releases it holds about a pack per part instead of the
   * whole record. Default: every record whole. A 0.1 run hands every record whole.
   */
  partBytes?: number;
  /** Shard buffers the consumer may hold unreleased without slowing the reader (default 4). */
  holdShards?: number;
  /**
   * Format 0.2 runs: false skips each record's whole-record SHA-384. Every byte is still checked:
   * each pack against its digest and tag, and each chunk against its keyed id in the signed
   * index, so the bytes handed over are exactly the bytes those ids name (which a SHA-384 check of
   * the same index's records has already vouched for). For a second read of records a full read
   * or `verifyRun` has checked, such as a restore's re-verification before each write; it saves
   * the one hash pass over every byte that runs on a thread of its own. A record is then handed
   * over (its last part: `RecordRead.part`) once its chunks matched. Default true; a 0.1 run,
   * whose records have no chunk ids, always checks it.
   */
  checkRecordDigest?: boolean;
}

export interface VerifyProgress {
  shardsDone: number;
  shards: number;
  bytesDone: number;
  bytes: number;
}

export interface VerifyRunOptions extends OpenRunOptions {
  onProgress?: (progress: VerifyProgress) => void;
  /**
   * Format 0.2 only, the writer's read-back of the run it just sealed: read only these packs (the
   * ones the run stored, `ChunkedRunSummary.packIds`) in full, every chunk checked against the keyed
   * id the signed index names (the whole-record SHA-384 is left to a full verify); for every other
   * pack the run references, check that a pack index
   * describes every chunk, that the pack is listed in the store with its recorded size, and that
   * the pack index's digest equals the run's signed pack reference. Those packs were read back in
   * full by the run that stored them. Without it every byte of the run is read (a full verify).
   */
  newPacks?: readonly string[];
  /**
   * Format 0.2 only: on success, return the run as the base of the job's next run
   * (`VerifyVerdict.base`), built from the index and pack indexes this verification read and
   * checked, so the next run need not read them again. Holds the run's records and the job's chunk
   * map in memory: keep it only as long as that is affordable, and check it with
   * `isChunkedBaseCurrent` before use. A base needs the index's signed lines, which a reader from
   * `openRun` does not keep: with `opened`, no base is returned unless this verification loads
   * the index itself.
   */
  keepBase?: boolean;
  /**
   * Format 0.2 only: a run already opened with `openRun` on this same store, verified instead of
   * opened again. The manifest is still read and checked with this call's own signer options
   * (`signerPublicKey`, `pinSigner`), and must be the one the run was opened on (else
   * ERR_ARCHIVE_INVALID_ARGUMENT); its index is used as it was opened and checked; its chunk map
   * is loaded now unless already loaded; every pack is read from the store again and checked in
   * full. Saves a second copy of the index in memory and the time to open it; the reader stays
   * usable afterwards (a restore reads its records again through it). Ignored for a 0.1 run,
   * which is opened again.
   */
  opened?: OpenedRun;
  /**
   * Format 0.2, typically the writer's read-back: records already parsed from signed lines, such
   * as the base the run was written on (a `ChunkedBase` is one). A line of the run's index equal to
   * a known record's line is taken as that record (the same text parses to the same entry) instead
   * of being parsed again; every other line is parsed and checked as usual. The index's digest,
   * frames and totals are checked either way. Saves the time and the transient memory of parsing
   * what did not change; the kept base (`keepBase`) then shares those records with it.
   *
   * A `ChunkedBase` of the same job and chunk key, loaded from this same store, also lends its
   * chunk map: when every pack index the base was built from is still listed, only the pack
   * indexes stored since are read (the run's own, each opened and checked) and the base's map is
   * extended with them in place, which the kept base then shares; when one of them is gone (a
   * prune or repack since), the whole map is loaded again. So a base given here is the base of
   * this run only: do not write another run on it afterwards.
   */
  knownRecords?: KnownRecords;
}

/** Records by name with the signed line each was parsed from (`ChunkedBase` has both). */
export interface KnownRecords {
  readonly lines: ReadonlyMap<string, string>;
  readonly records: ReadonlyMap<string, IndexEntry>;
}

/** The checks `verifyRun` performed (counts are of verified items). */
export interface VerifyChecks {
  formatVersion: boolean;
  signature: boolean;
  signerPinned: boolean;
  keyUnwrapped: boolean;
  index: boolean;
  shards: number;
  records: number;
  bytes: number;
}

export interface VerifyFailure {
  code: string;
  reason: string;
  /** Store key of the object that failed, or null. */
  object: string | null;
  message: string;
}

export interface VerifyVerdict {
  ok: boolean;
  job: string | null;
  runId: string;
  checks: VerifyChecks;
  failure?: VerifyFailure;
  /** With `keepBase`, a verified 0.2 run: the base of the job's next run (`createChunkedWriter`). */
  base?: ChunkedBase;
}

/** `_RECOVERY/FORMAT`. */
export interface RecoveryPointer {
  format: string;
  formatVersion: string;
  /** True when this reader implements the pointer's major.minor. */
  supported: boolean;
  layout: string;
  signer: Digest | null;
}
