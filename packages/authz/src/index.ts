/**
 * @coffer/authz: the engine's roles, capabilities and authorisation decisions, as pure functions
 * with no I/O (engine HTTP interface specification: "Roles and capabilities", "Capability gate",
 * "Errors" 403 body, "Registration and first owner").
 *
 * Security-relevant behaviour in brief: authority is an explicit capability map, never a rank;
 * an unmatched caller is `viewer`; custom roles only add to a built-in base and can never confer
 * `keys.ceremony` or `posture.riskaccept`; only an owner grants or removes owner (and any role
 * carrying `roles.write`); the admin token is owner break-glass with no subject. See
 * docs/security-model.md for the full matrix and its reasons.
 */

export {
  type CustomRole,
  type CustomRoleDefinition,
  defineCustomRole,
  isCustomRole,
} from './custom-roles.ts';
export {
  AUTHZ_ERROR_CODES,
  AuthzError,
  type AuthzErrorCode,
  AuthzForbiddenError,
  type ForbiddenBody,
} from './errors.ts';
export {
  assertCanGrantRole,
  assertCanRemoveRole,
  canDefineCustomRole,
  canGrantRole,
  canRemoveRole,
  roleChangeRequirement,
} from './grants.ts';
export {
  ADMIN_TOKEN_CALLER,
  type Authority,
  type Caller,
  can,
  forbiddenBody,
  isOwner,
  type RoleAssignment,
  type RoleTable,
  requireCapability,
  requireOwner,
  resolveCapabilities,
  resolveRole,
} from './resolve.ts';
export {
  ADMIN_TOKEN_ROLE,
  CAPABILITIES,
  type Capability,
  capabilitiesOf,
  DEFAULT_ROLE,
  holdersOf,
  isCapability,
  isRole,
  NEVER_CONFERRABLE,
  ROLE_CAPABILITIES,
  ROLES,
  type Role,
} from './roles.ts';
