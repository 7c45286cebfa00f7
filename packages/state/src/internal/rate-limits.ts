/**
 * Fixed-window request counters shared by every engine process on one database (the mutating-
 * route rate limit). `hit` is one conditional upsert, `INSERT ... ON CONFLICT (key) DO UPDATE SET
 * count = CASE WHEN window over THEN 1 ELSE count + 1 END, ... RETURNING`, atomic on both
 * backends: concurrent hits from any number of processes each see a distinct count, so the limit
 * holds for the total, not per process.
 */
import { sql } from 'kysely';
import type { RateLimitsRepository } from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';

const MAX_KEY = 512;

function checkKey(key: unknown): string {
  if (typeof key !== 'string' || key === '' || key.length > MAX_KEY) {
    throw new StateError('ERR_STATE_INVALID', `a rate-limit key must be 1-${MAX_KEY} characters`);
  }
  return key;
}

function checkWindow(windowMs: unknown): number {
  if (typeof windowMs !== 'number' || !Number.isFinite(windowMs) || windowMs <= 0) {
    throw new StateError(
      'ERR_STATE_INVALID',
      'a rate-limit window must be a positive number of milliseconds',
    );
  }
  return Math.ceil(windowMs);
}

export function rateLimitsRepository(db: Db): RateLimitsRepository {
  return {
    async hit(keyArg, windowArg) {
      const key = checkKey(keyArg);
      const windowMs = checkWindow(windowArg);
      return db.write('counting a rate-limited request', async (trx) => {
        const now = db.now().getTime();
        const over = sql<boolean>`rate_limits.window_start + ${windowMs} <= ${now}`;
        const row = await trx
          .insertInto('rate_limits')
          .values({ key, window_start: now, count: 1 })
          .onConflict((oc) =>
            oc.column('key').doUpdateSet({
              count: sql`case when ${over} then 1 else rate_limits.count + 1 end`,
              window_start: sql`case when ${over} then ${now} else rate_limits.window_start end`,
            }),
          )
          .returning(['window_start', 'count'])
          .executeTakeFirstOrThrow();
        return { count: num(row.count), resetInMs: Math.max(0, num(row.window_start) + windowMs - now) };
      });
    },

    async read(keyArg, windowArg) {
      const key = checkKey(keyArg);
      const windowMs = checkWindow(windowArg);
      const row = await db.read('reading a rate-limit counter', (k) =>
        k.selectFrom('rate_limits').selectAll().where('key', '=', key).executeTakeFirst(),
      );
      const now = db.now().getTime();
      if (!row || num(row.window_start) + windowMs <= now) return { count: 0, resetInMs: 0 };
      return { count: num(row.count), resetInMs: num(row.window_start) + windowMs - now };
    },

    async prune(olderThanMs) {
      const cutoff = db.now().getTime() - checkWindow(olderThanMs);
      const r = await db.write('pruning rate-limit counters', (trx) =>
        trx.deleteFrom('rate_limits').where('window_start', '<', cutoff).executeTakeFirst(),
      );
      return num(r.numDeletedRows);
    },
  };
}
