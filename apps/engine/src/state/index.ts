/**
 * The engine's use of @coffer/state: opening the store from the configuration, the admin-token
 * retire latch, and the role table as @coffer/authz sees it. Job preconditions are decided by
 * the store inside its transaction (JobsRepository); the routes only map its refusals to 409.
 *
 * Security-relevant behaviour: a role row whose role is neither a built-in name nor a valid
 * custom role resolves to the viewer floor (authz `resolveRole`), and a custom role is re-built
 * through authz `defineCustomRole` so a tampered row can never confer a non-conferrable
 * capability; a latch read failure propagates so the caller can fail closed.
 */
import {
  type CustomRole as AuthzCustomRole,
  defineCustomRole,
  isRole,
  type RoleAssignment,
} from '@coffer/authz';
import { openState as open, type State } from '@coffer/state';
import type { DatabaseConfig } from '../config.ts';

export type { State } from '@coffer/state';

/** The settings key of the durable "admin token retired" latch. */
export const ADMIN_TOKEN_RETIRED_KEY = 'admin-token.retired';

export interface RoleMember {
  subject: string;
  email: string | null;
  role: RoleAssignment;
}

/** Opens the store the configuration names (SQLite in the data dir, or PostgreSQL). */
export function openEngineState(database: DatabaseConfig, dataDir: string): Promise<State> {
  return open(database.kind === 'postgres' ? { url: database.url, dataDir } : { dataDir });
}

/** Whether an owner retired the admin token. Throws when the latch cannot be read. */
export async function adminTokenRetired(state: State): Promise<boolean> {
  const value = await state.settings.get(ADMIN_TOKEN_RETIRED_KEY);
  return value !== undefined && value !== null && value !== false;
}

/** Sets the retire latch (durable, honoured from the next request on). */
export async function retireAdminToken(state: State, by: string | null): Promise<void> {
  await state.settings.set(ADMIN_TOKEN_RETIRED_KEY, { retiredAt: new Date().toISOString(), by });
}

function toCustom(row: { name: string; base: string; capabilities: string[] }): AuthzCustomRole | null {
  try {
    return defineCustomRole({ name: row.name, base: row.base, add: row.capabilities });
  } catch {
    // An invalid stored custom role confers nothing: its members fall to the viewer floor.
    return null;
  }
}

/**
 * The role of one subject, re-read on every request: `assigned` false means no row (the viewer
 * floor). Throws when the role table cannot be read (the request then fails closed with 502).
 */
export async function roleOfSubject(
  state: State,
  subject: string,
): Promise<{ role: RoleAssignment; assigned: boolean }> {
  const row = await state.roles.get(subject);
  if (!row) return { role: 'viewer', assigned: false };
  if (isRole(row.role)) return { role: row.role, assigned: true };
  const custom = await state.roles.getCustomRole(row.role);
  return { role: (custom && toCustom(custom)) ?? 'viewer', assigned: true };
}

/** The role table's members with their roles resolved to authz assignments. */
export async function roleMembers(state: State): Promise<RoleMember[]> {
  const [rows, customRows] = await Promise.all([state.roles.list(), state.roles.listCustomRoles()]);
  const custom = new Map<string, AuthzCustomRole>();
  for (const row of customRows) {
    const role = toCustom(row);
    if (role) custom.set(row.name, role);
  }
  return rows.map((row) => ({
    subject: row.subject,
    email: row.email,
    role: isRole(row.role) ? row.role : (custom.get(row.role) ?? 'viewer'),
  }));
}
