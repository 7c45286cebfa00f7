/**
 * What the Updates screen reads and writes (docs/updates.md "Engine routes"): the channel view,
 * the update status with its record, the lifecycle replies, the canary flights, the
 * update-approval policy with the updates it holds for a second owner, and the plain
 * words for every lifecycle step, outcome and `ERR_UPDATE_*` code (docs/errors.md "@coffer/update").
 */
import { ApiError } from '../../api/errors.ts';

export type Component = 'engine' | 'console';
export const COMPONENTS: readonly Component[] = ['engine', 'console'];

export const UPDATES_KEY = ['updates'] as const;
export const UPDATE_STATUS_KEY = ['updates', 'status'] as const;
export const CANARY_KEY = ['updates', 'canary'] as const;
export const UPDATE_POLICY_KEY = ['updates', 'policy'] as const;

/** The header a live step carries the one-shot deploy token in. */
export const DEPLOY_TOKEN_HEADER = 'x-engine-deploy-token';

export interface Running {
  engine: string;
  console: string | null;
}

export type Floors = Partial<Record<Component, string>>;

export interface AcceptedChannel {
  sequence: number;
  digest: string;
  acceptedAt: string;
}

export interface ComponentView {
  component: Component;
  running: string | null;
  available: string;
  floor: string | null;
  newer: boolean;
  verdict: 'update' | 'current' | 'refused';
  code: string | null;
}

/** `GET /admin/updates`. */
export interface UpdatesView {
  configured: boolean;
  verified: boolean;
  running: Running;
  floors: Floors;
  schemaEpoch: number;
  lastAccepted: AcceptedChannel | null;
  code?: string;
  error?: string;
  channel?: { name: string; sequence: number; digest: string; issuedAt: string; expiresAt: string };
  recommended?: {
    version: string;
    risk: string;
    requiredSteps: string[];
    schemaEpoch: number;
    migration: boolean;
    minEngineVersion: string | null;
  };
  updateAvailable?: boolean;
  compatible?: boolean;
  components?: ComponentView[];
}

export interface UpdateRecord {
  v: 1;
  id: string;
  shape: 'apply' | 'ramp';
  status: 'pending' | 'settled' | 'refused';
  phase: string;
  outcome: string | null;
  refusal: { step: string; code: string } | null;
  components: Component[];
  from: Partial<Record<Component, string | null>>;
  to: Partial<Record<Component, string>>;
  fromSchemaEpoch: number;
  toSchemaEpoch: number;
  risk: string;
  migration: boolean;
  channel: { sequence: number; digest: string };
  readBack: { mode: 'warn' | 'enforce'; mismatched: Component[] };
  ramp: { percentage: number } | null;
  rollbackFailed: Component[];
  floors: Floors | null;
  createdAt: string;
  updatedAt: string;
}

/** `GET /admin/update/status`. */
export interface UpdateStatus {
  configured: boolean;
  deployer: 'directory' | 'container' | null;
  destinationConfigured: boolean;
  promote?: string;
  running: Running;
  record: UpdateRecord | null;
  floors: Floors;
  lastAccepted: AcceptedChannel | null;
  schemaEpoch: number;
}

/**
 * A lifecycle reply (apply, ramp, settle, ramp/settle, rollback): 200 for every outcome but a
 * refusal (409, or 400 for a malformed request), 202 `queued` when a second owner must approve.
 */
export interface LifecycleReply {
  outcome: string;
  step: string | null;
  code: string | null;
  passed: string[];
  record: UpdateRecord | null;
  message?: string | null;
  error?: string;
  orchestrator?: { message: string };
  /** `queued`: the owner action a second owner approves (`approval.id`; `id` in the generic shape). */
  id?: string;
  ownerActionQueued?: boolean;
  approval?: { id: string; expiresAt?: string | null };
  /** Under the update-approval policy a live request like this one waits for a second owner. */
  approvalRequired?: boolean;
  /** `restarting`: the version the engine restarts into. */
  version?: string;
}

/** The update-approval policy (docs/updates.md "Approval policy"). */
export type UpdateApproval = 'migrations' | 'all';

/** A live apply or ramp the policy queued for a second owner (the owner action `update-apply`). */
export interface PendingUpdate {
  id: string;
  kind: 'apply' | 'ramp';
  version: string | null;
  to: Partial<Record<Component, string>>;
  channel: { sequence: number; digest: string };
  percentage: number | null;
  requestedBy: string | null;
  requestedByEmail: string | null;
  requestedAt: string;
  expiresAt: string | null;
}

/** `GET /admin/update/policy`. */
export interface UpdatePolicyView {
  approval: UpdateApproval;
  /** A subject, `admin-token`, `owner-action` (an approved lowering); null: the default, never set. */
  setBy: string | null;
  setAt: string | null;
  pending: PendingUpdate[];
}

/** `POST /admin/update/policy` applied at once (raising it, or the value it already has). */
export interface PolicySet {
  ok: true;
  approval: UpdateApproval;
  previous: UpdateApproval;
}

/** `POST /admin/update/policy` 202: lowering `all` to `migrations` waits for a second owner. */
export interface PolicyQueued {
  ownerActionQueued: true;
  id: string;
  status: 'pending';
  expiresAt: string | null;
  approval: UpdateApproval;
  requested: UpdateApproval;
}

export interface DeployToken {
  token: string;
  header: string;
  expiresAt: string;
}

export interface CanaryFlight {
  id: string;
  destination: string;
  trigger: string;
  startedAt: string;
  finishedAt: string | null;
  verdict: string;
  code: string | null;
  message: string | null;
  bytes: number | null;
  engineVersion: string | null;
  instanceId: string | null;
}

/** `GET /admin/canary`. */
export interface CanaryView {
  intervalSeconds: number;
  verdict: string | null;
  lastFlightAt: string | null;
  destinations: { destination: string; last: CanaryFlight | null; flights: CanaryFlight[] }[];
}

/** The lifecycle steps in order (docs/updates.md "Update lifecycle"), with what each checks. */
export const LIFECYCLE_STEPS: readonly { step: string; text: string }[] = [
  { step: 'no-update', text: 'Already current?' },
  { step: 'floor', text: 'Anti-rollback floor' },
  { step: 'forward-only', text: 'Forward only' },
  { step: 'schema-epoch', text: 'Schema epoch' },
  { step: 'migration', text: 'Migration guard' },
  { step: 'compat', text: 'Compatible with the running engine' },
  { step: 'verify-artefact', text: 'Artefacts downloaded and checked against the signed channel' },
  { step: 'record-rollback-target', text: 'Rollback target recorded' },
  { step: 'dry-run', text: 'Dry-run stop' },
  { step: 'destination', text: 'Destination configured' },
  { step: 'upload', text: 'Release uploaded inert' },
  { step: 'read-back', text: 'Uploaded bytes read back' },
  { step: 'promote', text: 'Promote (switch to the new release)' },
  { step: 'settle', text: 'Settle (canary verdict)' },
];

/** Steps the engine adds in front of the lifecycle's own. */
const EXTRA_STEPS: Record<string, string> = {
  approval: "A second owner's approval",
  channel: 'Channel fetched and verified',
  'deploy-token': 'Deploy token',
};

export function stepText(step: string | null): string {
  if (step === null) return 'before any step';
  return LIFECYCLE_STEPS.find((s) => s.step === step)?.text ?? EXTRA_STEPS[step] ?? step;
}

/** What each outcome means, in a sentence. */
export const OUTCOME_TEXT: Record<string, string> = {
  'no-update': 'Nothing to do: every component is already on the channel version.',
  refused: 'Refused.',
  'dry-run': 'Dry run passed: every check up to the upload passed; nothing was changed.',
  uploaded:
    'Uploaded: the release is in place inert and read back; nothing live changed yet (promote comes next).',
  applied: 'Applied: the new version is live and settled.',
  'rolled-back': 'Rolled back: the previous version is live again.',
  'rollback-failed': 'Rollback failed: a component could not be put back; the operator must step in.',
  'awaiting-canary': 'Awaiting the canary: the new version is live; the scheduled canary decides.',
  ramping: 'Ramping: part of the replicas follow the new version.',
  queued: 'Queued: a second owner must approve this update (update-approval policy).',
  restarting: 'Restarting: the engine restarts into the new version.',
};

/** Every `ERR_UPDATE_*` code in plain words (docs/errors.md "@coffer/update"). */
export const CODE_TEXT: Record<string, string> = {
  ERR_UPDATE_MALFORMED_CHANNEL:
    'the channel document breaks the format rules, or names another channel than the configured one',
  ERR_UPDATE_WRONG_SIGNER: 'the channel is signed by another key than the pinned signer',
  ERR_UPDATE_BAD_SIGNATURE: 'the channel signature does not verify (both halves must)',
  ERR_UPDATE_EXPIRED: 'the channel document has expired (a frozen or stale mirror)',
  ERR_UPDATE_NOT_YET_VALID: 'the channel document is dated in the future',
  ERR_UPDATE_SEQUENCE_ROLLBACK:
    'the channel sequence went back, or an old document was replayed (lower than the last accepted)',
  ERR_UPDATE_TRUST_CONFIG: 'the pinned signer key is not usable, or no channel is configured',
  ERR_UPDATE_INSECURE_URL: 'a channel or artefact address is not https, or carries credentials',
  ERR_UPDATE_REDIRECT: 'the channel host redirected to another host, or too many times',
  ERR_UPDATE_FETCH: 'the channel or an artefact could not be fetched',
  ERR_UPDATE_TIMEOUT: 'the channel host did not answer in time',
  ERR_UPDATE_TOO_LARGE: 'the channel or an artefact is larger than allowed',
  ERR_UPDATE_ARTEFACT_SIZE: 'an artefact does not have the signed size',
  ERR_UPDATE_ARTEFACT_HASH: "an artefact's SHA-384 differs from the signed one (tampered or mixed up)",
  ERR_UPDATE_UNKNOWN_COMPONENT: 'a component the channel does not offer',
  ERR_UPDATE_BELOW_FLOOR: 'the version is below the highest version ever settled (the anti-rollback floor)',
  ERR_UPDATE_FORWARD_ONLY: 'the version is older than the running one, and downgrade was not allowed',
  ERR_UPDATE_MIGRATION_GUARD:
    'the release migrates the state store: it needs an approved apply, not a one-click apply or ramp',
  ERR_UPDATE_INCOMPATIBLE: 'the running engine is older than the release needs to update from',
  ERR_UPDATE_SCHEMA_EPOCH: 'the engine would go back across a state schema epoch',
  ERR_UPDATE_NO_ROLLBACK_TARGET:
    'there is nothing to go back to: nothing was promoted, or no earlier version is on record',
  ERR_UPDATE_NO_DESTINATION: 'no destination is configured for a live apply',
  ERR_UPDATE_UPLOAD: 'the inert upload failed; the engine is unchanged',
  ERR_UPDATE_READ_BACK: 'the uploaded bytes did not read back as signed',
  ERR_UPDATE_PROMOTE: 'promote failed; the previous version is still live',
  ERR_UPDATE_NO_PENDING: 'no promoted update awaits a verdict',
  ERR_UPDATE_RAMP_RECORD: 'the update in flight is a ramp: settle it as a ramp',
  ERR_UPDATE_NOT_RAMP_RECORD: 'the update in flight is not a ramp',
  ERR_UPDATE_RAMP_CONSOLE: 'the ramp moves the engine only, never the console',
  ERR_UPDATE_INVALID_TRANSITION: 'the engine met an unexpected lifecycle step (a bug: report it)',
  ERR_UPDATE_DEPLOY: 'a release directory step failed on the engine host',
  ERR_UPDATE_INVALID_ARGUMENT: 'a value in the request is not accepted',
};

/** A code in plain words, with the code itself for searching docs/errors.md. */
export function codeText(code: string | null | undefined): string {
  if (!code) return 'no code';
  return CODE_TEXT[code] ?? code;
}

/** A lifecycle reply the engine sent as an error status (409 or 400 refusal, 202 queued). */
export function replyOf(err: unknown): LifecycleReply | null {
  if (!(err instanceof ApiError)) return null;
  const b = err.body as Partial<LifecycleReply> | undefined;
  if (typeof b === 'object' && b !== null && typeof b.outcome === 'string') {
    return {
      outcome: b.outcome,
      step: b.step ?? null,
      code: b.code ?? null,
      passed: Array.isArray(b.passed) ? b.passed : [],
      record: b.record ?? null,
      ...(typeof b.error === 'string' ? { error: b.error } : {}),
      ...(typeof b.message === 'string' ? { message: b.message } : {}),
    };
  }
  return null;
}

/** True for the 403 of a live step whose deploy token was missing, wrong, used or expired. */
export function isDeployTokenRefusal(err: unknown): boolean {
  return (
    err instanceof ApiError &&
    err.status === 403 &&
    (err.body as { deployTokenRequired?: unknown } | undefined)?.deployTokenRequired === true
  );
}

export function versionText(v: string | null | undefined): string {
  return v === null || v === undefined ? 'none' : v;
}
