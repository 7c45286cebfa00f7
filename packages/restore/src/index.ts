/**
 * @coffer/restore: restore for Coffer, as the specification's `RestoreRequest`, `RestorePlan`,
 * "Restore approval" state table, apply gate order, Errors and Limits describe
 * (docs/restore.md is normative).
 *
 * - `validateRestoreRequest`: the request body, refused with an exact 400 message before any read.
 * - `planRestore`: the dry run; reads and hash-verifies every planned record, writes nothing.
 * - `applyRestore`: phases 3 and 4 of the apply gate order (verify all, then re-verify each record
 *   right before its write through the source connector); cancel stops further writes only.
 * - Approvals (dual control) over the engine's approvals store, with an injectable clock.
 * - `attestRun`: keyless attestation (signature, completeness, anti-rollback).
 * - `runDrill`, `estimateRto`: restore drills into scratch targets and the recovery-time estimate.
 *
 * Security-relevant behaviour: bytes are written only after their SHA-384 verified; a `files` or
 * `sqlite` target is confined to the restore roots and a record name never leaves its target;
 * tokens never enter a plan hash, a message or a receipt.
 */
export { APPLY_BATCH, APPLY_BATCH_SKIP, applyRestore } from './apply.ts';
export {
  type Actor,
  APPLY_RESERVATION_MS,
  APPROVAL_LIFE_MS,
  type ApprovalRecordLike,
  type ApprovalStore,
  approveRestore,
  checkRestoreApproval,
  DEFAULT_APPROVE_MIN_DELAY_MS,
  type LeaseStore,
  listRestoreApprovals,
  type PlanRegistry,
  RESTORE_APPROVAL_KIND,
  type RestoreApprovalStatus,
  recordDryRun,
  rejectRestore,
  requestRestoreApproval,
  reserveRestoreApproval,
  settleRestoreApproval,
} from './approvals.ts';
export { type Attestation, type AttestOptions, attestRun } from './attest.ts';
export { type DrillEvidence, type DrillOptions, type DrillScratch, runDrill } from './drill.ts';
export { removeFilesScratch, removeRedisScratch, removeS3Scratch } from './drill-scratch.ts';
export {
  codeOf,
  isRestoreError,
  RESTORE_ERROR_CODES,
  RESTORE_ERROR_STATUS,
  RestoreError,
  type RestoreErrorCode,
} from './errors.ts';
export { APPLY_WINDOW_MS, planFromIndex, planRestore, SAMPLE_ROWS, SKIPPED_LIST_MAX } from './plan.ts';
export { type PlanDocument, planHashOf } from './plan-hash.ts';
export { estimateRto, type JobRto, RTO_WINDOW, type RtoEstimate } from './rto.ts';
export { confine, type ResolvedTarget, unsafeFileName } from './target.ts';
export type * from './types.ts';
export { validateRestoreRequest } from './validate.ts';
export { type RestoreVerification, verifyRestore } from './verify.ts';
