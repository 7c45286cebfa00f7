/**
 * The engine's restore shapes the Restore and Approvals screens use, typed after the engine's
 * routes (apps/engine/src/routes/restore/, @coffer/restore types.ts and approvals.ts,
 * docs/restore.md) and the runs routes (GET /admin/jobs, /admin/history?id=, /admin/runs/at).
 */

export type OnExisting = 'overwrite' | 'skip';

/** `RestoreRequest` (docs/restore.md section 1): the body of every restore route. */
export interface RestoreRequestBody {
  runId: string;
  confirm?: boolean;
  target?: { binding?: string; namespaceId?: string; bucketName?: string };
  include?: string[];
  exclude?: string[];
  maxRecords?: number;
  recordName?: string;
  destinationId?: string;
  d1Tables?: { database: string; tables: string[]; createOnly: boolean };
  onExisting?: OnExisting;
  /** On an apply: the hash the person reviewed (409 when the recomputed plan differs). */
  planHash?: string;
}

export interface PlanSampleRow {
  name: string;
  sourceType: string;
  binding: string;
  namespace: string;
  plaintextSize: number;
  targetExists?: boolean;
}

export interface SkippedEntry {
  name: string;
  reason: string;
}

export interface PlanTarget {
  type: string;
  binding: string;
  namespace: string;
  description: string;
}

/** `RestorePlan`: the dry-run reply of `POST /admin/restore`. */
export interface RestorePlan {
  ok: boolean;
  reason?: string;
  result?: 'record-not-found';
  runId: string;
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
  skippedCount: number;
  dependencyWarnings: { database: string; table: string; missingParent: string }[];
  fidelityWarnings: { name: string; reason: string; expired?: number; expiringBeforeDeadline?: number }[];
  overwriteCheck: {
    onExisting: OnExisting;
    checked: number;
    existing: number;
    absent: number;
    unknown: number;
    complete: boolean;
    limit: number;
  } | null;
  target: PlanTarget | null;
  onExisting: OnExisting;
  planHash: string | null;
  advisories: { code: string; message: string }[];
}

/** 202 reply of an apply (`POST /admin/restore` with `confirm: true`) or a resume. */
export interface ApplyStarted {
  ok: true;
  mode: 'apply';
  applyId: string;
  status: 'running';
  planHash: string;
  plannedWrites: number;
  poll: string;
  resumed?: boolean;
  alreadyWritten?: number;
}

export type ApplyStatus =
  | 'running'
  | 'interrupted'
  | 'succeeded'
  | 'completed-with-failures'
  | 'aborted'
  | 'cancelled'
  | 'error';

export interface ApplyReceipt {
  kind: 'coffer-restore-receipt';
  v: 1;
  runId: string;
  job: string;
  planHash: string;
  target: PlanTarget;
  status: Exclude<ApplyStatus, 'running' | 'interrupted' | 'error'>;
  recordsVerified: number;
  plannedWrites: number;
  written: number;
  skipped: SkippedEntry[];
  skippedCount: number;
  failed: { name: string; reason: string; code: string }[];
  failedCount: number;
  alreadyDone: number;
  bytes: number;
  startedAt: string;
  finishedAt: string;
  cancelled: boolean;
  failure?: { phase: 'verify' | 'write'; code: string; reason: string; record?: string };
}

/** `GET /admin/restore/applies?id=`: one apply's progress and receipt. */
export interface ApplyView {
  applyId: string;
  status: ApplyStatus;
  planHash: string;
  runId: string;
  job: string | null;
  startedAt: string;
  progress: {
    phase: 'verify' | 'write' | 'done';
    done: number;
    total: number;
    written: number;
    skipped: number;
    failed: number;
    bytes: number;
  } | null;
  receipt?: ApplyReceipt;
  error?: string;
  recordedWritten: number;
  attempts: number;
  interruptedAt?: string;
  resumable?: boolean;
}

/** `POST /admin/restore/cancel`. */
export interface CancelReply {
  ok: true;
  applyId: string;
  status: ApplyStatus;
}

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'consumed' | 'void' | 'expired';

/** One restore approval (the approvals table row, @coffer/restore `ApprovalRecordLike`). */
export interface RestoreApproval {
  id: string;
  kind: string;
  status: ApprovalStatus;
  /** The plan hash the approval is bound to. */
  subjectHash: string | null;
  requestedBy: string | null;
  requestedByEmail: string | null;
  requestedAt: string;
  decidedBy: string | null;
  decidedByEmail: string | null;
  decidedAt: string | null;
  expiresAt: string | null;
  detail: {
    runId?: string;
    job?: string | null;
    plannedAt?: string;
    applyDeadline?: string;
    plannedWrites?: number;
    bytes?: number;
    /** The plan's target description: where the records would be written. */
    target?: string | null;
    onExisting?: OnExisting;
    rejectReason?: string;
    voidedBy?: string;
    [k: string]: unknown;
  };
  updatedAt: string;
}

/** `GET /admin/restore/approvals`. */
export interface ApprovalsReply {
  approvalRequired: boolean;
  minDelaySeconds: number;
  approvals: RestoreApproval[];
}

/** `{ ok, approval }` of request, approve and reject. */
export interface ApprovalReply {
  ok: true;
  approval: RestoreApproval;
}

/** `POST /admin/restore/approval-policy`. */
export interface PolicyReply {
  ok: true;
  enabled: boolean;
  minDelaySeconds: number;
}

/** A row of `GET /admin/jobs` (the fields used here). */
export interface JobRow {
  id: string;
  source: { type: string; [k: string]: unknown };
  destinations?: string[];
  state: { paused: boolean; lastRun: RunObject | null };
}

/** The run object (docs/runs.md), the fields used here. */
export interface RunObject {
  runId: string;
  job: string;
  seq: number;
  status: string;
  records: number;
  bytes: number;
  trigger: string;
  startedAt: string;
  finishedAt: string | null;
  prunedAt: string | null;
  unchangedFrom: string | null;
}

/** `GET /admin/history?id=`. */
export interface JobHistory {
  id: string;
  runs: RunObject[];
}

/** `GET /admin/runs/at?job=&at=`. */
export type RunAtReply =
  | { found: true; job: string; at: string; run: RunObject }
  | {
      found: false;
      job: string;
      at: string;
      /** The retained successful runs' span, or null with none. */
      window: { oldest: string; newest: string; count: number } | null;
    };

/** `GET /admin/status`, the fields the wizard reads. */
export interface StatusFacts {
  restoreRootsConfigured?: boolean;
  destinations: string[];
}
