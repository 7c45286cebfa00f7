/**
 * Pull credential grants, one per scope (the scope is the primary key, so "one active grant per
 * scope" holds by construction). Only the secret's SHA-384 verifier is stored; the secret is never
 * given to the store. The pull trail keeps the last 50 timestamps.
 */
import type { CredentialsRepository, PullCredential, PullScope } from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';
import { checkId, parseStored } from './json.ts';
import type { PullCredentialsTable } from './schema.ts';

const SCOPES: readonly PullScope[] = ['diagnostics', 'audit-feed', 'metrics'];
const TRAIL = 50;

function checkScope(s: unknown): PullScope {
  if (!SCOPES.includes(s as PullScope)) {
    throw new StateError(
      'ERR_STATE_INVALID',
      'pull credential scope must be diagnostics, audit-feed or metrics',
    );
  }
  return s as PullScope;
}

function toCredential(r: PullCredentialsTable): PullCredential {
  return {
    scope: r.scope as PullScope,
    clientId: r.client_id,
    verifier: r.verifier,
    grantedBy: r.granted_by,
    grantedAt: r.granted_at,
    expiresAt: r.expires_at,
    pulls: parseStored<string[]>(r.pulls, 'pull trail'),
  };
}

export function credentialsRepository(db: Db): CredentialsRepository {
  return {
    async get(scope) {
      const row = await db.read('reading a pull credential', (k) =>
        k
          .selectFrom('pull_credentials')
          .selectAll()
          .where('scope', '=', checkScope(scope))
          .executeTakeFirst(),
      );
      return row ? toCredential(row) : null;
    },

    async list() {
      const rows = await db.read('listing pull credentials', (k) =>
        k.selectFrom('pull_credentials').selectAll().orderBy('scope').execute(),
      );
      return rows.map(toCredential);
    },

    async replace(c) {
      const scope = checkScope(c.scope);
      if (typeof c.verifier !== 'string' || !/^[0-9a-f]{96}$/.test(c.verifier)) {
        // Refusing anything but a verifier keeps a secret from being stored here by mistake.
        throw new StateError(
          'ERR_STATE_INVALID',
          'a pull credential verifier must be 96 lower-case hex characters',
        );
      }
      const row: PullCredentialsTable = {
        scope,
        client_id: checkId(c.clientId, 'client id'),
        verifier: c.verifier,
        granted_by: c.grantedBy ?? null,
        granted_at: checkId(c.grantedAt, 'grant time'),
        expires_at: checkId(c.expiresAt, 'expiry'),
        pulls: '[]',
      };
      return db.write(
        'storing a pull credential',
        async (trx) => {
          const old = await trx
            .selectFrom('pull_credentials')
            .selectAll()
            .where('scope', '=', scope)
            .executeTakeFirst();
          if (old) await trx.deleteFrom('pull_credentials').where('scope', '=', scope).execute();
          await trx.insertInto('pull_credentials').values(row).execute();
          return old ? toCredential(old) : null;
        },
        [`credential:${scope}`],
      );
    },

    async delete(scope, clientId) {
      const r = await db.write(
        'deleting a pull credential',
        (trx) => {
          let q = trx.deleteFrom('pull_credentials').where('scope', '=', checkScope(scope));
          if (clientId !== undefined) q = q.where('client_id', '=', clientId);
          return q.executeTakeFirst();
        },
        [`credential:${scope}`],
      );
      return num(r.numDeletedRows) > 0;
    },

    async recordPull(scope, clientId, at) {
      checkScope(scope);
      await db.write(
        'recording a pull',
        async (trx) => {
          const row = await trx
            .selectFrom('pull_credentials')
            .select('pulls')
            .where('scope', '=', scope)
            .where('client_id', '=', clientId)
            .executeTakeFirst();
          if (!row) return;
          const pulls = parseStored<string[]>(row.pulls, 'pull trail');
          pulls.push(at ?? db.nowIso());
          await trx
            .updateTable('pull_credentials')
            .set({ pulls: JSON.stringify(pulls.slice(-TRAIL)) })
            .where('scope', '=', scope)
            .where('client_id', '=', clientId)
            .execute();
        },
        [`credential:${scope}`],
      );
    },
  };
}
