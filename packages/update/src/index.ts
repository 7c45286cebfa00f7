/**
 * @coffer/update: the signed update channel, version guards, the update lifecycle state machine
 * and release deployers of the Coffer engine (docs/updates.md; engine HTTP interface "Update
 * lifecycle", "Updates", "Versioning"). No HTTP server and no storage: the engine maps its routes
 * onto these functions and persists the records and sequences they hand back.
 */
export {
  CHANNEL_CONTEXT,
  CHANNEL_KIND,
  type ChannelComponent,
  type ChannelDocument,
  type ChannelTrust,
  COMPONENTS,
  type ComponentName,
  channelComponent,
  checkComponentUrl,
  DEFAULT_CLOCK_SKEW_MS,
  isVersion,
  parseChannelDocument,
  type RecommendedRelease,
  RISKS,
  type Risk,
  type SignedChannel,
  signChannel,
  trustFromKeyFile,
  type VerifiedChannel,
  type VerifyChannelOptions,
  verifyChannel,
} from './channel.ts';
export {
  ContainerDeployer,
  type ContainerDeployerOptions,
  type Deployer,
  type DeployNote,
  DirectoryDeployer,
  type DirectoryDeployerOptions,
} from './deploy.ts';
export { isUpdateError, UPDATE_ERROR_CODES, UpdateError, type UpdateErrorCode } from './errors.ts';
export { createUpdateExecutor, type ExecutorOptions } from './executor.ts';
export {
  CHANNEL_FILE,
  DEFAULT_ARTEFACT_MAX_BYTES,
  DEFAULT_ARTEFACT_TIMEOUT_MS,
  DEFAULT_CHANNEL_MAX_BYTES,
  DEFAULT_CHANNEL_TIMEOUT_MS,
  type DownloadedArtefact,
  type DownloadOptions,
  downloadArtefact,
  type FetchChannelOptions,
  fetchChannel,
  verifyArtefactFile,
} from './fetch.ts';
export {
  type ApplyPath,
  checkRollback,
  compareVersions,
  GUARD_STEPS,
  type GuardInput,
  type GuardStep,
  type GuardVerdict,
  raiseFloor,
  runGuards,
} from './guards.ts';
export { MAX_REDIRECTS } from './internal/http.ts';
export {
  type ApplyInput,
  advance,
  CANARY_RETRY_SCHEDULE,
  type CanaryVerdict,
  driveUpdate,
  type Effect,
  inRamp,
  type MachineState,
  type RampInput,
  type Step,
  settleRamp,
  settleRecord,
  startApply,
  startRamp,
  startRollback,
  type UpdateEvent,
  type UpdateExecutor,
  type UpdateReply,
} from './lifecycle.ts';
export {
  buildChannelDocument,
  buildChannelDocumentFromBytes,
  type PublishBytesInput,
  type PublishInput,
} from './publish.ts';
export {
  LIFECYCLE_STEPS,
  type LifecycleStep,
  type RecordPhase,
  SETTLED_OUTCOMES,
  type SettledOutcome,
  type UpdateRecord,
} from './record.ts';
