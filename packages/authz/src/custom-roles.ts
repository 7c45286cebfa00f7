/**
 * Custom roles ("Roles and capabilities": "Custom roles are purely additive").
 *
 * A custom role is a built-in base plus added capabilities; its resolved set is the base's set
 * plus `add`, never less, so a custom role can never take away the viewer floor nor hide a
 * capability from the gate. Security rules enforced here:
 * - `keys.ceremony` and `posture.riskaccept` are never conferrable: adding either is refused.
 * - `owner` is refused as a base, because that would confer both of them (and owner itself)
 *   under another name, side-stepping "only an owner grants owner".
 * - A custom role may not reuse a built-in role's name, so `have` and role tables stay unambiguous.
 * Caller-supplied names and capability strings are validated but never echoed in error messages.
 */

import { AuthzError } from './errors.ts';
import { unknownCapability, unknownRole } from './internal/errors.ts';
import {
  CAPABILITIES,
  type Capability,
  isCapability,
  isRole,
  NEVER_CONFERRABLE,
  type Role,
} from './roles.ts';

/** A validated custom role, as returned by {@link defineCustomRole}. Frozen. */
export interface CustomRole {
  readonly kind: 'custom';
  /** Lower-case name, 1-64 characters of `a-z 0-9 . _ -`, starting with a letter; not a built-in name. */
  readonly name: string;
  /** The built-in role it extends; never `owner`. */
  readonly base: Exclude<Role, 'owner'>;
  /** The capabilities added to the base, de-duplicated, in the canonical capability order. */
  readonly add: readonly Capability[];
}

/** What {@link defineCustomRole} accepts (for example a stored row or a request body). */
export interface CustomRoleDefinition {
  readonly name: string;
  readonly base: string;
  readonly add: readonly string[];
}

const NAME_PATTERN = /^[a-z][a-z0-9._-]{0,63}$/;

/**
 * Validates a custom role definition and returns the frozen {@link CustomRole}.
 *
 * Throws `AuthzError` with code:
 * - `ERR_AUTHZ_INVALID_CUSTOM_ROLE` when the shape is wrong or the name breaks the name rule;
 * - `ERR_AUTHZ_ROLE_NAME_TAKEN` when the name is a built-in role's;
 * - `ERR_AUTHZ_UNKNOWN_ROLE` when `base` is not a built-in role;
 * - `ERR_AUTHZ_NOT_CONFERRABLE` when `base` is `owner` or `add` names `keys.ceremony` or
 *   `posture.riskaccept`;
 * - `ERR_AUTHZ_UNKNOWN_CAPABILITY` when `add` names something outside the 21 capabilities.
 */
export function defineCustomRole(definition: CustomRoleDefinition): CustomRole {
  if (typeof definition !== 'object' || definition === null) throw invalid('definition must be an object');
  const { name, base, add } = definition;
  if (typeof name !== 'string' || !NAME_PATTERN.test(name)) {
    throw invalid('name must be 1-64 characters of a-z 0-9 . _ - starting with a letter');
  }
  if (isRole(name)) {
    throw new AuthzError('ERR_AUTHZ_ROLE_NAME_TAKEN', 'a custom role cannot take a built-in role name');
  }
  if (!isRole(base)) throw unknownRole();
  if (base === 'owner') {
    throw new AuthzError(
      'ERR_AUTHZ_NOT_CONFERRABLE',
      'a custom role cannot extend owner: it would confer keys.ceremony and posture.riskaccept',
    );
  }
  if (!Array.isArray(add)) throw invalid('add must be an array of capability names');
  const added = new Set<Capability>();
  for (const entry of add as readonly unknown[]) {
    if (!isCapability(entry)) throw unknownCapability();
    if (NEVER_CONFERRABLE.includes(entry)) {
      throw new AuthzError('ERR_AUTHZ_NOT_CONFERRABLE', `${entry} can never be conferred to another role`);
    }
    added.add(entry);
  }
  return Object.freeze({
    kind: 'custom',
    name,
    base,
    add: Object.freeze(CAPABILITIES.filter((c) => added.has(c))),
  });
}

/** True when `value` has the shape of a {@link CustomRole} (not a validation: see resolveCapabilities). */
export function isCustomRole(value: unknown): value is CustomRole {
  return typeof value === 'object' && value !== null && (value as { kind?: unknown }).kind === 'custom';
}

function invalid(message: string): AuthzError {
  return new AuthzError('ERR_AUTHZ_INVALID_CUSTOM_ROLE', message);
}
