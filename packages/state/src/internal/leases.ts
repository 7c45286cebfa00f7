/**
 * Named leases (the run lock and the scheduler tick). `acquire` is ONE conditional upsert,
 * `INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE holder = excluded.holder OR expires_at <= now
 * RETURNING *`, which both SQLite and PostgreSQL execute atomically: of two processes racing for
 * a free or expired lease exactly one gets a row back. The fence grows on every change of holder,
 * so a holder that lost its lease while paused can be told apart from the new one.
 */
import { sql } from 'kysely';
import type { Lease, LeasesRepository } from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';
import { checkId } from './json.ts';
import type { LeasesTable } from './schema.ts';

function toLease(r: LeasesTable): Lease {
  return { name: r.name, holder: r.holder, expiresAt: num(r.expires_at), fence: num(r.fence) };
}

function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new StateError('ERR_STATE_INVALID', 'a lease TTL must be a positive number of milliseconds');
  }
  return Math.ceil(ttlMs);
}

export function leasesRepository(db: Db): LeasesRepository {
  return {
    async acquire(nameArg, holderArg, ttlMs) {
      const name = checkId(nameArg, 'lease name');
      const holder = checkId(holderArg, 'lease holder');
      const ttl = checkTtl(ttlMs);
      const row = await db.write('acquiring a lease', (trx) => {
        const now = db.now().getTime();
        return trx
          .insertInto('leases')
          .values({ name, holder, expires_at: now + ttl, fence: 1 })
          .onConflict((oc) =>
            oc
              .column('name')
              .doUpdateSet({
                holder: sql`excluded.holder`,
                expires_at: sql`excluded.expires_at`,
                fence: sql`case when leases.holder = excluded.holder then leases.fence else leases.fence + 1 end`,
              })
              .where(sql<boolean>`leases.holder = excluded.holder or leases.expires_at <= ${now}`),
          )
          .returningAll()
          .executeTakeFirst();
      });
      return row ? toLease(row) : null;
    },

    async renew(nameArg, holderArg, ttlMs) {
      const name = checkId(nameArg, 'lease name');
      const holder = checkId(holderArg, 'lease holder');
      const ttl = checkTtl(ttlMs);
      const row = await db.write('renewing a lease', (trx) =>
        trx
          .updateTable('leases')
          .set({ expires_at: db.now().getTime() + ttl })
          .where('name', '=', name)
          .where('holder', '=', holder)
          .returningAll()
          .executeTakeFirst(),
      );
      return row ? toLease(row) : null;
    },

    async release(name, holder) {
      const r = await db.write('releasing a lease', (trx) =>
        trx.deleteFrom('leases').where('name', '=', name).where('holder', '=', holder).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },

    async get(name) {
      const row = await db.read('reading a lease', (k) =>
        k.selectFrom('leases').selectAll().where('name', '=', name).executeTakeFirst(),
      );
      return row ? toLease(row) : null;
    },
  };
}
