/** JSON key-value tables: settings (latches, markers, switches) and update state. */
import type { SettingsRepository, UpdateStateRepository } from '../api.ts';
import { type Db, num } from './db.ts';
import { checkId, parseStored, toStored } from './json.ts';

type KvTable = 'settings' | 'update_state';

export function keyValueRepository(db: Db, table: KvTable): SettingsRepository {
  const what = table === 'settings' ? 'setting' : 'update state';
  return {
    async get<T = unknown>(key: string): Promise<T | undefined> {
      const row = await db.read(`reading a ${what}`, (k) =>
        k.selectFrom(table).select('value').where('key', '=', key).executeTakeFirst(),
      );
      return row ? parseStored<T>(row.value, what) : undefined;
    },

    async set(keyArg, value) {
      const key = checkId(keyArg, `${what} key`);
      const text = toStored(value, `the ${what} value`);
      await db.write(`writing a ${what}`, async (trx) => {
        const now = db.nowIso();
        await trx
          .insertInto(table)
          .values({ key, value: text, updated_at: now })
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: text, updated_at: now }))
          .execute();
      });
    },

    async setIfAbsent(keyArg, value) {
      const key = checkId(keyArg, `${what} key`);
      const text = toStored(value, `the ${what} value`);
      const row = await db.write(`writing a ${what}`, (trx) =>
        trx
          .insertInto(table)
          .values({ key, value: text, updated_at: db.nowIso() })
          .onConflict((oc) => oc.column('key').doNothing())
          .returning('key')
          .executeTakeFirst(),
      );
      return row !== undefined;
    },

    async delete(key) {
      const r = await db.write(`deleting a ${what}`, (trx) =>
        trx.deleteFrom(table).where('key', '=', key).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },

    async list(prefix = '') {
      const rows = await db.read(`listing ${what}s`, (k) => {
        let q = k.selectFrom(table).selectAll();
        if (prefix !== '') q = q.where('key', 'like', `${prefix}%`);
        return q.orderBy('key').execute();
      });
      // LIKE over-matches (`_`/`%` in the prefix, SQLite's case folding); re-check the prefix exactly.
      return rows
        .filter((r) => r.key.startsWith(prefix))
        .map((r) => ({ key: r.key, value: parseStored(r.value, what), updatedAt: r.updated_at }));
    },
  };
}

export function updateStateRepository(db: Db): UpdateStateRepository {
  const kv = keyValueRepository(db, 'update_state');
  return { get: kv.get, set: kv.set, list: () => kv.list() };
}
