/**
 * The public types and repository interfaces of @coffer/state: what the engine keeps (the
 * specification's "per-account scheduler state object": schedule, run lock, run-log index,
 * sessions, approvals; plus jobs, audit chain, pull credentials, notifications, update state).
 *
 * Conventions for every repository:
 * - Times are RFC 3339 UTC strings to the millisecond (`new Date().toISOString()`), except lease
 *   expiries, which are epoch milliseconds because they are compared arithmetically.
 * - JSON-shaped values are stored as text and returned parsed; a stored value that no longer
 *   parses throws `ERR_STATE_CORRUPT` rather than returning half a record.
 * - Every failure is a `StateError` (see errors.ts) whose `code` callers switch on; no raw
 *   better-sqlite3 / pg exception escapes, and no message carries a connection-string password.
 * - Writes the specification makes atomic (revision checks, approval transitions, audit append,
 *   lease acquisition) are single transactions on both backends.
 */

// ---------------------------------------------------------------------------------------------
// Jobs

/**
 * A job's whole configuration object as the route validated it (without `ifMatchRev`). `id` is
 * the storage key. Other fields (source, destinations, retention, `cadenceSeconds`, `enabled`,
 * restore-test cadence) are opaque to the store, which compares them only to name changed fields.
 */
export type JobConfig = { id: string } & Record<string, unknown>;

/** A live job as stored. */
export interface JobRecord {
  id: string;
  config: JobConfig;
  /** Config revision: 1 on first create, +1 on each configuration write that changed something. */
  configRev: number;
  createdAt: string;
  /** Last accepted write of any kind, including a no-op rewrite. */
  updatedAt: string;
  /** Last time the configuration changed (the write that produced `configRev`). */
  changedAt: string;
  /** Top-level field names the write that produced `configRev` changed (never values). */
  lastChangedFields: string[];
}

/** The record kept after a job is deleted, so later writes can tell `already-deleted` and co. */
export interface JobTombstone {
  id: string;
  /** The `configRev` the job had when it was deleted. */
  deletedRev: number;
  deletedAt: string;
}

/**
 * The `ifMatchRev` precondition, read by presence: `undefined` = key absent (no check), an integer
 * = "I read it at this revision", `null` = "I believe it does not exist". Parsed JSON can never
 * carry `undefined`, so `body.ifMatchRev` passed straight through keeps the presence rule.
 */
export type IfMatchRev = number | null | undefined;

/** Refusal reasons of the specification's ifMatchRev table. */
export type PreconditionReason =
  | 'base-moved'
  | 'deleted-under-you'
  | 'already-exists'
  | 'resurrect-refused'
  | 'already-deleted'
  | 'precondition-unreadable';

/**
 * The `precondition` object of a 409 refusal, exactly the specification's fields. `currentRev` is
 * null when the job is not live (deleted or never existed). `changedFields` names fields, never
 * values. `changedAt` is when the stored record last changed (or was deleted), null if unknown.
 */
export interface JobPrecondition {
  reason: PreconditionReason;
  id: string;
  yourRev: number | null;
  currentRev: number | null;
  changedFields: string[];
  changedAt: string | null;
}

/** Result of an applied upsert. */
export interface JobWriteResult {
  job: JobRecord;
  /** `recreated`: a deleted id brought back by a write without ifMatchRev (numbering continues). */
  outcome: 'created' | 'updated' | 'unchanged' | 'recreated';
  /** Top-level field names this write changed (all fields on create); empty when unchanged. */
  changedFields: string[];
  /** `configRev` before the write (the tombstone's deletedRev for `recreated`); null on create. */
  previousRev: number | null;
}

/** Result of an applied delete. */
export interface JobDeleteResult {
  id: string;
  /** The `configRev` the job had when it was deleted (the reply's `deletedRev`). */
  deletedRev: number;
  deletedAt: string;
}

/**
 * Jobs with `configRev` and the ifMatchRev precondition.
 *
 * Upsert semantics (each a single transaction, serialised per job id):
 *
 * | ifMatchRev | live job at rev R          | tombstone (deleted at D)  | never existed        |
 * |------------|----------------------------|---------------------------|----------------------|
 * | absent     | update (rev R+1 if changed)| recreate at D+1           | create at 1          |
 * | N          | R = N: update; else base-moved | deleted-under-you     | deleted-under-you    |
 * | null       | already-exists             | resurrect-refused         | create at 1          |
 *
 * Delete semantics: absent: delete if live, else `already-deleted`; N: delete if live at N, else
 * `base-moved` (live) or `already-deleted` (gone); null (refused on delete): `already-exists` when
 * live, `already-deleted` when gone.
 *
 * `resurrect-refused`: a create-if-absent (`null`) for an id that was deliberately deleted is
 * refused, because a stale creator (an old export replayed through bulk upsert, a retried
 * create) would otherwise silently bring back a job someone removed. To bring it back on purpose
 * the caller writes without `ifMatchRev`; its revision then continues from `deletedRev + 1`, so a
 * revision number never names two different configurations of one id.
 *
 * `precondition-unreadable`: the check could not be evaluated, so it fails closed: the sent
 * `ifMatchRev` is neither null nor a non-negative safe integer, or the stored record is unreadable.
 *
 * A whole-object rewrite identical to the stored configuration is `unchanged` and keeps
 * `configRev` (only configuration changes bump it; runs never do).
 */
export interface JobsRepository {
  /** The live job, or null. */
  get(id: string): Promise<JobRecord | null>;
  /** All live jobs ordered by id. */
  list(): Promise<JobRecord[]>;
  /** The tombstone of a deleted job, or null. */
  getTombstone(id: string): Promise<JobTombstone | null>;
  /**
   * Whole-object upsert (an `ifMatchRev` key inside `job` is dropped, never stored; the
   * precondition comes only from `options`). Returns the result; throws `ERR_STATE_PRECONDITION` (with
   * `.precondition`) on a refusal, `ERR_STATE_INVALID` for an empty id or a config that is not
   * a plain JSON object.
   *
   * `guard`, when given, runs inside the write's transaction with the stored configuration (null
   * when there is no live job, `'unreadable'` when the stored record cannot be parsed) after the
   * precondition check and before the write; whatever it throws aborts the write and is rethrown
   * unchanged. It is how a caller re-checks a capability against the stored value with no window
   * for another writer (the specification's "re-checked in the state object").
   */
  upsert(
    job: JobConfig,
    options?: { ifMatchRev?: IfMatchRev; guard?: (stored: JobConfig | null | 'unreadable') => void },
  ): Promise<JobWriteResult>;
  /**
   * Deletes a live job, its history ring and its run counters (never archives), keeps a
   * tombstone. Returns `deletedRev`; throws `ERR_STATE_PRECONDITION` on a refusal.
   */
  delete(id: string, options?: { ifMatchRev?: IfMatchRev }): Promise<JobDeleteResult>;
  /**
   * Brings back a job exactly as another store held it (control-plane restore): its configuration
   * at its own `configRev`, so revision numbers carry on from where the exported engine left them.
   * Only into an id with no live job (ERR_STATE_CONFLICT otherwise); a tombstone of the id is
   * replaced. Throws ERR_STATE_INVALID for a bad config or a revision that is not a positive integer.
   */
  restore(job: JobConfig, configRev: number): Promise<JobRecord>;
}

// ---------------------------------------------------------------------------------------------
// Runs (history rings) and checkpoints

export type RunStatus = 'running' | 'parked' | 'ok' | 'failed' | 'abandoned';

/** Per-destination state of one run (which copies exist and verified). */
export interface RunDestinationState {
  /** e.g. 'pending' | 'written' | 'verified' | 'failed' | 'pruned' (the engine's vocabulary). */
  state: string;
  /** Failure reason from the closed list when this destination failed. */
  reason?: string | null;
  bytes?: number;
  updatedAt?: string;
  [extra: string]: unknown;
}

export interface RunRecord {
  id: string;
  jobId: string;
  /** Global run index (1, 2, ...) from the run-log counter; orders runs across jobs. */
  seq: number;
  status: RunStatus;
  /** Failure reason from the closed list (failed/abandoned), or null. */
  reason: string | null;
  /** Short one-way digest of the raw failure message, or null. */
  causeDigest: string | null;
  /** Records skipped or vanished mid-run (an `ok` run can carry warnings). */
  warnings: number;
  prevRunId: string | null;
  /** What started it, e.g. 'schedule' | 'manual' | 'resume' | 'drill'. */
  trigger: string;
  startedAt: string;
  updatedAt: string;
  finishedAt: string | null;
  bytes: number;
  records: number;
  destinations: Record<string, RunDestinationState>;
  /** When retention pruned this run's archives (drives `prevRunIdStatus: 'pruned'`), or null. */
  prunedAt: string | null;
  /** Free-form engine data (throttle ladder step, archive ids, ...), never secrets. */
  detail: Record<string, unknown>;
}

export interface RunStart {
  id: string;
  jobId: string;
  prevRunId?: string | null;
  trigger?: string;
  /** Default 'running'. */
  status?: RunStatus;
  startedAt?: string;
  destinations?: Record<string, RunDestinationState>;
  detail?: Record<string, unknown>;
}

/** Fields a run update may set; absent fields keep their value. */
export interface RunPatch {
  status?: RunStatus;
  reason?: string | null;
  causeDigest?: string | null;
  warnings?: number;
  finishedAt?: string | null;
  bytes?: number;
  records?: number;
  /** Merged into the stored map per destination id (replaces that destination's entry). */
  destinations?: Record<string, RunDestinationState>;
  prunedAt?: string | null;
  /** Shallow-merged into the stored detail. */
  detail?: Record<string, unknown>;
}

/** Counters beside the rings (the all-rings history answer). */
export interface RunCounters {
  runsRecordedTotal: number;
  runsRetainedCount: number;
  /** Runs that fell out of a ring by roll-over (a floor when `runlogCounterReset`). */
  runsRolledOverCount: number;
  /** True when the recorded counter is below a retained run's index (it was wound back). */
  runlogCounterReset: boolean;
}

/**
 * History rings: one bounded ring per job (size `historyLimit`, default 50). Recording a run
 * beyond the bound drops the oldest finished runs of that job (never an in-flight one) and counts
 * them as rolled over.
 */
export interface RunsRepository {
  /** Records a new run in its job's ring (increments the counters). Throws ERR_STATE_CONFLICT if the id exists. */
  start(run: RunStart): Promise<RunRecord>;
  /** Applies a patch; returns the updated run. Throws ERR_STATE_NOT_FOUND when absent. */
  update(id: string, patch: RunPatch): Promise<RunRecord>;
  /**
   * Applies the patch only when the run's status is one of `from` (atomic compare-and-set).
   * Returns the updated run, or null when absent or in another status. With `lease`, the same
   * transaction first checks the lease (fencing): ERR_STATE_LEASE_LOST when it is no longer held.
   */
  transition(
    id: string,
    from: RunStatus[],
    patch: RunPatch,
    options?: { lease?: LeaseToken },
  ): Promise<RunRecord | null>;
  get(id: string): Promise<RunRecord | null>;
  /** One job's ring, newest first. */
  listForJob(jobId: string, options?: { limit?: number }): Promise<RunRecord[]>;
  /** Runs in the given statuses (default running and parked), oldest first: resume candidates. */
  listByStatus(statuses?: RunStatus[]): Promise<RunRecord[]>;
  /** The latest `ok` run of a job started at or before `at` (RFC 3339), or null. */
  latestOk(jobId: string, at?: string): Promise<RunRecord | null>;
  /** Bounds of a job's retained ring (oldest/newest startedAt), null when empty. */
  window(jobId: string): Promise<{ oldest: string; newest: string; count: number } | null>;
  /** Counters for all rings (or one job's ring with `jobId`). */
  counters(jobId?: string): Promise<RunCounters>;
  /**
   * Puts back a job's history ring as another store held it (control-plane restore): each finished
   * run verbatim (its id, `seq`, `prevRunId`, times and destinations), skipping ids already present,
   * and raises the run-log counter to at least the highest `seq` and `recordedFloor`, so the next
   * run started gets the next `seq` and `latestOk` names the restored predecessor. The job's ring
   * counters become at least `recordedTotal` / `rolledOver`. One transaction. Throws
   * ERR_STATE_INVALID for a run in flight (`running`, `parked`) or of another job.
   */
  restoreRing(
    jobId: string,
    ring: { runs: RunRecord[]; recordedTotal: number; rolledOver: number; recordedFloor?: number },
  ): Promise<{ inserted: number; skipped: number }>;
}

export interface CheckpointRecord {
  runId: string;
  jobId: string;
  /** Sealed (operational-key encrypted) resume state; opaque to the store. */
  sealed: Uint8Array;
  updatedAt: string;
}

/** One sealed checkpoint per run (the specification's per-run seal state object). */
export interface CheckpointsRepository {
  /**
   * Inserts or replaces the run's checkpoint. With `lease`, only while that lease is held (the
   * same transaction checks it): ERR_STATE_LEASE_LOST otherwise, so a stale holder cannot
   * overwrite its successor's checkpoint.
   */
  put(
    runId: string,
    jobId: string,
    sealed: Uint8Array,
    options?: { lease?: LeaseToken },
  ): Promise<CheckpointRecord>;
  get(runId: string): Promise<CheckpointRecord | null>;
  /** Returns true when a checkpoint was removed. */
  delete(runId: string): Promise<boolean>;
}

// ---------------------------------------------------------------------------------------------
// Leases

export interface Lease {
  name: string;
  holder: string;
  /** Epoch milliseconds. */
  expiresAt: number;
  /** Fencing token: grows on every acquisition (also a re-acquisition by the same holder); a renewal keeps it. */
  fence: number;
}

/** What a fenced write checks: `holder` still holds `name` with this fencing token, unexpired. */
export interface LeaseToken {
  name: string;
  holder: string;
  fence: number;
}

/**
 * A lease kept alive by `holdLease` / `keepLease` (held-lease.ts): renewed every third of its TTL
 * with its fencing token; `signal` aborts (reason: an ERR_STATE_LEASE_LOST StateError) the moment
 * it is known lost: a renewal refused (another holder took it, or it was released), renewals
 * failing until the lease's known expiry passed (the store unreachable), or `assertHeld` refused.
 */
export interface HeldLease extends LeaseToken {
  readonly signal: AbortSignal;
  /** Why it was lost, or null while held. */
  readonly lostReason: string | null;
  /**
   * The commit-point check: one compare-and-set in the store (holder, fence, unexpired) that also
   * extends the lease by its TTL. Throws ERR_STATE_LEASE_LOST (and aborts `signal`) when lost.
   */
  assertHeld(): Promise<void>;
  /** Stops renewing and releases the lease (only if still held with this token). */
  release(): Promise<void>;
}

/**
 * Named leases (run lock `run:<jobId>`, scheduler tick `tick`): atomic on both backends by one
 * conditional upsert, so of two engine processes on one database only one holds a lease at a
 * time. Expiry is judged by the clock of the process that asks (`OpenStateOptions.now`); replicas
 * need synchronised clocks, and TTLs far above the skew.
 */
export interface LeasesRepository {
  /**
   * Takes the lease when free, expired, or already held by `holder` (then it is renewed).
   * Returns the lease, or null when another holder has it.
   */
  acquire(name: string, holder: string, ttlMs: number): Promise<Lease | null>;
  /**
   * Extends a lease `holder` still holds (even if just expired but not taken); with `fence`, only
   * while it still carries that fencing token. Null when lost.
   */
  renew(name: string, holder: string, ttlMs: number, fence?: number): Promise<Lease | null>;
  /**
   * The fencing check: succeeds only when `token.holder` holds `token.name` with `token.fence`
   * and the lease has not expired; with `extendMs` it also extends it (one compare-and-set).
   * Throws ERR_STATE_LEASE_LOST otherwise.
   */
  assertHeld(token: LeaseToken, options?: { extendMs?: number }): Promise<Lease>;
  /** Releases it if `holder` holds it (with `fence`, only that acquisition); returns whether it did. */
  release(name: string, holder: string, fence?: number): Promise<boolean>;
  /** The current lease (expired or not), or null when never taken or released. */
  get(name: string): Promise<Lease | null>;
}

// ---------------------------------------------------------------------------------------------
// Rate limits

/** A counter's state after a hit (or a read): requests in the current window and time to its end. */
export interface RateLimitCount {
  count: number;
  resetInMs: number;
}

/**
 * Fixed-window request counters kept in the store, so every engine process sharing it counts
 * against one limit (the specification's per-caller limit on mutating POSTs).
 */
export interface RateLimitsRepository {
  /**
   * Counts one request under `key` (one atomic upsert): a new window of `windowMs` starts when
   * none is open. Returns the count within the window, this request included.
   */
  hit(key: string, windowMs: number): Promise<RateLimitCount>;
  /** The counter without counting (count 0 when no window is open). */
  read(key: string, windowMs: number): Promise<RateLimitCount>;
  /** Deletes counters whose window started more than `olderThanMs` ago; returns how many. */
  prune(olderThanMs: number): Promise<number>;
}

// ---------------------------------------------------------------------------------------------
// Settings, update state

/**
 * Key-value settings (restore-approval on/off, admin-token retired latch, first-start markers,
 * last scheduler tick). Values are JSON.
 */
export interface SettingsRepository {
  get<T = unknown>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
  /** Sets only when absent (a latch or first-start marker); returns true when it set it. */
  setIfAbsent(key: string, value: unknown): Promise<boolean>;
  /** Returns true when a value was removed. */
  delete(key: string): Promise<boolean>;
  /** All settings whose key starts with `prefix`. */
  list(prefix?: string): Promise<Array<{ key: string; value: unknown; updatedAt: string }>>;
}

/** The update lifecycle's state (highest settled version, pending update, ...): JSON key-value. */
export interface UpdateStateRepository {
  get<T = unknown>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
  list(): Promise<Array<{ key: string; value: unknown; updatedAt: string }>>;
}

// ---------------------------------------------------------------------------------------------
// Roles and sessions

export interface RoleAssignment {
  /** Stable subject (issuer + user id). */
  subject: string;
  /** Built-in role name or a custom role name (authz decides what it means). */
  role: string;
  email: string | null;
  grantedBy: string | null;
  grantedAt: string;
}

export interface CustomRole {
  name: string;
  /** Built-in base role whose capabilities it starts from. */
  base: string;
  /** Capabilities added to the base (authz refuses non-conferrable ones). */
  capabilities: string[];
  description: string | null;
  updatedAt: string;
}

export interface RolesRepository {
  get(subject: string): Promise<RoleAssignment | null>;
  list(): Promise<RoleAssignment[]>;
  /** Inserts or replaces the subject's role. */
  assign(a: Omit<RoleAssignment, 'grantedAt'> & { grantedAt?: string }): Promise<RoleAssignment>;
  /** Returns true when an assignment was removed. */
  remove(subject: string): Promise<boolean>;
  /** How many subjects hold `role` (e.g. to keep at least one owner). */
  count(role: string): Promise<number>;
  getCustomRole(name: string): Promise<CustomRole | null>;
  listCustomRoles(): Promise<CustomRole[]>;
  putCustomRole(r: Omit<CustomRole, 'updatedAt'>): Promise<CustomRole>;
  deleteCustomRole(name: string): Promise<boolean>;
}

export interface SessionRecord {
  /** A digest of the session cookie value, never the value itself. */
  id: string;
  subject: string;
  email: string | null;
  method: string;
  createdAt: string;
  expiresAt: string;
  data: Record<string, unknown>;
}

export interface SessionsRepository {
  create(s: Omit<SessionRecord, 'createdAt'> & { createdAt?: string }): Promise<SessionRecord>;
  /** The session if present and not expired at `now`, else null. */
  get(id: string): Promise<SessionRecord | null>;
  delete(id: string): Promise<boolean>;
  /** Ends every session of a subject (deprovision); returns how many. */
  deleteForSubject(subject: string): Promise<number>;
  /** Removes expired sessions; returns how many. */
  purgeExpired(): Promise<number>;
}

// ---------------------------------------------------------------------------------------------
// People: passkeys, recovery codes, single-use tokens (formats: @coffer/identity, docs/identity.md)

export interface PasskeyRecord {
  /** Credential id, base64url. */
  id: string;
  subject: string;
  /** The normalised email the passkey is bound to. */
  email: string;
  /** COSE public key, base64url. */
  publicKey: string;
  counter: number;
  transports: string[];
  createdAt: string;
  usedAt: string | null;
}

export interface RecoveryCodeVerifier {
  selector: string;
  hash: string;
}

export interface OneTimeTokenRecord {
  id: string;
  purpose: string;
  boundTo: string;
  /** Digest of the token's secret (never the secret). */
  verifier: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

export interface IdentityRepository {
  /** Stores a new passkey; ERR_STATE_CONFLICT when the credential id is taken. */
  addPasskey(p: Omit<PasskeyRecord, 'createdAt' | 'usedAt'>): Promise<PasskeyRecord>;
  passkey(id: string): Promise<PasskeyRecord | null>;
  passkeysOf(subject: string): Promise<PasskeyRecord[]>;
  /** Whether any passkey is bound to `email` (an email holding a passkey cannot be re-bound). */
  emailHasPasskey(email: string): Promise<boolean>;
  /**
   * Records a sign-in: moves the counter from `from` to `to` only if it is still `from` (two
   * sign-ins racing with one answer cannot both win). Returns whether it moved.
   */
  usePasskey(id: string, from: number, to: number): Promise<boolean>;
  removePasskey(id: string): Promise<boolean>;
  /** Replaces the subject's staged recovery codes (minted, not yet confirmed). */
  stageRecoveryCodes(subject: string, verifiers: RecoveryCodeVerifier[]): Promise<void>;
  /** Promotes the staged set over the active one, in one write; false when nothing was staged. */
  promoteRecoveryCodes(subject: string): Promise<boolean>;
  /** The subject's active verifiers. */
  recoveryCodes(subject: string): Promise<RecoveryCodeVerifier[]>;
  /** Removes one active verifier (a code works once); false when it was already gone. */
  useRecoveryCode(subject: string, selector: string): Promise<boolean>;
  /**
   * Stores a single-use token. With `replace`, every other token of the same purpose and
   * binding is removed in the same write (a new set-up link replaces the previous one).
   */
  putToken(record: OneTimeTokenRecord, options?: { replace?: boolean }): Promise<void>;
  /** The token `id` without using it up (null when absent, or of another purpose or binding). */
  getToken(id: string, expect?: { purpose?: string; boundTo?: string }): Promise<OneTimeTokenRecord | null>;
  /**
   * Removes and returns the token `id` in one write (single use), or null; expiry is the caller's
   * check. With `expect`, a token of another purpose or binding is left in place and null returned
   * (a caller presenting someone else's token cannot use it up).
   */
  takeToken(id: string, expect?: { purpose?: string; boundTo?: string }): Promise<OneTimeTokenRecord | null>;
  /** Removes tokens expired at `now` (ms); returns how many. */
  purgeTokens(now: number): Promise<number>;
}

// ---------------------------------------------------------------------------------------------
// Approvals (restore approval, config changes, owner actions)

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'consumed' | 'void' | 'expired';

export interface ApprovalRecord {
  id: string;
  /** 'restore' | 'config-change' | 'owner-action' (the engine's vocabulary). */
  kind: string;
  status: ApprovalStatus;
  /** The binding hash (restore: the plan hash), or null. */
  subjectHash: string | null;
  requestedBy: string | null;
  requestedByEmail: string | null;
  requestedAt: string;
  decidedBy: string | null;
  decidedByEmail: string | null;
  decidedAt: string | null;
  expiresAt: string | null;
  /** Kind-specific payload (plannedAt, runId, proposed config ...), never secrets. */
  detail: Record<string, unknown>;
  updatedAt: string;
}

export interface ApprovalsRepository {
  /** Creates a pending approval; throws ERR_STATE_CONFLICT when the id exists. */
  create(a: {
    id: string;
    kind: string;
    subjectHash?: string | null;
    requestedBy?: string | null;
    requestedByEmail?: string | null;
    requestedAt?: string;
    expiresAt?: string | null;
    detail?: Record<string, unknown>;
  }): Promise<ApprovalRecord>;
  get(id: string): Promise<ApprovalRecord | null>;
  /** Newest first, optionally filtered. */
  list(filter?: {
    kind?: string;
    status?: ApprovalStatus[];
    subjectHash?: string;
  }): Promise<ApprovalRecord[]>;
  /**
   * Atomic compare-and-set: moves `id` to `to` only if its status is in `from`. Returns the
   * updated record, or null when absent or in another status (so an approval is consumed once).
   */
  transition(
    id: string,
    from: ApprovalStatus[],
    to: ApprovalStatus,
    decision?: { by?: string | null; byEmail?: string | null; detail?: Record<string, unknown> },
  ): Promise<ApprovalRecord | null>;
}

// ---------------------------------------------------------------------------------------------
// Audit chain

/** The chain head: the last appended event's seq and hash. */
export interface AuditHead {
  seq: number;
  hash: string;
}

/** What an audit builder returns; the store adds nothing and checks `seq` continues the chain. */
export interface AuditRowInput {
  /** Must be `(prev?.seq ?? 0) + 1`. */
  seq: number;
  ts: string;
  /** Must be `prev.hash`, or the builder's genesis value when prev is null. */
  prevHash: string;
  hash: string;
  action: string;
  actorSubject?: string | null;
  actorEmail?: string | null;
  /** The whole event as hashed (including seq, ts, prevHash); stored verbatim as JSON. */
  event: Record<string, unknown>;
}

export interface AuditRow {
  seq: number;
  ts: string;
  prevHash: string;
  hash: string;
  action: string;
  actorSubject: string | null;
  actorEmail: string | null;
  event: Record<string, unknown>;
}

export interface AuditQuery {
  /** Only events with seq below this (newest-first paging). */
  beforeSeq?: number;
  /** Only events with seq above this (feed paging, oldest first). */
  afterSeq?: number;
  action?: string;
  /** Matches actor subject or email exactly. */
  actor?: string;
  /** RFC 3339 bounds on ts (inclusive). */
  since?: string;
  until?: string;
  limit?: number;
  order?: 'asc' | 'desc';
}

/**
 * Append-only audit rows. `append` is a serialised transaction (SQLite BEGIN IMMEDIATE; PostgreSQL
 * a transaction-scoped advisory lock) so the chain stays linear under concurrent writers,
 * including several engine processes on one PostgreSQL: the builder sees the true head and its
 * row is inserted before anyone else reads the head.
 */
export interface AuditRepository {
  /**
   * Calls `build(head)` inside the transaction and inserts its row. Returns the stored row.
   * Throws ERR_STATE_INVARIANT when the row's seq or prevHash do not continue the head; an error
   * thrown by `build` itself aborts the append and is rethrown unchanged.
   */
  append(build: (prev: AuditHead | null) => AuditRowInput | Promise<AuditRowInput>): Promise<AuditRow>;
  head(): Promise<AuditHead | null>;
  /** Lowest retained seq, or null when empty. */
  earliestSeq(): Promise<number | null>;
  get(seq: number): Promise<AuditRow | null>;
  /** Filtered page; default order desc (newest first), default limit 100, max 10000. */
  query(q?: AuditQuery): Promise<AuditRow[]>;
}

// ---------------------------------------------------------------------------------------------
// Pull credentials

export type PullScope = 'diagnostics' | 'audit-feed' | 'metrics';

export interface PullCredential {
  scope: PullScope;
  /** `dpc_...`: non-secret lookup label. */
  clientId: string;
  /** Hex SHA-384 of the secret (96 characters). The secret itself is never stored. */
  verifier: string;
  grantedBy: string | null;
  grantedAt: string;
  expiresAt: string;
  /** Last pull timestamps, newest last, at most 50. */
  pulls: string[];
}

/** One active grant per scope (the scope is the key). */
export interface CredentialsRepository {
  get(scope: PullScope): Promise<PullCredential | null>;
  list(): Promise<PullCredential[]>;
  /** Stores the grant for its scope, replacing any previous one; returns the replaced grant or null. */
  replace(c: Omit<PullCredential, 'pulls'>): Promise<PullCredential | null>;
  /** Deletes the scope's grant (only if its client id matches, when given); returns whether it did. */
  delete(scope: PullScope, clientId?: string): Promise<boolean>;
  /** Appends a pull timestamp (trail trimmed to 50) if the grant still has that client id. */
  recordPull(scope: PullScope, clientId: string, at?: string): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Notifications (minimal)

export interface NotificationChannel {
  id: string;
  kind: string;
  name: string;
  enabled: boolean;
  /** Transport fields only; write-only secrets arrive already sealed by the engine. */
  config: Record<string, unknown>;
  updatedAt: string;
}

export interface NotificationRule {
  id: string;
  /** `global` or a job id. */
  scope: string;
  rule: Record<string, unknown>;
  updatedAt: string;
}

export interface NotificationDelivery {
  seq: number;
  at: string;
  event: string;
  severity: string;
  channelKind: string;
  channelId: string | null;
  detail: string;
  accepted: boolean;
  test: boolean;
}

export interface NotificationsRepository {
  listChannels(): Promise<NotificationChannel[]>;
  getChannel(id: string): Promise<NotificationChannel | null>;
  putChannel(c: Omit<NotificationChannel, 'updatedAt'>): Promise<NotificationChannel>;
  deleteChannel(id: string): Promise<boolean>;
  listRules(): Promise<NotificationRule[]>;
  putRule(r: Omit<NotificationRule, 'updatedAt'>): Promise<NotificationRule>;
  deleteRule(id: string): Promise<boolean>;
  /** Appends to the delivery ring (capped at 1000 entries). */
  recordDelivery(
    d: Omit<NotificationDelivery, 'seq' | 'at'> & { at?: string },
  ): Promise<NotificationDelivery>;
  /** Newest first. */
  listDeliveries(limit?: number): Promise<NotificationDelivery[]>;
}

// ---------------------------------------------------------------------------------------------
// The store

export interface OpenStateOptions {
  /** Absent: SQLite file `<dataDir>/state.sqlite`. `postgres://` / `postgresql://`: PostgreSQL. */
  url?: string;
  dataDir: string;
  /** Clock for timestamps and lease expiry (tests inject one). Default `() => new Date()`. */
  now?: () => Date;
  /** Per-job history ring size. Default 50. */
  historyLimit?: number;
  /** How long a write waits for the database lock before ERR_STATE_UNAVAILABLE. Default 15000. */
  lockTimeoutMs?: number;
  /** PostgreSQL pool size. Default 10. */
  poolMax?: number;
  /**
   * SQLite `synchronous` level. Default `FULL` (every commit fsynced, see README "Durability");
   * `NORMAL` exists only so bench/state.mjs can measure what FULL costs. The engine never sets it.
   */
  sqliteSynchronous?: 'FULL' | 'NORMAL';
}

export interface State {
  readonly backend: 'sqlite' | 'postgres';
  /** Where the state lives, without credentials (`sqlite:/data/state.sqlite`, `postgres://host:port/db`). */
  readonly description: string;
  readonly jobs: JobsRepository;
  readonly runs: RunsRepository;
  readonly checkpoints: CheckpointsRepository;
  readonly leases: LeasesRepository;
  readonly rateLimits: RateLimitsRepository;
  readonly settings: SettingsRepository;
  readonly roles: RolesRepository;
  readonly sessions: SessionsRepository;
  readonly identity: IdentityRepository;
  readonly approvals: ApprovalsRepository;
  readonly audit: AuditRepository;
  readonly credentials: CredentialsRepository;
  readonly notifications: NotificationsRepository;
  readonly updates: UpdateStateRepository;
  /** One trivial query; throws ERR_STATE_UNAVAILABLE when the database does not answer. */
  ping(): Promise<void>;
  /**
   * SQLite: the open connection's `journalMode` (`wal`) and `synchronous` level (`FULL`), read
   * back from the database; null on PostgreSQL (durable at commit by its own WAL).
   */
  durability(): Promise<{ journalMode: string; synchronous: string } | null>;
  /**
   * Closes the connection(s) after the operations already started have settled (so a graceful
   * shutdown loses no write); idempotent. Calls made after `close` began throw ERR_STATE_CLOSED.
   */
  close(): Promise<void>;
}
