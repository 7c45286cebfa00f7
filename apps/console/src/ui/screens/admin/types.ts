/**
 * The engine's answers the Audit, Members, Support and Account screens read, typed after the
 * engine's routes (apps/engine/src/routes/audit, admin/identity.ts, admin/roles.ts,
 * admin/owner-actions.ts, admin/sessions.ts, admin/recovery.ts, support/) and docs/audit.md §6.
 */

/** The action names the engine writes (@coffer/audit AUDIT_ACTIONS), for the filter's choices. */
export const AUDIT_ACTIONS = [
  'engine-version-change',
  'engine-secret-present',
  'notify-channel-change',
  'notify-rule-change',
  'config-change-proposed',
  'config-change-approved',
  'config-change-rejected',
  'restore-apply-denied',
  'job-upsert',
  'job-delete',
  'job-bulk',
  'job-roster-reconcile',
  'run-trigger',
  'restore-request',
  'restore-approve',
  'restore-reject',
  'restore-apply',
  'restore-drill',
  'restore-approval-policy',
  'owner-action-queued',
  'owner-action-approved',
  'owner-action-rejected',
  'owner-action-gate',
  'credential-mint',
  'credential-revoke',
  'admin-token-retire',
  'support-bundle-generate',
  'first-owner-claim',
  'passkey-register',
  'signin-factor-revoke',
  'recovery-codes-regenerate',
  'recovery-codes-confirm',
  'recovery-sign-in',
  'session-terminate',
  'role-change',
  'custom-role-change',
  'setup-acknowledge',
  'control-plane-restore',
  'control-plane-import',
  'control-plane-apply-staged',
  'demo-reset',
  'update-apply',
  'update-settle',
  'update-rollback',
  'update-ramp',
  'notify-test',
] as const;

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface AuditIdentity {
  email: string | null;
  subject: string | null;
}

/** One audit event (`@coffer/audit` AuditEvent). */
export interface AuditEvent {
  seq: number;
  ts: string;
  action: string;
  actor: AuditIdentity & { method: string };
  role: string | null;
  sourceAddress: string | null;
  approver: AuditIdentity | null;
  target: string | null;
  outcome: string;
  detail: { [key: string]: JsonValue };
  prevHash: string;
  hash: string;
}

/** `GET /admin/audit`. */
export interface AuditListPage {
  kind: 'engine-audit-list';
  v: 1;
  headSeq: number;
  headHash: string;
  count: number;
  nextBeforeSeq: number | null;
  events: AuditEvent[];
}

/** `GET /admin/audit/verify` (200 either way). */
export type AuditVerifyReport = { kind: 'engine-audit-verify'; v: 1; anchored: boolean } & (
  | { ok: true; firstSeq: number | null; headSeq: number; headHash: string; count: number }
  | {
      ok: false;
      firstBadSeq: number;
      index: number;
      problem: string;
      message: string;
      lastGood: { seq: number; hash: string } | null;
      count: number;
    }
);

/** `GET /admin/roles`. */
export interface RolesAnswer {
  capabilities: string[];
  roles: { name: string; builtIn: boolean; capabilities: string[] }[];
  /** Custom roles: a built-in base plus the capabilities added. */
  customRoles?: { name: string; base: string; capabilities: string[]; description: string | null }[];
  members: Member[];
}
export interface Member {
  subject: string;
  email: string | null;
  role: string;
}

/** `POST /admin/roles/assign`. */
export interface AssignAnswer {
  ok: true;
  subject: string;
  role: string;
  previous: string | null;
}
/** `POST /admin/roles/remove`. */
export interface RemoveAnswer {
  ok: true;
  subject: string;
  removed: boolean;
}
/** `POST /admin/roles/invite`. */
export interface InviteAnswer {
  ok: true;
  email: string;
  subject: string;
  role: string | null;
  inviteToken: string;
  expiresAt: string;
}

/** `GET /admin/owner-actions` (an owner). */
export interface OwnerActionsAnswer {
  armed: boolean;
  actions: OwnerAction[];
}
export interface OwnerAction {
  id: string;
  action: 'credential-mint' | 'admin-token-retire' | 'owner-grant' | 'gate-disarm' | (string & {});
  status: 'pending' | 'consumed' | 'rejected' | 'expired' | (string & {});
  requestedBy: string | null;
  requestedByEmail: string | null;
  requestedAt: string;
  decidedBy: string | null;
  decidedAt: string | null;
  expiresAt: string | null;
}
/** `POST /admin/owner-actions/<id>/approve`. */
export interface ApproveAnswer {
  ok: true;
  id: string;
  status: 'carried out';
  action: string;
  result: { credential?: string; scope?: string; expiresAt?: string; [key: string]: unknown };
}

export const PULL_SCOPES = ['diagnostics', 'audit-feed', 'metrics'] as const;
export type PullScope = (typeof PULL_SCOPES)[number];
/** Default and longest lifetimes (support/grants.ts LIFETIMES), in hours. */
export const SCOPE_HOURS: Record<PullScope, { default: number; max: number }> = {
  diagnostics: { default: 72, max: 7 * 24 },
  'audit-feed': { default: 90 * 24, max: 365 * 24 },
  metrics: { default: 90 * 24, max: 365 * 24 },
};

/** `GET /admin/support`. */
export interface SupportAnswer {
  vendorSealingKey: { present: boolean; fingerprint: string | null };
  signer: { present: boolean; fingerprint: string | null };
  bundleKind: string;
  credentials: CredentialView[];
}
export interface CredentialView {
  scope: PullScope;
  active: boolean;
  clientId: string | null;
  grantedBy: string | null;
  grantedAt: string | null;
  expiresAt: string | null;
  expired: boolean;
  pulls: string[];
  lastPullAt: string | null;
}
/** `POST /admin/support/credentials`. */
export interface MintAnswer {
  ok: true;
  scope: PullScope;
  clientId: string;
  secret: string;
  credential: string;
  expiresAt: string;
  lifetimeSeconds: number;
  grantedBy: string | null;
  replaced: boolean;
}

/** `POST /admin/auth/recovery-codes/regenerate`. */
export interface RegenerateAnswer {
  ok: true;
  recoveryCodesPending: true;
  recoveryCodes: string[];
}
/** `POST /admin/sessions/terminate-others`. */
export interface TerminateOthersAnswer {
  ok: true;
  ended: string;
  csrfToken: string;
}
