/**
 * Public types of @coffer/restore: the specification's `RestoreRequest` and `RestorePlan`, and the
 * Coffer designs the specification leaves open (`overwriteCheck`, the apply receipt, progress).
 * docs/restore.md is the normative description of every field.
 */
import type { KnownRecords } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { SourceConfig } from '@coffer/sources';
import type { RestoreErrorCode } from './errors.ts';
import type { ResolvedTarget } from './target.ts';

/** `onExisting`: replace what is there (default) or keep it. */
export type OnExisting = 'overwrite' | 'skip';

/** `target`: where records are written instead of their source binding. */
export interface RestoreTargetOverride {
  /** A configured source binding (job id or named restore target) to write into. */
  binding?: string;
  /** files: target directory; sqlite: target database file; redis: database number; s3: key prefix. */
  namespaceId?: string;
  /** s3 only: the bucket to write into (same endpoint and credentials as the binding). */
  bucketName?: string;
}

/** `d1Tables`: a subset of one SQLite database's tables, restored into a fresh database file. */
export interface TableSubset {
  /** The run's database: its binding, its file path or the file's base name (case-insensitive). */
  database: string;
  /** Table names, matched case-insensitively; at least one. */
  tables: string[];
  /** true: create only these tables; false (default): the whole schema, rows of these tables only. */
  createOnly: boolean;
}

/** A validated restore request (see `validateRestoreRequest`). */
export interface RestoreRequest {
  runId: string;
  confirm: boolean;
  target?: RestoreTargetOverride;
  include: string[];
  exclude: string[];
  maxRecords?: number;
  recordName?: string;
  destinationId?: string;
  d1Tables?: TableSubset;
  onExisting: OnExisting;
  /** The plan hash the caller reviewed; an apply refuses when the recomputed plan differs. */
  planHash?: string;
}

/** One `sample` row of a plan. */
export interface PlanSampleRow {
  name: string;
  sourceType: string;
  binding: string;
  namespace: string;
  plaintextSize: number;
  /** Key-value and object rows only: whether the key exists in the target (absent when unchecked or the check failed). */
  targetExists?: boolean;
}

export interface SkippedEntry {
  name: string;
  reason: string;
}

export interface DependencyWarning {
  database: string;
  table: string;
  missingParent: string;
}

export interface FidelityWarning {
  name: string;
  reason: string;
  /** `(kv expirations)`: keys whose expiry had passed at planning time (an apply does not write them). */
  expired?: number;
  /** `(kv expirations)`: keys that expire after planning and before `applyDeadline`. */
  expiringBeforeDeadline?: number;
}

/**
 * Coffer's `overwriteCheck`: what is already in the target for the planned writes, checked with
 * the connector's `exists` on up to `limit` records in plan order.
 */
export interface OverwriteCheck {
  onExisting: OnExisting;
  /** Records checked. */
  checked: number;
  /** Checked records that exist in the target (overwritten, or skipped with `onExisting: skip`). */
  existing: number;
  /** Checked records absent from the target. */
  absent: number;
  /** Checks that failed (the target could not answer). */
  unknown: number;
  /** True when every planned write was checked (`checked === plannedWrites`). */
  complete: boolean;
  /** Most records checked in one plan. */
  limit: number;
}

/** Where an apply writes (no secrets). */
export interface PlanTarget {
  type: string;
  binding: string;
  /** Directory, database file, `db<N>` (plus the key prefix) or bucket (plus prefix). */
  namespace: string;
  description: string;
}

/**
 * A reason an apply of this plan would be refused, reported by a dry run (or verify) instead of an
 * error status: `code` is the error code the apply answers with, `message` its sentence.
 */
export interface PlanAdvisory {
  code: string;
  message: string;
}

/**
 * One more condition on where an apply writes (for example a connection that does not allow
 * restores): null when allowed, else the refusal. An apply throws it as a RestoreError; a dry run
 * reports it in `advisories` and leaves the target untouched.
 */
export type TargetCheck = (
  target: ResolvedTarget,
) =>
  | Promise<{ code: RestoreErrorCode; message: string } | null>
  | { code: RestoreErrorCode; message: string }
  | null;

/** The dry-run reply (`RestorePlan`). */
export interface RestorePlan {
  ok: boolean;
  /** Set when `ok` is false: why the posture cannot read back. */
  reason?: string;
  /** `record-not-found` when `recordName` matched nothing (an empty plan, `ok` true). */
  result?: 'record-not-found';
  runId: string;
  /**
   * The run whose archive holds the records: `runId` itself, or, for a run recorded `ok` with
   * `unchangedFrom` (skipUnchanged), the run the chain leads to. Absent when the run was not found.
   */
  archiveRunId?: string;
  job: string | null;
  mode: 'dry-run';
  recordsVerified: number;
  isLatest: boolean;
  plannedWrites: number;
  bytes: number;
  plannedAt: string;
  applyDeadline: string;
  sample: PlanSampleRow[];
  skipped: SkippedEntry[];
  /** Records not written in total (`skipped` lists at most 1000 of them). */
  skippedCount: number;
  dependencyWarnings: DependencyWarning[];
  fidelityWarnings: FidelityWarning[];
  overwriteCheck: OverwriteCheck | null;
  target: PlanTarget | null;
  onExisting: OnExisting;
  /** `sha384:<hex>` over the plan document (docs/restore.md), or null when `ok` is false. */
  planHash: string | null;
  /** Why an apply of this plan would be refused (empty: nothing known against it). */
  advisories: PlanAdvisory[];
}

/**
 * Resolves a binding name to the connector configuration of that source (secrets loaded), or
 * null when the binding is not configured. The engine maps job ids and named restore targets.
 */
export type TargetResolver = (
  binding: string,
  context: { job: string; sourceType: string },
) => SourceConfig | null | Promise<SourceConfig | null>;

/** Where runs are read from: one store, or destinations by id. */
export interface StoreChoice {
  /** One store (used when `stores` is absent). */
  store?: ObjectStore;
  /** Destinations by id; `destinationId` picks one, else `defaultDestinationId`. */
  stores?: Record<string, ObjectStore>;
  /** Default `'default'` (or the only entry of `stores`). */
  defaultDestinationId?: string;
}

export interface PlanOptions extends StoreChoice {
  /**
   * The run whose archive is read, when it is not `request.runId` itself (a run recorded with
   * `unchangedFrom` has no archive of its own); the plan's `runId` still echoes the request.
   */
  runId?: string;
  /** The run's job when known (else looked up under every job). */
  job?: string;
  /** The engine's operational secret key; absent gives `ok: false`. */
  operationalSecretKey?: Uint8Array | null;
  /** The engine's signer public key: refuse a run signed by anyone else. */
  signerPublicKey?: Uint8Array;
  request: RestoreRequest;
  targetResolver: TargetResolver;
  /** Directories a filesystem (files, sqlite) restore may write under (`ENGINE_RESTORE_ROOTS`). */
  restoreRoots: string[];
  /** Whether the run is the latest successful run of its job (the engine's run history knows). */
  isLatest?: boolean;
  /**
   * Records of the run's job already parsed from signed index lines, by name with their lines:
   * the base an engine keeps for the job's next run (a `ChunkedBase`), when it is of the run being
   * read. The plan's reader then shares those records and their text instead of holding a second
   * copy (@coffer/archive `OpenRunOptions.knownRecords`); the index is checked as before.
   */
  knownRecords?: KnownRecords;
  /**
   * An interrupted apply being resumed: a sqlite target is expected to hold what the earlier
   * attempt wrote, so its freshness is not required (the plan hash does not change).
   */
  resuming?: boolean;
  /** Clock (default `() => new Date()`). */
  now?: () => Date;
  /** Most existence checks for `overwriteCheck` (default 1000). */
  overwriteCheckLimit?: number;
  /** Further conditions on the resolved target, after the restore-roots confinement. */
  targetChecks?: TargetCheck[];
}

/** Progress of an apply (reported at each batch boundary and at the end of each phase). */
export interface ApplyProgress {
  phase: 'verify' | 'write' | 'done';
  /** Records handled in this phase. */
  done: number;
  total: number;
  written: number;
  skipped: number;
  failed: number;
  /** Plaintext bytes written. */
  bytes: number;
}

/** What happened to one record in phase two. */
export type RecordOutcome =
  | { name: string; outcome: 'written'; bytes: number }
  | { name: string; outcome: 'skipped'; reason: string }
  | { name: string; outcome: 'failed'; reason: string; code: string };

export interface ApplyOptions extends PlanOptions {
  /** Cancels further writes; records already written stay. */
  signal?: AbortSignal;
  onProgress?: (progress: ApplyProgress) => void;
  /** Called after each record of phase two (the engine persists written names to resume). */
  onRecord?: (outcome: RecordOutcome) => void | Promise<void>;
  /** Names an earlier attempt of the same plan already wrote: not written again. */
  completed?: Iterable<string>;
  /**
   * With `resuming`: when the interrupted apply's first attempt started (ISO 8601). A files
   * target's records still to write that an attempt since then cut while writing them straight to
   * their names (mode 000, changed since then) are removed before the writes, so `onExisting:
   * skip` does not take a cut file for an existing one. Without it only cut temporary files go.
   */
  firstStartedAt?: string;
  /** Records per progress batch (default 160 with `onExisting: skip`, else 200). */
  batchSize?: number;
  /** Directory for staging records before their write (default the OS temporary directory). */
  stagingDir?: string;
  /**
   * Records up to this size are read through the archive's pipelined reader and held in memory
   * until written; bigger ones are staged in a 0600 file while they verify (default 32 MiB). A
   * files target of a 0.2 run takes records over 4 MiB in parts instead, whatever their size, and
   * stages none.
   */
  memoryStageBytes?: number;
  /** Verified records written concurrently in phase two (default 8; sqlite targets: always 1). */
  writeConcurrency?: number;
  /**
   * The plan `planFromIndex` returned for these options, already gated by the caller: the apply
   * writes it instead of computing the plan again (a plan from anywhere else is refused with
   * ERR_RESTORE_INTERNAL). `request.planHash`, when set, must still match it.
   */
  prepared?: RestorePlan;
}

export type ApplyStatus = 'succeeded' | 'completed-with-failures' | 'aborted' | 'cancelled';

/** The apply receipt. */
export interface ApplyReceipt {
  kind: 'coffer-restore-receipt';
  v: 1;
  runId: string;
  job: string;
  planHash: string;
  target: PlanTarget;
  status: ApplyStatus;
  /** Phase one: records whose bytes verified before any write. */
  recordsVerified: number;
  plannedWrites: number;
  written: number;
  skipped: SkippedEntry[];
  skippedCount: number;
  failed: Array<{ name: string; reason: string; code: string }>;
  failedCount: number;
  /** Records named in `completed` (written by an earlier attempt), not written again. */
  alreadyDone: number;
  /** Plaintext bytes written. */
  bytes: number;
  startedAt: string;
  finishedAt: string;
  cancelled: boolean;
  /** Why the apply stopped (`aborted`): phase one or a re-verification failed. */
  failure?: { phase: 'verify' | 'write'; code: string; reason: string; record?: string };
}
