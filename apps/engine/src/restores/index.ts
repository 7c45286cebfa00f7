/**
 * Restores (src/restores/): the restore service and what it owns: the durable apply tracker, the
 * plan options computed from the engine's state, keys and connections, the approval policy, and
 * the concurrency limits of dry runs and verifies. Routes and drills use this surface only.
 */
export { APPLY_PREFIX, type ApplyRow, applyView, PROGRESS_PREFIX } from './applies.ts';
export {
  APPROVAL_ENABLED_KEY,
  APPROVAL_MIN_DELAY_KEY,
  type ApprovalPolicy,
  DRILL_EVIDENCE_PREFIX,
  jobResolver,
  planOptionsFor,
  type RestoreDeps,
  restoreTargetAllowed,
  sourceConfigOf,
} from './plan-options.ts';
export { READS_POLICY, ReadSlots } from './read-slots.ts';
export { isRestoreRefusal, RestoreRefusal } from './refusal.ts';
export {
  type ApplyStarted,
  type RestoreCaller,
  RestoreService,
  type RestoreServiceOptions,
} from './service.ts';
