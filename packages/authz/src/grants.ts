/**
 * Who may grant, remove or define which role ("Roles and capabilities": "Only an owner can grant
 * or remove the owner role"; "Registration and first owner").
 *
 * Rules (reasons in docs/security-model.md):
 * 1. Changing anyone's role needs `roles.write` (owner and access-admin hold it).
 * 2. Owner-managed roles: `owner`, and every role that carries `roles.write` (access-admin, and
 *    any custom role adding it), are granted and removed only by an owner. So an access-admin
 *    cannot mint or remove another access-admin: the power to hand out roles never propagates
 *    without an owner.
 * 3. The bare admin token acts as owner but never grants `owner`: it has no subject, and the
 *    first owner is claimed only through bootstrap registration while the role table is empty,
 *    after which no owner can ever be minted from the token.
 * 4. Defining or editing a custom role counts as being able to grant it (an edit is checked
 *    against both the old and the new definition), so adding `roles.write` to a custom role that
 *    members already hold is owner-only too.
 * Subject-level checks (not demoting the last owner, maker-is-not-checker) need state and stay in
 * the engine.
 */

import type { CustomRole } from './custom-roles.ts';
import { AuthzForbiddenError } from './errors.ts';
import {
  type Caller,
  can,
  forbiddenBody,
  isOwner,
  type RoleAssignment,
  resolveCapabilities,
} from './resolve.ts';

/**
 * What a caller needs in order to grant or remove `role`: `'owner'` for owner-managed roles
 * (owner, and any role carrying `roles.write`), otherwise the `roles.write` capability.
 * Throws the errors of `resolveCapabilities` for an unknown or invalid role.
 */
export function roleChangeRequirement(role: RoleAssignment): 'owner' | 'roles.write' {
  if (role === 'owner' || resolveCapabilities(role).has('roles.write')) return 'owner';
  return 'roles.write';
}

/** Whether `granter` may give `target` to a member. Throws only for an unknown or invalid role. */
export function canGrantRole(granter: RoleAssignment | Caller, target: RoleAssignment): boolean {
  if (isAdminToken(granter) && target === 'owner') return false;
  return meets(granter, roleChangeRequirement(target));
}

/**
 * Whether `remover` may take `current` away from a member (replacing it with another role is a
 * removal of `current` plus a grant of the new one). Throws only for an unknown or invalid role.
 */
export function canRemoveRole(remover: RoleAssignment | Caller, current: RoleAssignment): boolean {
  return meets(remover, roleChangeRequirement(current));
}

/**
 * Whether `definer` may create or edit the custom role `role` (for an edit, call it for the old
 * and the new definition). Same rule as granting it.
 */
export function canDefineCustomRole(definer: RoleAssignment | Caller, role: CustomRole): boolean {
  return canGrantRole(definer, role);
}

/**
 * Throws `AuthzForbiddenError` unless `granter` may grant `target`: `ERR_AUTHZ_OWNER_ONLY`
 * (body `required: 'owner'`) for an owner-managed role, else `ERR_AUTHZ_FORBIDDEN` (body
 * `required: 'roles.write'`).
 */
export function assertCanGrantRole(granter: RoleAssignment | Caller, target: RoleAssignment): void {
  if (!canGrantRole(granter, target)) refuse(granter, roleChangeRequirement(target));
}

/** As {@link assertCanGrantRole}, for removing `current`. */
export function assertCanRemoveRole(remover: RoleAssignment | Caller, current: RoleAssignment): void {
  if (!canRemoveRole(remover, current)) refuse(remover, roleChangeRequirement(current));
}

function meets(caller: RoleAssignment | Caller, requirement: 'owner' | 'roles.write'): boolean {
  return requirement === 'owner' ? isOwner(caller) : can(caller, 'roles.write');
}

function isAdminToken(caller: RoleAssignment | Caller): boolean {
  return (
    typeof caller === 'object' && caller !== null && 'adminToken' in caller && caller.adminToken === true
  );
}

function refuse(caller: RoleAssignment | Caller, requirement: 'owner' | 'roles.write'): never {
  throw new AuthzForbiddenError(
    requirement === 'owner' ? 'ERR_AUTHZ_OWNER_ONLY' : 'ERR_AUTHZ_FORBIDDEN',
    forbiddenBody(requirement, caller),
  );
}
