/**
 * The six built-in roles, the 21 capabilities and the role-by-capability matrix of the engine
 * HTTP interface specification ("Roles and capabilities").
 *
 * Authority is an explicit capability map, never a role rank: `restore-operator` and
 * `access-admin` hold subsets of owner's set, not prefixes of it, so no code may compare roles by
 * position. The cells the specification leaves open are decided here and explained, one line per
 * cell, in docs/security-model.md; a test keeps that table and this map identical.
 */

import { unknownCapability, unknownRole } from './internal/errors.ts';

/** The six built-in roles, in the specification's order (which is not a rank). */
export const ROLES = ['viewer', 'operator', 'restore-operator', 'approver', 'access-admin', 'owner'] as const;

/** A built-in role name. */
export type Role = (typeof ROLES)[number];

/** The 21 capabilities, in the order the specification's table lists them. */
export const CAPABILITIES = [
  'job.read',
  'restore.dryrun',
  'restore.verify',
  'roles.read',
  'audit.read',
  'reports.read',
  'posture.read',
  'job.write',
  'job.delete',
  'run.trigger',
  'drill.run',
  'restore.request',
  'restore.apply',
  'restore.approve',
  'roles.write',
  'access.policy',
  'keys.ceremony',
  'notify.config',
  'expiry.config',
  'scheduledtest.config',
  'posture.riskaccept',
] as const;

/** A capability name. */
export type Capability = (typeof CAPABILITIES)[number];

/** The role a member gets when nothing else is recorded, and the role of an unmatched caller. */
export const DEFAULT_ROLE: Role = 'viewer';

/** The role the admin bearer token acts as: all-or-nothing owner break-glass, with no subject. */
export const ADMIN_TOKEN_ROLE: Role = 'owner';

/** Capabilities that no custom role may ever confer: they stay owner-exclusive. */
export const NEVER_CONFERRABLE: readonly Capability[] = Object.freeze([
  'keys.ceremony',
  'posture.riskaccept',
]);

/** The seven capabilities every built-in role holds (the viewer floor). */
const FLOOR: readonly Capability[] = [
  'job.read',
  'restore.dryrun',
  'restore.verify',
  'roles.read',
  'audit.read',
  'reports.read',
  'posture.read',
];

/**
 * The matrix: each built-in role's capabilities. Frozen; read it through {@link capabilitiesOf}.
 * Reasons for every cell the specification leaves open are in docs/security-model.md.
 */
export const ROLE_CAPABILITIES: Readonly<Record<Role, readonly Capability[]>> = Object.freeze({
  viewer: Object.freeze([...FLOOR]),
  operator: Object.freeze([
    ...FLOOR,
    'job.write',
    'job.delete',
    'run.trigger',
    'drill.run',
    'restore.request',
    'notify.config',
    'expiry.config',
  ] as const),
  'restore-operator': Object.freeze([
    ...FLOOR,
    'drill.run',
    'restore.request',
    'restore.apply',
    'scheduledtest.config',
  ] as const),
  approver: Object.freeze([
    ...FLOOR,
    'job.write',
    'job.delete',
    'run.trigger',
    'drill.run',
    'restore.request',
    'restore.apply',
    'restore.approve',
    'notify.config',
    'expiry.config',
    'scheduledtest.config',
  ] as const),
  'access-admin': Object.freeze([...FLOOR, 'restore.approve', 'roles.write', 'access.policy'] as const),
  owner: Object.freeze([...CAPABILITIES]),
});

const ROLE_SET: ReadonlySet<string> = new Set(ROLES);
const CAPABILITY_SET: ReadonlySet<string> = new Set(CAPABILITIES);

/** True when `value` is a built-in role name. Never throws. */
export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && ROLE_SET.has(value);
}

/** True when `value` is one of the 21 capability names. Never throws. */
export function isCapability(value: unknown): value is Capability {
  return typeof value === 'string' && CAPABILITY_SET.has(value);
}

/**
 * The capabilities of a built-in role, as a fresh set the caller may keep.
 * Throws `ERR_AUTHZ_UNKNOWN_ROLE` for anything but a built-in role name.
 */
export function capabilitiesOf(role: Role): ReadonlySet<Capability> {
  if (!isRole(role)) throw unknownRole();
  return new Set(ROLE_CAPABILITIES[role]);
}

/**
 * The built-in roles holding `capability`, in {@link ROLES} order.
 * Throws `ERR_AUTHZ_UNKNOWN_CAPABILITY` for an unknown name.
 */
export function holdersOf(capability: Capability): readonly Role[] {
  if (!isCapability(capability)) throw unknownCapability();
  return ROLES.filter((role) => ROLE_CAPABILITIES[role].includes(capability));
}
