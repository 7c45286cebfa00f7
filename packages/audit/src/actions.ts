/**
 * The closed vocabularies of an audit event: every action name the engine writes, the outcomes
 * and the actor authentication methods.
 *
 * `buildEvent` refuses an action that is not in {@link AUDIT_ACTIONS}, and a test keeps this list
 * equal to the table in docs/audit.md, so a new engine write cannot appear in the chain without
 * being documented first. The verifier accepts any kebab-case action (a newer engine may write a
 * name this build does not know; the hash still covers it).
 */

/**
 * Every action the engine writes, in the order docs/audit.md lists them. The first eight are the
 * names the specification gives; the rest cover every other mutation the engine applies.
 */
export const AUDIT_ACTIONS = [
  // Named by the specification.
  'engine-version-change',
  'engine-secret-present',
  'notify-channel-change',
  'notify-rule-change',
  'config-change-proposed',
  'config-change-approved',
  'config-change-rejected',
  'restore-apply-denied',
  // Jobs and runs.
  'job-upsert',
  'job-delete',
  'job-bulk',
  'job-roster-reconcile',
  'run-trigger',
  // Restore.
  'restore-request',
  'restore-approve',
  'restore-reject',
  'restore-apply',
  'restore-drill',
  'restore-approval-policy',
  // Owner actions under the second-owner gate.
  'owner-action-queued',
  'owner-action-approved',
  'owner-action-rejected',
  'owner-action-gate',
  // Pull credentials, break-glass token, support.
  'credential-mint',
  'credential-revoke',
  'admin-token-retire',
  'support-bundle-generate',
  // Identity, roles and sessions.
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
  'break-glass-key-set',
  // Single sign-on and SCIM.
  'idp-connection-change',
  'idp-role-mapping',
  'scim-deprovision',
  // Control plane.
  'control-plane-export',
  'control-plane-restore',
  'control-plane-import',
  'control-plane-apply-staged',
  'control-plane-clear',
  'config-approval-policy',
  'retention-prune-approval-policy',
  'demo-reset',
  // Updates.
  'update-apply',
  'update-settle',
  'update-rollback',
  'update-ramp',
  // The integrity canary.
  'canary-dead',
  // Notifications.
  'notify-test',
] as const;

/** One of {@link AUDIT_ACTIONS}. */
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * What happened: `applied` (the mutation took effect), `refused` (denied by a gate or rejected
 * input; nothing changed), `queued` (held for a second owner or a config approval), `failed`
 * (attempted and failed part-way or entirely), `observed` (an engine-observed fact, no request).
 */
export const AUDIT_OUTCOMES = ['applied', 'refused', 'queued', 'failed', 'observed'] as const;

/** One of {@link AUDIT_OUTCOMES}. */
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/**
 * How the actor authenticated, in the specification's method precedence plus the two non-person
 * actors: `perimeter-jwt` (perimeter access assertion), `session` (any session cookie: passkey,
 * OIDC, SAML or token session), `admin-token` (bare bearer), `pull-credential` (a minted pull
 * credential), `scim-bearer` (the SCIM facade's bearer, SCIM_BEARER_TOKEN: both null), `engine`
 * (the engine itself: cron, observation, settle).
 */
export const ACTOR_METHODS = [
  'perimeter-jwt',
  'session',
  'admin-token',
  'pull-credential',
  'scim-bearer',
  'engine',
] as const;

/** One of {@link ACTOR_METHODS}. */
export type ActorMethod = (typeof ACTOR_METHODS)[number];

/** True when `name` is one of {@link AUDIT_ACTIONS}. */
export function isAuditAction(name: unknown): name is AuditAction {
  return typeof name === 'string' && (AUDIT_ACTIONS as readonly string[]).includes(name);
}
