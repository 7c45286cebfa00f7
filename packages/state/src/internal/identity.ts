/** Role assignments, custom roles and sessions (minimal). Authorisation logic lives in @coffer/authz. */
import type {
  CustomRole,
  RoleAssignment,
  RolesRepository,
  SessionRecord,
  SessionsRepository,
} from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';
import { checkId, isPlainObject, parseStored, toStored } from './json.ts';
import type { CustomRolesTable, RoleAssignmentsTable, SessionsTable } from './schema.ts';

function toAssignment(r: RoleAssignmentsTable): RoleAssignment {
  return {
    subject: r.subject,
    role: r.role,
    email: r.email,
    grantedBy: r.granted_by,
    grantedAt: r.granted_at,
  };
}

function toCustomRole(r: CustomRolesTable): CustomRole {
  return {
    name: r.name,
    base: r.base,
    capabilities: parseStored<string[]>(r.capabilities, 'custom role capabilities'),
    description: r.description,
    updatedAt: r.updated_at,
  };
}

export function rolesRepository(db: Db): RolesRepository {
  return {
    async get(subject) {
      const row = await db.read('reading a role', (k) =>
        k.selectFrom('role_assignments').selectAll().where('subject', '=', subject).executeTakeFirst(),
      );
      return row ? toAssignment(row) : null;
    },
    async list() {
      const rows = await db.read('listing roles', (k) =>
        k.selectFrom('role_assignments').selectAll().orderBy('subject').execute(),
      );
      return rows.map(toAssignment);
    },
    async assign(a) {
      const row: RoleAssignmentsTable = {
        subject: checkId(a.subject, 'subject'),
        role: checkId(a.role, 'role'),
        email: a.email ?? null,
        granted_by: a.grantedBy ?? null,
        granted_at: a.grantedAt ?? db.nowIso(),
      };
      await db.write('assigning a role', (trx) =>
        trx
          .insertInto('role_assignments')
          .values(row)
          .onConflict((oc) =>
            oc.column('subject').doUpdateSet({
              role: row.role,
              email: row.email,
              granted_by: row.granted_by,
              granted_at: row.granted_at,
            }),
          )
          .execute(),
      );
      return toAssignment(row);
    },
    async remove(subject) {
      const r = await db.write('removing a role', (trx) =>
        trx.deleteFrom('role_assignments').where('subject', '=', subject).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
    async count(role) {
      const row = await db.read('counting roles', (k) =>
        k
          .selectFrom('role_assignments')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('role', '=', role)
          .executeTakeFirst(),
      );
      return num(row?.n as number | string | bigint | undefined);
    },
    async getCustomRole(name) {
      const row = await db.read('reading a custom role', (k) =>
        k.selectFrom('custom_roles').selectAll().where('name', '=', name).executeTakeFirst(),
      );
      return row ? toCustomRole(row) : null;
    },
    async listCustomRoles() {
      const rows = await db.read('listing custom roles', (k) =>
        k.selectFrom('custom_roles').selectAll().orderBy('name').execute(),
      );
      return rows.map(toCustomRole);
    },
    async putCustomRole(r) {
      if (!Array.isArray(r.capabilities) || !r.capabilities.every((c) => typeof c === 'string')) {
        throw new StateError('ERR_STATE_INVALID', 'custom role capabilities must be a list of names');
      }
      const row: CustomRolesTable = {
        name: checkId(r.name, 'custom role name'),
        base: checkId(r.base, 'custom role base'),
        capabilities: JSON.stringify(r.capabilities),
        description: r.description ?? null,
        updated_at: db.nowIso(),
      };
      await db.write('saving a custom role', (trx) =>
        trx
          .insertInto('custom_roles')
          .values(row)
          .onConflict((oc) =>
            oc.column('name').doUpdateSet({
              base: row.base,
              capabilities: row.capabilities,
              description: row.description,
              updated_at: row.updated_at,
            }),
          )
          .execute(),
      );
      return toCustomRole(row);
    },
    async deleteCustomRole(name) {
      const r = await db.write('deleting a custom role', (trx) =>
        trx.deleteFrom('custom_roles').where('name', '=', name).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
  };
}

function toSession(r: SessionsTable): SessionRecord {
  return {
    id: r.id,
    subject: r.subject,
    email: r.email,
    method: r.method,
    createdAt: r.created_at,
    expiresAt: r.expires_at,
    data: parseStored<Record<string, unknown>>(r.data, 'session data'),
  };
}

export function sessionsRepository(db: Db): SessionsRepository {
  return {
    async create(s) {
      if (s.data !== undefined && !isPlainObject(s.data)) {
        throw new StateError('ERR_STATE_INVALID', 'session data must be an object');
      }
      const row: SessionsTable = {
        id: checkId(s.id, 'session id'),
        subject: checkId(s.subject, 'subject'),
        email: s.email ?? null,
        method: checkId(s.method, 'session method'),
        created_at: s.createdAt ?? db.nowIso(),
        expires_at: checkId(s.expiresAt, 'session expiry'),
        data: toStored(s.data ?? {}, 'session data'),
      };
      await db.write('creating a session', (trx) => trx.insertInto('sessions').values(row).execute());
      return toSession(row);
    },
    async get(id) {
      const row = await db.read('reading a session', (k) =>
        k
          .selectFrom('sessions')
          .selectAll()
          .where('id', '=', id)
          .where('expires_at', '>', db.nowIso())
          .executeTakeFirst(),
      );
      return row ? toSession(row) : null;
    },
    async delete(id) {
      const r = await db.write('ending a session', (trx) =>
        trx.deleteFrom('sessions').where('id', '=', id).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
    async deleteForSubject(subject) {
      const r = await db.write('ending sessions', (trx) =>
        trx.deleteFrom('sessions').where('subject', '=', subject).executeTakeFirst(),
      );
      return num(r.numDeletedRows);
    },
    async purgeExpired() {
      const r = await db.write('purging sessions', (trx) =>
        trx.deleteFrom('sessions').where('expires_at', '<=', db.nowIso()).executeTakeFirst(),
      );
      return num(r.numDeletedRows);
    },
  };
}
