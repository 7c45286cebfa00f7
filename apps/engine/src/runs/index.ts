/**
 * The engine's backup run machinery (issue 5): the run executor, the scheduler and run lock,
 * retention, replication state, failure classification and test-fault injection. See
 * docs/runs.md for the run object and the routes.
 */
export { decodeCheckpoint, encodeCheckpoint, type RunCheckpoint } from './checkpoint.ts';
export {
  type AttemptOutcome,
  attemptRun,
  type ExecutorDeps,
  type RunJob,
  type RunKeys,
  type RunLogger,
} from './executor.ts';
export { type ArmedFault, FaultRegistry, type FaultSpec, faultySource, faultyStore } from './faults.ts';
export {
  type Classification,
  causeDigest,
  classifyFailure,
  FAILURE_REASONS,
  isFailureReason,
  RUN_ERROR_CODES,
  RunError,
  type RunErrorCode,
} from './reasons.ts';
export { deleteRunObjects, type PruneResult, pruneJob, runIdTime } from './retention.ts';
export {
  createRunService,
  DEFAULT_LADDER_SECONDS,
  newRunId,
  RunService,
  type RunServiceOptions,
  STALE_PREFIX,
  STAND_DOWN_PREFIX,
  staleThresholdSeconds,
  TICK_SETTING,
  type TickRecord,
  type TriggerResult,
} from './service.ts';
export { openJobSource, type RunSource } from './source.ts';
export { type PrevRunIdStatus, type RunObject, runObject, runObjects } from './view.ts';
