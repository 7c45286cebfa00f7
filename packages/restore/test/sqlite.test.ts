import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createSqliteSource, isSkipped } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { type ApplyOptions, applyRestore, planRestore, validateRestoreRequest } from '../src/index.ts';
import { backup, collect, fsStore, keys, resolverOf, sealNamed } from './helpers.ts';

const base = tempDir(t, 'restore-sqlite-');
const roots = join(base, 'roots');
mkdirSync(roots);
const dbPath = join(base, 'app.sqlite');
{
  const db = new Database(dbPath);
  db.pragma('journal_mode = WAL');
  db.exec(`
    CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, avatar BLOB);
    CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER REFERENCES users(id), amount REAL, big INTEGER);
    CREATE TABLE order_items (order_id INTEGER REFERENCES orders(id), sku TEXT, qty INTEGER);
    CREATE INDEX orders_by_user ON orders(user_id);
    CREATE TABLE log (msg TEXT);
    CREATE TRIGGER orders_log AFTER INSERT ON orders BEGIN INSERT INTO log VALUES ('order ' || NEW.id); END;
    CREATE VIEW big_orders AS SELECT * FROM orders WHERE amount > 100;
    PRAGMA user_version = 7;
  `);
  const u = db.prepare('INSERT INTO users VALUES (?, ?, ?)');
  for (let i = 1; i <= 50; i++) u.run(i, `user ${i}`, Buffer.from([i, 0, 255]));
  const o = db.prepare('INSERT INTO orders (user_id, amount, big) VALUES (?, ?, ?)');
  for (let i = 1; i <= 120; i++) o.run((i % 50) + 1, i * 1.25, 2n ** 62n + BigInt(i));
  const it = db.prepare('INSERT INTO order_items VALUES (?, ?, ?)');
  for (let i = 1; i <= 200; i++) it.run((i % 120) + 1, `sku-${i}`, i);
  db.close();
}
const store = fsStore(join(base, 'dest'));
await backup(store, createSqliteSource({ type: 'sqlite', path: dbPath, binding: 'job-db', workDir: base }), {
  job: 'job-db',
  runId: 'run-1',
});

function opts(body: Record<string, unknown>, extra: Partial<ApplyOptions> = {}): ApplyOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request: validateRestoreRequest({ runId: 'run-1', ...body }),
    targetResolver: resolverOf({ 'job-db': { type: 'sqlite', path: dbPath } }),
    restoreRoots: [roots],
    ...extra,
  };
}

function schemaOf(path: string, only?: string[]): unknown[] {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
      )
      .all() as Array<{ tbl_name: string }>;
    return only ? rows.filter((r) => only.includes(r.tbl_name)) : rows;
  } finally {
    db.close();
  }
}

function rowsOf(path: string, table: string): unknown[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare(`SELECT * FROM "${table}" ORDER BY rowid`).safeIntegers(true).all();
  } finally {
    db.close();
  }
}

t.test('whole database: schema and rows restored into a fresh file', async (t) => {
  const target = join(roots, 'full.sqlite');
  const plan = await planRestore(opts({ target: { namespaceId: target } }));
  t.equal(plan.ok, true);
  t.equal(plan.plannedWrites, 5, 'schema.json and four tables');
  t.equal(plan.sample[0]?.name, 'schema.json');
  t.equal(plan.overwriteCheck, null, 'sqlite targets are checked for freshness instead');
  t.notOk(existsSync(target));
  const r = await applyRestore(opts({ target: { namespaceId: target }, confirm: true }));
  t.equal(r.status, 'succeeded', JSON.stringify(r.failed));
  t.same(schemaOf(target), schemaOf(dbPath), 'schema identical');
  for (const table of ['users', 'orders', 'order_items', 'log'])
    t.same(rowsOf(target, table), rowsOf(dbPath, table), `${table} rows`);
  const db = new Database(target, { readonly: true });
  t.equal(db.pragma('user_version', { simple: true }), 7);
  t.same(db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'orders'").get(), { seq: 120 });
  db.close();
  await t.rejects(applyRestore(opts({ target: { namespaceId: target }, confirm: true })), {
    code: 'ERR_RESTORE_TARGET_NOT_FRESH',
    status: 409,
  });
  const used = await planRestore(opts({ target: { namespaceId: target } }));
  t.match(used.advisories, [{ code: 'ERR_RESTORE_TARGET_NOT_FRESH', message: /already has tables/ }]);
  await t.rejects(
    applyRestore(opts({ confirm: true })),
    { code: 'ERR_RESTORE_OUTSIDE_ROOTS' },
    'the live database is not a restore target',
  );
  const live = await planRestore(opts({}));
  t.match(live.advisories, [{ code: 'ERR_RESTORE_OUTSIDE_ROOTS' }], 'the dry run says so');
});

t.test('d1Tables createOnly: only the named tables, with dependency warnings', async (t) => {
  const target = join(roots, 'subset.sqlite');
  const req = {
    target: { namespaceId: target },
    d1Tables: { database: 'JOB-DB', tables: ['ORDERS'], createOnly: true },
  };
  const plan = await planRestore(opts(req));
  t.equal(plan.ok, true);
  t.same(
    plan.sample.map((r) => r.name),
    ['tables/orders.jsonl'],
  );
  t.same(plan.dependencyWarnings, [{ database: 'JOB-DB', table: 'orders', missingParent: 'users' }]);
  t.match(plan.skipped, [{ name: 'schema.json', reason: /createOnly/ }]);
  const r = await applyRestore(opts({ ...req, confirm: true }));
  t.equal(r.status, 'succeeded');
  t.equal(r.written, 1);
  const names = (schemaOf(target) as Array<{ name: string }>).map((s) => s.name).sort();
  t.same(names, ['orders', 'orders_by_user', 'orders_log']);
  t.same(rowsOf(target, 'orders'), rowsOf(dbPath, 'orders'));
});

t.test('d1Tables without createOnly: whole schema, rows of the named tables', async (t) => {
  const target = join(roots, 'subset2.sqlite');
  const req = {
    target: { namespaceId: target },
    d1Tables: { database: 'app.sqlite', tables: ['users', 'Orders'] },
  };
  const plan = await planRestore(opts(req));
  t.same(plan.dependencyWarnings, [], 'parents are in the subset');
  t.same(plan.sample.map((r) => r.name).sort(), ['schema.json', 'tables/orders.jsonl', 'tables/users.jsonl']);
  const changed = await planRestore(opts({ ...req, d1Tables: { ...req.d1Tables, createOnly: true } }));
  t.not(changed.planHash, plan.planHash, 'the table subset is bound into the plan hash');
  const r = await applyRestore(opts({ ...req, confirm: true }));
  t.equal(r.status, 'succeeded');
  t.same(schemaOf(target), schemaOf(dbPath));
  t.same(rowsOf(target, 'users'), rowsOf(dbPath, 'users'));
  t.same(rowsOf(target, 'order_items'), [], 'tables outside the subset are empty');
});

t.test('d1Tables refusals', async (t) => {
  const target = join(roots, 'never.sqlite');
  await t.rejects(
    planRestore(
      opts({ target: { namespaceId: target }, d1Tables: { database: 'job-db', tables: ['nope'] } }),
    ),
    {
      code: 'ERR_RESTORE_TABLES_NOT_FOUND',
      message: 'd1Tables names tables the run does not hold: "nope"',
    },
  );
  await t.rejects(
    planRestore(
      opts({ target: { namespaceId: target }, d1Tables: { database: 'other', tables: ['users'] } }),
    ),
    {
      code: 'ERR_RESTORE_TABLES_NOT_FOUND',
    },
  );
  t.notOk(existsSync(target));
});

t.test(
  'a sealed run whose schema.json smuggles an ATTACH is refused; nothing runs, no file appears',
  async (t) => {
    // A real sealed run of the real database, with its schema record rewritten before sealing: what
    // an attacker who can write a signed archive (or a compromised source) would hand a restore.
    const evil = join(base, 'evil.db');
    const source = createSqliteSource({ type: 'sqlite', path: dbPath, binding: 'job-db', workDir: base });
    const records: Array<{
      name: string;
      body: Uint8Array;
      metadata: Record<string, string | number | boolean | null>;
    }> = [];
    for await (const rec of source.enumerate()) {
      if (isSkipped(rec)) continue;
      let body: Uint8Array = await collect(await source.read(rec.name));
      if (rec.name === 'schema.json') {
        const schema = JSON.parse(Buffer.from(body).toString('utf8'));
        schema.tables[0].sql += `; ATTACH '${evil}' AS e; CREATE TABLE e.loot AS SELECT * FROM main.users`;
        body = Buffer.from(JSON.stringify(schema));
      }
      const metadata: Record<string, string | number | boolean | null> = {};
      for (const [k, v] of Object.entries(rec.metadata)) {
        if (v === undefined) continue;
        metadata[k] =
          v === null || ['string', 'number', 'boolean'].includes(typeof v)
            ? (v as string)
            : JSON.stringify(v);
      }
      records.push({ name: rec.name, body, metadata });
    }
    await source.close();
    await sealNamed(
      store,
      'job-db',
      'run-evil',
      'sqlite',
      'job-db',
      records.filter((r) => r.name === 'schema.json'),
    );

    const target = join(roots, 'hostile.sqlite');
    const request = validateRestoreRequest({
      runId: 'run-evil',
      target: { namespaceId: target },
      confirm: true,
    });
    const r = await applyRestore({ ...opts({}), request });
    t.equal(r.status, 'completed-with-failures', JSON.stringify(r));
    t.same(r.failed, [
      {
        name: 'schema.json',
        code: 'ERR_SOURCE_UNSAFE_STATEMENT',
        reason: 'schema statement refused (not the CREATE its entry stands for)',
      },
    ]);
    t.equal(r.written, 0);
    t.notOk(existsSync(evil), 'the ATTACH never ran: no file at its path');
    t.notOk(existsSync(target), 'the refused record never opened the target');
  },
);
