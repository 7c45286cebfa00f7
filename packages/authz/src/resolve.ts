/**
 * Role resolution and the capability gate ("Roles and capabilities", "Capability gate",
 * "Errors": the 403 body).
 *
 * Security-relevant behaviour:
 * - The role is looked up from the stable subject on every request; an unmatched subject, a
 *   missing subject or a malformed table entry resolves to `viewer` (fail closed to the floor).
 * - Role-table lookups use own properties only, so a subject such as `__proto__` or
 *   `constructor` can never pick up an inherited value.
 * - Custom roles are re-validated whenever their capabilities are resolved, so a tampered stored
 *   definition cannot confer `keys.ceremony` or `posture.riskaccept`.
 * - The admin bearer token acts as owner with no subject ({@link ADMIN_TOKEN_CALLER}).
 */

import { type CustomRole, defineCustomRole, isCustomRole } from './custom-roles.ts';
import { AuthzForbiddenError, type ForbiddenBody } from './errors.ts';
import { unknownCapability, unknownRole } from './internal/errors.ts';
import {
  ADMIN_TOKEN_ROLE,
  type Capability,
  capabilitiesOf,
  DEFAULT_ROLE,
  isCapability,
  isRole,
  type Role,
} from './roles.ts';

/** A role held by a member: a built-in role name or a custom role. */
export type RoleAssignment = Role | CustomRole;

/** Subject -> role, as the engine loads it from its state store. */
export type RoleTable = ReadonlyMap<string, RoleAssignment> | Readonly<Record<string, RoleAssignment>>;

/**
 * An authenticated caller as the gate sees it. `adminToken` marks the bare admin bearer, which
 * acts as owner but has no subject and so can never mint an owner (see grants).
 */
export interface Caller {
  readonly role: RoleAssignment;
  readonly adminToken?: boolean;
}

/** The caller the admin bearer token resolves to: owner break-glass, no subject. */
export const ADMIN_TOKEN_CALLER: Caller = Object.freeze({ role: ADMIN_TOKEN_ROLE, adminToken: true });

/** What the gate functions accept for "the caller": a role, a caller, or a resolved capability set. */
export type Authority = RoleAssignment | Caller | ReadonlySet<Capability>;

/**
 * The role recorded for `subject` in `roleTable`, or `viewer` when the subject is missing, empty,
 * not in the table, or mapped to something that is neither a built-in role name nor a custom
 * role. Never throws: a bad entry fails closed to the floor rather than failing the request.
 */
export function resolveRole(subject: string | null | undefined, roleTable: RoleTable): RoleAssignment {
  if (typeof subject !== 'string' || subject === '') return DEFAULT_ROLE;
  let entry: unknown;
  if (roleTable instanceof Map) {
    entry = roleTable.get(subject);
  } else if (Object.hasOwn(roleTable, subject)) {
    entry = (roleTable as Readonly<Record<string, unknown>>)[subject];
  }
  if (isRole(entry) || isCustomRole(entry)) return entry;
  return DEFAULT_ROLE;
}

/**
 * The full capability set of a built-in or custom role: for a custom role, its base's set plus
 * its additions (re-validated). Returns a fresh set.
 * Throws `ERR_AUTHZ_UNKNOWN_ROLE` for an unknown role name, and any {@link defineCustomRole}
 * error for an invalid custom role.
 */
export function resolveCapabilities(assignment: RoleAssignment): ReadonlySet<Capability> {
  if (isRole(assignment)) return capabilitiesOf(assignment);
  if (isCustomRole(assignment)) {
    const role = defineCustomRole(assignment);
    const set = new Set(capabilitiesOf(role.base));
    for (const c of role.add) set.add(c);
    return set;
  }
  throw unknownRole();
}

/**
 * Whether the caller holds `capability`. Throws `ERR_AUTHZ_UNKNOWN_CAPABILITY` for a name outside
 * the 21 (a mistyped gate must fail loudly, never open), and the errors of
 * {@link resolveCapabilities} for an invalid role.
 */
export function can(caller: Authority, capability: Capability): boolean {
  if (!isCapability(capability)) throw unknownCapability();
  return capabilitySet(caller).has(capability);
}

/**
 * The specification's 403 body for a caller refused `required`: `{ error: 'forbidden',
 * required, have }`. `required` is the capability, or `'owner'` on an owner-only route. `have` is
 * the caller's built-in role; a custom-role caller shows the viewer floor (`'viewer'`), so a
 * custom role's name and composition are never disclosed and `have` stays within the closed set.
 * Throws `ERR_AUTHZ_UNKNOWN_CAPABILITY` when `required` is neither a capability nor `'owner'`.
 */
export function forbiddenBody(
  required: Capability | 'owner',
  caller: RoleAssignment | Caller,
): ForbiddenBody {
  if (required !== 'owner' && !isCapability(required)) throw unknownCapability();
  return Object.freeze({ error: 'forbidden', required, have: visibleRole(caller) });
}

/**
 * The capability gate: returns normally when the caller holds `capability`, otherwise throws
 * `AuthzForbiddenError` (`ERR_AUTHZ_FORBIDDEN`) whose `body` is the 403 body.
 */
export function requireCapability(caller: RoleAssignment | Caller, capability: Capability): void {
  if (!can(caller, capability)) {
    throw new AuthzForbiddenError('ERR_AUTHZ_FORBIDDEN', forbiddenBody(capability, caller));
  }
}

/** True when the caller's role is the built-in owner (the admin token included). */
export function isOwner(caller: RoleAssignment | Caller): boolean {
  return roleOf(caller) === 'owner';
}

/**
 * The owner guard of owner-only routes: returns normally for an owner, otherwise throws
 * `AuthzForbiddenError` (`ERR_AUTHZ_OWNER_ONLY`) whose body has `required: 'owner'`.
 */
export function requireOwner(caller: RoleAssignment | Caller): void {
  if (!isOwner(caller)) throw new AuthzForbiddenError('ERR_AUTHZ_OWNER_ONLY', forbiddenBody('owner', caller));
}

/** @internal The role of a role-or-caller argument. */
export function roleOf(caller: RoleAssignment | Caller): RoleAssignment {
  if (typeof caller === 'object' && caller !== null && !isCustomRole(caller) && 'role' in caller) {
    return caller.role;
  }
  return caller as RoleAssignment;
}

/** @internal The capability set of any {@link Authority}. */
export function capabilitySet(caller: Authority): ReadonlySet<Capability> {
  if (caller instanceof Set) return caller;
  return resolveCapabilities(roleOf(caller as RoleAssignment | Caller));
}

function visibleRole(caller: RoleAssignment | Caller): Role {
  const role = roleOf(caller);
  if (isRole(role)) return role;
  if (isCustomRole(role)) return DEFAULT_ROLE;
  throw unknownRole();
}
