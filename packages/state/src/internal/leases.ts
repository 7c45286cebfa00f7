/**
 * Named leases (the run lock and the scheduler tick). `acquire` is ONE conditional upsert,
 * `INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE holder = excluded.holder OR expires_at <= now
 * RETURNING *`, which both SQLite and PostgreSQL execute atomically: of two processes racing for
 * a free or expired lease exactly one gets a row back. The fence (fencing token) grows on every
 * acquisition, so "holder and fence unchanged" means nobody acquired the lease since: a holder
 * that lost it while paused is told apart from the new one even when both share a holder id.
 *
 * Fenced writes (`checkLease`): an UPDATE of the lease row matching holder and fence, inside the
 * caller's transaction. The UPDATE row-locks the lease on PostgreSQL, so a concurrent `acquire`
 * (an ON CONFLICT DO UPDATE of the same row) waits for that transaction and then re-checks expiry
 * against the extended time; SQLite serialises every write anyway. Expiry itself is not required
 * here: a lease that expired but was not taken still carries the holder's fence, and the check
 * (re-)establishes it atomically.
 */
import { sql } from 'kysely';
import type { Lease, LeasesRepository, LeaseToken } from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num, type Tx } from './db.ts';
import { checkId } from './json.ts';
import type { LeasesTable } from './schema.ts';

function toLease(r: LeasesTable): Lease {
  return { name: r.name, holder: r.holder, expiresAt: num(r.expires_at), fence: num(r.fence) };
}

/** `expires_at` of a released lease (kept as a row so its fence survives). */
const RELEASED = 0;

function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number' || !Number.isFinite(ttlMs) || ttlMs <= 0) {
    throw new StateError('ERR_STATE_INVALID', 'a lease TTL must be a positive number of milliseconds');
  }
  return Math.ceil(ttlMs);
}

function checkToken(token: unknown): LeaseToken {
  const t = token as Partial<LeaseToken> | null;
  if (t === null || typeof t !== 'object' || !Number.isSafeInteger(t.fence)) {
    throw new StateError('ERR_STATE_INVALID', 'a lease token needs a name, a holder and an integer fence');
  }
  return {
    name: checkId(t.name, 'lease name'),
    holder: checkId(t.holder, 'lease holder'),
    fence: t.fence as number,
  };
}

/**
 * The fencing check inside a write transaction: the lease row still has this holder and fence
 * (optionally extended by `extendMs`). Throws ERR_STATE_LEASE_LOST otherwise.
 */
export async function checkLease(trx: Tx, db: Db, tokenArg: LeaseToken, extendMs?: number): Promise<Lease> {
  const token = checkToken(tokenArg);
  const row = await trx
    .updateTable('leases')
    .set(
      extendMs === undefined
        ? { fence: token.fence }
        : { expires_at: db.now().getTime() + checkTtl(extendMs) },
    )
    .where('name', '=', token.name)
    .where('holder', '=', token.holder)
    .where('fence', '=', token.fence)
    .where('expires_at', '>', RELEASED)
    .returningAll()
    .executeTakeFirst();
  if (!row) {
    throw new StateError(
      'ERR_STATE_LEASE_LOST',
      `the lease ${token.name} is no longer held with fence ${token.fence} (taken over or released)`,
    );
  }
  return toLease(row);
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
                fence: sql`leases.fence + 1`,
              })
              .where(sql<boolean>`leases.holder = excluded.holder or leases.expires_at <= ${now}`),
          )
          .returningAll()
          .executeTakeFirst();
      });
      return row ? toLease(row) : null;
    },

    async renew(nameArg, holderArg, ttlMs, fence) {
      const name = checkId(nameArg, 'lease name');
      const holder = checkId(holderArg, 'lease holder');
      const ttl = checkTtl(ttlMs);
      if (fence !== undefined && !Number.isSafeInteger(fence)) {
        throw new StateError('ERR_STATE_INVALID', 'a lease fence must be an integer');
      }
      const row = await db.write('renewing a lease', (trx) => {
        let q = trx
          .updateTable('leases')
          .set({ expires_at: db.now().getTime() + ttl })
          .where('name', '=', name)
          .where('holder', '=', holder)
          .where('expires_at', '>', RELEASED);
        if (fence !== undefined) q = q.where('fence', '=', fence);
        return q.returningAll().executeTakeFirst();
      });
      return row ? toLease(row) : null;
    },

    async assertHeld(token, options = {}) {
      return db.write('checking a lease', (trx) => checkLease(trx, db, token, options.extendMs));
    },

    async release(name, holder, fence) {
      // The row stays (expiry 0 = released) so its fence keeps growing across holders: a deleted
      // row would restart at 1 and hand a new holder the token a paused one still carries.
      const r = await db.write('releasing a lease', (trx) => {
        let q = trx
          .updateTable('leases')
          .set({ expires_at: RELEASED })
          .where('name', '=', name)
          .where('holder', '=', holder)
          .where('expires_at', '>', RELEASED);
        if (fence !== undefined) q = q.where('fence', '=', fence);
        return q.executeTakeFirst();
      });
      return num(r.numUpdatedRows) > 0;
    },

    async get(name) {
      const row = await db.read('reading a lease', (k) =>
        k
          .selectFrom('leases')
          .selectAll()
          .where('name', '=', name)
          .where('expires_at', '>', RELEASED)
          .executeTakeFirst(),
      );
      return row ? toLease(row) : null;
    },
  };
}
