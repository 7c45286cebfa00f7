/**
 * Restore of a `sqlite` source end to end through HTTP against a started engine: a database written
 * by better-sqlite3 (tables with a foreign key, an index, a view, BLOBs, 64-bit integers, NULLs and
 * non-ASCII text) backed up by a real run, dry-run, applied into a fresh database file inside the
 * restore root and compared schema and rows per table; a `d1Tables` subset (names matched
 * case-insensitively, `createOnly`) with its dependency warning for the missing parent table; the
 * refusals of a sqlite target (not fresh, outside the roots, no target at all, unknown table,
 * another database, d1Tables on a non-sqlite run).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { restoreWorld } from './helpers.ts';

const w = await restoreWorld(t);
const srcDir = tempDir(t, 'coffer-restore-sqlite-src-');
const srcPath = join(srcDir, 'shop.db');
{
  const db = new Database(srcPath);
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.exec(`
    CREATE TABLE Authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, born INTEGER);
    CREATE TABLE books (
      id INTEGER PRIMARY KEY,
      author_id INTEGER NOT NULL REFERENCES Authors(id) ON DELETE CASCADE,
      title TEXT NOT NULL,
      price REAL,
      cover BLOB,
      big INTEGER
    );
    CREATE INDEX books_by_author ON books(author_id);
    CREATE TABLE tags (book_id INTEGER REFERENCES books(id), tag TEXT, PRIMARY KEY (book_id, tag)) WITHOUT ROWID;
    CREATE VIEW cheap AS SELECT title FROM books WHERE price < 10;
  `);
  const author = db.prepare('INSERT INTO Authors (id, name, born) VALUES (?, ?, ?)');
  author.run(1, 'Ada Lovelace', 1815);
  author.run(2, 'Jorge Luis Borges — Ficciones', null);
  author.run(3, '日本語の著者', 1900);
  const book = db.prepare(
    'INSERT INTO books (id, author_id, title, price, cover, big) VALUES (?, ?, ?, ?, ?, ?)',
  );
  for (let i = 1; i <= 40; i++)
    book.run(
      i,
      1 + (i % 3),
      `Title ${i} "quoted" \n line`,
      i % 5 === 0 ? null : i * 1.25,
      i % 4 === 0 ? null : Buffer.from(Array.from({ length: 64 + i }, (_, k) => (k * i) & 255)),
      9_007_199_254_740_993n + BigInt(i),
    );
  const tag = db.prepare('INSERT INTO tags (book_id, tag) VALUES (?, ?)');
  for (let i = 1; i <= 40; i += 3) tag.run(i, `t${i % 7}`);
  db.close();
}

type Db = InstanceType<typeof Database>;
const open = (p: string): Db => new Database(p, { readonly: true, fileMustExist: true });
const schemaOf = (db: Db) =>
  db
    .prepare(
      "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .all();
const tablesOf = (db: Db) =>
  (
    db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all() as Array<{ name: string }>
  ).map((r) => r.name);
/** Every row of a table in primary-key order, 64-bit integers exact, BLOBs as hex. */
const rowsOf = (db: Db, table: string) =>
  db
    .prepare(`SELECT * FROM "${table}" ORDER BY 1, 2`)
    .safeIntegers(true)
    .all()
    .map((row) =>
      Object.fromEntries(
        Object.entries(row as Record<string, unknown>).map(([k, v]) => [
          k,
          Buffer.isBuffer(v) ? `blob:${v.toString('hex')}` : typeof v === 'bigint' ? `int:${v}` : v,
        ]),
      ),
    );

const runId = await w.backUp('shop', { type: 'sqlite', path: srcPath });
const src = open(srcPath);
t.teardown(() => src.close());

t.test('dry run, apply into a fresh database file, schema and rows equal', async (t) => {
  const out = join(w.roots, 'shop-restored.db');
  const body = { runId, target: { namespaceId: out } };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const p = plan.json();
  t.match(p, {
    ok: true,
    mode: 'dry-run',
    runId,
    job: 'shop',
    isLatest: true,
    recordsVerified: 4,
    plannedWrites: 4,
    overwriteCheck: null,
    target: { type: 'sqlite', binding: 'shop' },
    dependencyWarnings: [],
    fidelityWarnings: [],
  });
  t.ok(p.bytes > 0, 'bytes summed');
  t.same(
    p.sample.map((s: { name: string }) => s.name),
    ['schema.json', 'tables/Authors.jsonl', 'tables/books.jsonl', 'tables/tags.jsonl'],
  );
  t.match(p.planHash, /^sha384:[0-9a-f]{96}$/);
  t.notOk(existsSync(out), 'a dry run writes nothing');

  const done = await w.apply({ ...body, planHash: p.planHash });
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.match(done.receipt, { written: 4, plannedWrites: 4, failedCount: 0, bytes: p.bytes });
  t.match(done.progress, { done: 4, total: 4, written: 4 });

  const got = open(out);
  t.teardown(() => got.close());
  t.same(schemaOf(got), schemaOf(src), 'schema (tables, index, view) equal');
  t.same(tablesOf(got), ['Authors', 'books', 'tags']);
  for (const table of tablesOf(src)) t.same(rowsOf(got, table), rowsOf(src, table), `${table} rows equal`);
  t.equal(rowsOf(got, 'books').length, 40);
  t.same(got.pragma('foreign_key_check'), [], 'foreign keys hold');
  t.same(
    got.prepare('SELECT title FROM cheap ORDER BY 1').all(),
    src.prepare('SELECT title FROM cheap ORDER BY 1').all(),
    'the view answers',
  );

  // The target is no longer fresh: the same restore is refused before anything is written.
  const again = await w.dryRun(body);
  t.equal(again.status, 200, `the dry run says so in an advisory: ${again.text}`);
  t.match(again.json().advisories, [
    { code: 'ERR_RESTORE_TARGET_NOT_FRESH', message: /fresh|empty|tables/i },
  ]);
  const refused = await w.post('/restore', { ...body, confirm: true });
  t.equal(refused.status, 409, refused.text);
  t.match(refused.json().error, /fresh|empty|tables/i);
});

t.test('d1Tables subset: case-insensitive names, createOnly, dependency warning', async (t) => {
  const out = join(w.roots, 'books-only.db');
  const body = {
    runId,
    target: { namespaceId: out },
    d1Tables: { database: 'SHOP.DB', tables: ['BOOKS'], createOnly: true },
  };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const p = plan.json();
  t.match(p, { ok: true, plannedWrites: 1, recordsVerified: 1 });
  t.same(
    p.sample.map((s: { name: string }) => s.name),
    ['tables/books.jsonl'],
  );
  t.same(p.dependencyWarnings, [{ database: 'SHOP.DB', table: 'books', missingParent: 'Authors' }]);
  t.same(
    p.skipped.map((s: { name: string; reason: string }) => [s.name, s.reason]),
    [
      ['schema.json', 'schema record not restored (d1Tables createOnly)'],
      ['tables/Authors.jsonl', 'not in d1Tables'],
      ['tables/tags.jsonl', 'not in d1Tables'],
    ],
  );
  const done = await w.apply(body);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.receipt.written, 1);
  const got = open(out);
  t.teardown(() => got.close());
  t.same(tablesOf(got), ['books'], 'createOnly: only the named table exists');
  t.same(rowsOf(got, 'books'), rowsOf(src, 'books'), 'its rows equal');

  // Without createOnly the whole schema is created, the other tables empty; a parent named too
  // means no warning. The job id names the database as well as the file's base name.
  const out2 = join(w.roots, 'authors-books.db');
  const body2 = {
    runId,
    target: { namespaceId: out2 },
    d1Tables: { database: 'shop', tables: ['authors', 'Books'] },
  };
  const p2 = (await w.dryRun(body2)).json();
  t.match(p2, { ok: true, plannedWrites: 3, dependencyWarnings: [] });
  t.not(p2.planHash, p.planHash);
  const done2 = await w.apply(body2);
  t.equal(done2.status, 'succeeded', JSON.stringify(done2));
  const got2 = open(out2);
  t.teardown(() => got2.close());
  t.same(schemaOf(got2), schemaOf(src), 'whole schema created');
  t.same(rowsOf(got2, 'Authors'), rowsOf(src, 'Authors'));
  t.same(rowsOf(got2, 'books'), rowsOf(src, 'books'));
  t.same(rowsOf(got2, 'tags'), [], 'a table not named stays empty');
});

t.test('refusals of a sqlite restore', async (t) => {
  const cases: Array<[Record<string, unknown>, number, RegExp]> = [
    [
      {
        runId,
        d1Tables: { database: 'shop', tables: ['nope'] },
        target: { namespaceId: join(w.roots, 'n.db') },
      },
      400,
      /d1Tables names tables the run does not hold: "nope"/,
    ],
    [
      {
        runId,
        d1Tables: { database: 'other.db', tables: ['books'] },
        target: { namespaceId: join(w.roots, 'n.db') },
      },
      400,
      /does not name this run's database/,
    ],
    [{ runId, target: { bucketName: 'b' } }, 400, /.+/],
    [
      { runId, d1Tables: { database: 'shop', tables: [''] } },
      400,
      /^d1Tables.tables\[0\] must be a non-empty string$/,
    ],
    [
      { runId, d1Tables: { database: 'shop', tables: [] } },
      400,
      /^d1Tables.tables must be a non-empty array of non-empty strings$/,
    ],
    [
      { runId, d1Tables: { database: 'shop', tables: ['books'], createOnly: 'yes' } },
      400,
      /^d1Tables.createOnly must be a boolean$/,
    ],
    [
      { runId, d1Tables: { database: 'shop', tables: ['books'], extra: 1 } },
      400,
      /^d1Tables may only hold database, tables and createOnly$/,
    ],
  ];
  for (const [body, status, error] of cases) {
    const r = await w.dryRun(body);
    t.equal(r.status, status, `${JSON.stringify(body)}: ${r.text}`);
    t.match(r.json().error, error);
  }
  // Without a target override the run's own database would be written: it is outside the roots.
  for (const body of [{ runId }, { runId, target: { namespaceId: join(srcDir, 'elsewhere.db') } }]) {
    const dry = await w.dryRun(body);
    t.equal(dry.status, 200, `a dry run answers the plan: ${dry.text}`);
    t.match(dry.json().advisories, [{ code: 'ERR_RESTORE_OUTSIDE_ROOTS' }]);
    const apply = await w.post('/restore', { ...body, confirm: true });
    t.equal(apply.status, 400, 'the apply is refused');
    t.match(apply.json().error, /outside the configured restore roots/);
  }
  t.equal(existsSync(join(w.roots, 'n.db')), false, 'nothing created by a refusal');
});

t.test('a target that stopped being fresh between dry run and apply is refused', async (t) => {
  const out = join(w.roots, 'raced.db');
  const body = { runId, target: { namespaceId: out } };
  const plan = (await w.dryRun(body)).json();
  t.equal(plan.ok, true);
  const db = new Database(out);
  db.exec('CREATE TABLE mine (x)');
  db.prepare('INSERT INTO mine VALUES (1)').run();
  db.close();
  const r = await w.post('/restore', { ...body, confirm: true, planHash: plan.planHash });
  t.equal(r.status, 409, r.text);
  t.match(r.json().error, /fresh database/);
  const got = open(out);
  t.teardown(() => got.close());
  t.same(tablesOf(got), ['mine'], 'the file is untouched');
});

t.test('a drill restores into a scratch database, compares, removes it', async (t) => {
  const ev = await w.drill('shop');
  t.match(ev, {
    kind: 'coffer-drill-evidence',
    job: 'shop',
    runId,
    sourceType: 'sqlite',
    verdict: 'pass',
    records: 4,
  });
  t.same(ev.mismatched, []);
});
