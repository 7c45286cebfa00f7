/**
 * Kysely table types. Column names are snake_case; JSON columns are text; times are RFC 3339
 * text (fixed-width `toISOString()` so text order is time order); lease expiry and counters are
 * bigint (pg returns int8 as a string, so readers go through `num()`).
 */

type Int8 = number | string | bigint;

export interface JobsTable {
  id: string;
  config: string;
  config_rev: number;
  created_at: string;
  updated_at: string;
  changed_at: string;
  last_changed_fields: string;
}

export interface JobTombstonesTable {
  id: string;
  deleted_rev: number;
  deleted_at: string;
}

export interface JobRevisionsTable {
  job_id: string;
  rev: number;
  changed_fields: string;
  changed_at: string;
}

export interface RunsTable {
  id: string;
  job_id: string;
  seq: Int8;
  status: string;
  reason: string | null;
  cause_digest: string | null;
  warnings: number;
  prev_run_id: string | null;
  trigger: string;
  started_at: string;
  updated_at: string;
  finished_at: string | null;
  bytes: Int8;
  records: Int8;
  destinations: string;
  pruned_at: string | null;
  detail: string;
}

export interface RunRingsTable {
  job_id: string;
  recorded_total: Int8;
  rolled_over: Int8;
}

export interface CountersTable {
  name: string;
  value: Int8;
}

export interface CheckpointsTable {
  run_id: string;
  job_id: string;
  sealed: Uint8Array;
  updated_at: string;
}

export interface RateLimitsTable {
  key: string;
  /** Epoch milliseconds. */
  window_start: Int8;
  count: Int8;
}

export interface LeasesTable {
  name: string;
  holder: string;
  expires_at: Int8;
  fence: Int8;
}

export interface KeyValueTable {
  key: string;
  value: string;
  updated_at: string;
}

export interface RoleAssignmentsTable {
  subject: string;
  role: string;
  email: string | null;
  granted_by: string | null;
  granted_at: string;
}

export interface CustomRolesTable {
  name: string;
  base: string;
  capabilities: string;
  description: string | null;
  updated_at: string;
}

export interface PasskeysTable {
  id: string;
  subject: string;
  email: string;
  public_key: string;
  counter: Int8;
  transports: string;
  created_at: string;
  used_at: string | null;
}

export interface RecoveryCodesTable {
  subject: string;
  staged: number;
  selector: string;
  hash: string;
  created_at: string;
}

export interface OneTimeTokensTable {
  id: string;
  purpose: string;
  bound_to: string;
  verifier: string;
  expires_at: Int8;
  created_at: string;
}

export interface SessionsTable {
  id: string;
  subject: string;
  email: string | null;
  method: string;
  created_at: string;
  expires_at: string;
  data: string;
}

export interface ApprovalsTable {
  id: string;
  kind: string;
  status: string;
  subject_hash: string | null;
  requested_by: string | null;
  requested_by_email: string | null;
  requested_at: string;
  decided_by: string | null;
  decided_by_email: string | null;
  decided_at: string | null;
  expires_at: string | null;
  detail: string;
  updated_at: string;
}

export interface AuditEventsTable {
  seq: Int8;
  ts: string;
  prev_hash: string;
  hash: string;
  action: string;
  actor_subject: string | null;
  actor_email: string | null;
  event: string;
}

export interface PullCredentialsTable {
  scope: string;
  client_id: string;
  verifier: string;
  granted_by: string | null;
  granted_at: string;
  expires_at: string;
  pulls: string;
}

export interface NotificationChannelsTable {
  id: string;
  kind: string;
  name: string;
  enabled: number;
  config: string;
  updated_at: string;
}

export interface NotificationRulesTable {
  id: string;
  scope: string;
  rule: string;
  updated_at: string;
}

export interface NotificationDeliveriesTable {
  seq: Int8;
  at: string;
  event: string;
  severity: string;
  channel_kind: string;
  channel_id: string | null;
  detail: string;
  accepted: number;
  test: number;
}

export interface Schema {
  jobs: JobsTable;
  job_tombstones: JobTombstonesTable;
  job_revisions: JobRevisionsTable;
  runs: RunsTable;
  run_rings: RunRingsTable;
  counters: CountersTable;
  checkpoints: CheckpointsTable;
  leases: LeasesTable;
  rate_limits: RateLimitsTable;
  settings: KeyValueTable;
  update_state: KeyValueTable;
  role_assignments: RoleAssignmentsTable;
  custom_roles: CustomRolesTable;
  sessions: SessionsTable;
  passkeys: PasskeysTable;
  recovery_codes: RecoveryCodesTable;
  one_time_tokens: OneTimeTokensTable;
  approvals: ApprovalsTable;
  audit_events: AuditEventsTable;
  pull_credentials: PullCredentialsTable;
  notification_channels: NotificationChannelsTable;
  notification_rules: NotificationRulesTable;
  notification_deliveries: NotificationDeliveriesTable;
}
