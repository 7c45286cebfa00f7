import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { createSqliteSource } from '../src/sqlite-source.ts';
import { isSkipped, type SourceConnector, type SourceRecordInfo } from '../src/types.ts';

async function bytes(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

async function records(src: SourceConnector): Promise<SourceRecordInfo[]> {
  const out: SourceRecordInfo[] = [];
  for await (const e of src.enumerate()) if (!isSkipped(e)) out.push(e);
  return out;
}

function rowsOf(text: string): unknown[][] {
  return text
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => JSON.parse(l) as unknown[]);
}

const WRITER = `
const Database = require(process.argv[1]);
const db = new Database(process.argv[2]);
db.pragma('busy_timeout = 60000');
const ins = db.prepare('INSERT INTO log (n, pad) VALUES (?, ?)');
const up = db.prepare('UPDATE counter SET n = n + 1 WHERE id = 1');
const tx = db.transaction((i) => { ins.run(i, 'x'.repeat(200)); up.run(); });
let i = 0;
for (;;) { tx(i++); if (i % 100 === 0) process.stdout.write(i + '\\n'); }
`;

for (const journal of ['wal', 'delete']) {
  t.test(`capture is consistent while another process writes (${journal} journal)`, async (t) => {
    const dir = tempDir(t);
    const file = join(dir, 'live.sqlite');
    const db = new Database(file);
    db.pragma(`journal_mode = ${journal}`);
    db.exec(
      'CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0);',
    );
    db.exec('CREATE TABLE log (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, pad TEXT)');
    // Some bulk first so the capture takes a while.
    const fill = db.transaction(() => {
      const ins = db.prepare('INSERT INTO log (n, pad) VALUES (?, ?)');
      for (let i = 0; i < 30_000; i++) ins.run(-1, 'y'.repeat(200));
      db.prepare('UPDATE counter SET n = n + 30000').run();
    });
    fill();
    db.close();

    const betterSqlite = createRequire(import.meta.url).resolve('better-sqlite3');
    const writer = spawn(process.execPath, ['-e', WRITER, betterSqlite, file], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.teardown(() => {
      writer.kill('SIGKILL');
    });
    let written = 0;
    writer.stdout.setEncoding('utf8');
    writer.stdout.on('data', (d: string) => {
      const last = d.trim().split('\n').pop();
      if (last) written = Number(last);
    });
    await new Promise<void>((resolve) => {
      const check = () => (written >= 500 ? resolve() : setTimeout(check, 10));
      check();
    });
    const writtenBefore = written;

    const src = createSqliteSource({ type: 'sqlite', path: file, workDir: dir });
    t.teardown(() => src.close());
    const recs = await records(src);
    t.same(
      recs.map((r) => r.name),
      ['schema.json', 'tables/counter.jsonl', 'tables/log.jsonl'],
    );
    const counter = rowsOf((await bytes(await src.read('tables/counter.jsonl'))).toString('utf8'));
    const log = rowsOf((await bytes(await src.read('tables/log.jsonl'))).toString('utf8'));
    const n = counter[0]![1] as number;
    t.equal(log.length, n, 'counter and log agree: one instant');
    t.ok(n >= 30_000 + writtenBefore, 'includes what was written before the capture began');
    const logRec = recs.find((r) => r.name === 'tables/log.jsonl')!;
    t.equal(logRec.metadata.rows, n);
    // The writer kept going during and after the capture (it was never stopped).
    const before = written;
    await new Promise<void>((resolve) => {
      const check = () => (written > before + 100 ? resolve() : setTimeout(check, 10));
      check();
    });
    writer.kill('SIGKILL');
    await new Promise((r) => writer.once('exit', r));
    // Read-write: the killed writer may have left a hot journal to roll back.
    const live = new Database(file);
    const liveN = (live.prepare('SELECT n FROM counter').get() as { n: number }).n;
    live.close();
    t.ok(liveN > n, 'the database moved on after the capture');
  });
}

function buildFixture(file: string): void {
  const db = new Database(file);
  db.exec(`
    CREATE TABLE authors (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE);
    CREATE TABLE books (
      id INTEGER PRIMARY KEY, author_id INTEGER REFERENCES authors(id), title TEXT,
      price REAL, cover BLOB, anything, big INTEGER,
      title_len INTEGER GENERATED ALWAYS AS (length(title)) VIRTUAL
    );
    CREATE INDEX books_by_author ON books(author_id);
    CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT);
    CREATE TRIGGER books_audit AFTER INSERT ON books BEGIN INSERT INTO audit (what) VALUES ('book ' || NEW.id); END;
    CREATE TABLE kv (k TEXT PRIMARY KEY, v) WITHOUT ROWID;
    CREATE TABLE "odd/na me" (x);
    CREATE VIEW book_titles AS SELECT title FROM books;
    CREATE VIRTUAL TABLE search USING fts5(body);
    PRAGMA user_version = 7;
  `);
  db.prepare('INSERT INTO authors (name) VALUES (?), (?)').run('Ann', 'Bob');
  db.prepare('DELETE FROM authors WHERE name = ?').run('Bob'); // autoincrement counter stays at 2
  const ins = db.prepare(
    'INSERT INTO books (id, author_id, title, price, cover, anything, big) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  ins.safeIntegers(true);
  ins.run(1n, 1n, 'First', 12.5, Buffer.from([0, 1, 2, 255]), 3.0, 9007199254740993n);
  ins.run(2n, 1n, 'Second "quoted"\nline', -0.0, null, 'text', -9223372036854775808n);
  ins.run(3n, 1n, 'Ünïcödé ✓', 1e300, Buffer.alloc(0), Buffer.from('blob'), 42n);
  db.prepare('INSERT INTO kv VALUES (?, ?), (?, ?)').run('b', 2, 'a', 1);
  db.prepare('INSERT INTO "odd/na me" VALUES (?)').run('odd');
  db.prepare('INSERT INTO search VALUES (?)').run('full text');
  db.close();
}

t.test('records, metadata and a faithful whole restore into a fresh database', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'app.sqlite');
  buildFixture(file);
  const src = createSqliteSource({ type: 'sqlite', path: file, binding: 'appdb', workDir: dir });
  t.teardown(() => src.close());
  const all: (SourceRecordInfo | { skipped: true; name: string; reason: string })[] = [];
  for await (const e of src.enumerate({ pageSize: 2 })) all.push(e);
  t.same(
    all.map((e) => e.name),
    // Listing order: the schema, then tables in creation order; skipped names come last.
    [
      'schema.json',
      'tables/authors.jsonl',
      'tables/books.jsonl',
      'tables/audit.jsonl',
      'tables/kv.jsonl',
      'tables/odd%2Fna%20me.jsonl',
      'tables/search.jsonl',
    ],
  );
  const skipped = all.filter(isSkipped);
  t.same(
    skipped.map((s) => s.name),
    ['tables/search.jsonl'],
  );
  const books = all.find((e) => e.name === 'tables/books.jsonl') as SourceRecordInfo;
  t.same(books.metadata.parents, ['authors']);
  t.equal(books.metadata.table, 'books');
  t.equal(books.metadata.rows, 3);
  t.same(books.metadata.columns, ['id', 'author_id', 'title', 'price', 'cover', 'anything', 'big']);
  t.equal(books.binding, 'appdb');
  t.equal(books.sourceType, 'sqlite');
  const schema = JSON.parse((await bytes(await src.read('schema.json'))).toString('utf8'));
  t.equal(schema.userVersion, 7);
  t.same(
    schema.views.map((v: { name: string }) => v.name),
    ['book_titles'],
  );
  // Range reads of a table record are byte-exact.
  const whole = await bytes(await src.read('tables/books.jsonl'));
  t.same(Buffer.from(await src.readRange('tables/books.jsonl', 5, 40)), whole.subarray(5, 41));

  // Whole restore: schema first, then every table.
  const target = join(dir, 'restored', 'app.sqlite');
  const dst = createSqliteSource({ type: 'sqlite', path: target });
  t.teardown(() => dst.close());
  t.equal(await dst.exists('schema.json'), false);
  for (const r of all) {
    if (isSkipped(r)) continue;
    t.same(await dst.write(r.name, await src.read(r.name), r.metadata), { written: true }, r.name);
  }
  t.equal(await dst.exists('tables/books.jsonl'), true);
  t.equal(await dst.exists('tables/BOOKS.jsonl'), true, 'table names match case-insensitively');
  await dst.close();
  const a = new Database(file, { readonly: true });
  const b = new Database(target, { readonly: true });
  t.teardown(() => {
    a.close();
    b.close();
  });
  const dump = (db: Database.Database, sql: string) =>
    db
      .prepare(sql)
      .safeIntegers(true)
      .raw(true)
      .all()
      .map((row) =>
        (row as unknown[]).map((v) => [
          v === null ? 'null' : Buffer.isBuffer(v) ? 'blob' : typeof v,
          Buffer.isBuffer(v) ? v.toString('hex') : Object.is(v, -0) ? '-0' : String(v),
        ]),
      );
  const typed =
    'SELECT id, author_id, title, price, cover, anything, big, typeof(anything), title_len FROM books ORDER BY id';
  t.same(dump(b, typed), dump(a, typed), 'every storage class survives');
  t.same(dump(b, 'SELECT * FROM kv'), dump(a, 'SELECT * FROM kv'));
  t.same(
    dump(b, 'SELECT * FROM audit'),
    dump(a, 'SELECT * FROM audit'),
    'triggers did not fire on restored rows',
  );
  t.same(dump(b, 'SELECT * FROM "odd/na me"'), [[['string', 'odd']]]);
  t.same(dump(b, 'SELECT * FROM book_titles'), dump(a, 'SELECT * FROM book_titles'));
  t.equal(b.pragma('user_version', { simple: true }), 7);
  t.same(dump(b, "SELECT seq FROM sqlite_sequence WHERE name = 'authors'"), [[['bigint', '2']]]);
  const idx = b
    .prepare(
      "SELECT name FROM sqlite_schema WHERE type IN ('index','trigger') AND sql IS NOT NULL ORDER BY name",
    )
    .all();
  t.same(idx, [{ name: 'books_audit' }, { name: 'books_by_author' }]);
  // The trigger works again after the restore.
  const w = new Database(target);
  w.prepare('INSERT INTO books (id, title) VALUES (10, ?)').run('new');
  t.equal((w.prepare('SELECT count(*) AS n FROM audit').get() as { n: number }).n, 4);
  w.close();
});

t.test('a table subset restores alone (createOnly) and restore refuses what exists', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'app.sqlite');
  buildFixture(file);
  const src = createSqliteSource({ type: 'sqlite', path: file, workDir: dir });
  t.teardown(() => src.close());
  const target = join(dir, 'subset.sqlite');
  const dst = createSqliteSource({ type: 'sqlite', path: target });
  t.teardown(() => dst.close());
  await dst.write('tables/books.jsonl', await src.read('tables/books.jsonl'));
  const db = new Database(target, { readonly: true });
  t.same(
    db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all(),
    [{ name: 'audit' }, { name: 'books' }].filter((x) => x.name === 'books'),
    'only the chosen table exists',
  );
  t.equal((db.prepare('SELECT count(*) AS n FROM books').get() as { n: number }).n, 3);
  db.close();
  // Again: the table has rows now.
  await t.rejects(dst.write('tables/books.jsonl', await src.read('tables/books.jsonl')), {
    code: 'ERR_SOURCE_TARGET_EXISTS',
  });
  // The schema record refuses a database that already has one of its tables.
  await t.rejects(dst.write('schema.json', await src.read('schema.json')), {
    code: 'ERR_SOURCE_TARGET_EXISTS',
  });
  // A truncated table record changes nothing.
  const kv = await bytes(await src.read('tables/kv.jsonl'));
  const cut = kv.subarray(0, kv.lastIndexOf('\n', kv.length - 2) + 1);
  await t.rejects(dst.write('tables/kv.jsonl', cut), { code: 'ERR_SOURCE_INVALID_RECORD' });
  await t.rejects(dst.write('tables/kv.jsonl', Buffer.from('not json\n')), {
    code: 'ERR_SOURCE_INVALID_RECORD',
  });
  await t.rejects(dst.write('other.bin', Buffer.from('x')), { code: 'ERR_SOURCE_INVALID_RECORD' });
  t.equal(await dst.exists('tables/kv.jsonl'), false, 'rolled back: no kv table');
});

t.test('source faults are typed', async (t) => {
  const dir = tempDir(t);
  await t.rejects(createSqliteSource({ type: 'sqlite', path: join(dir, 'nope.sqlite') }).list(), {
    code: 'ERR_SOURCE_RESOURCE_MISSING',
    reason: 'source resource missing',
  });
  const junk = join(dir, 'junk.sqlite');
  writeFileSync(junk, Buffer.alloc(4096, 1));
  await t.rejects(createSqliteSource({ type: 'sqlite', path: junk, workDir: dir }).list(), {
    code: 'ERR_SOURCE_READ',
    reason: 'source read error',
  });
  const file = join(dir, 'ok.sqlite');
  buildFixture(file);
  const one = createSqliteSource({ type: 'sqlite', path: file, workDir: dir });
  const two = createSqliteSource({ type: 'sqlite', path: file, workDir: dir });
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const page = await one.list({ pageSize: 1 });
  t.ok(page.cursor);
  await t.rejects(two.list({ cursor: page.cursor! }), { code: 'ERR_SOURCE_INVALID_CURSOR' });
  await t.rejects(one.read('tables/missing.jsonl'), { code: 'ERR_SOURCE_RECORD_VANISHED' });
  const small = createSqliteSource({ type: 'sqlite', path: file, workDir: dir, maxRecordBytes: 10 });
  t.teardown(() => small.close());
  await t.rejects(small.read('schema.json'), { code: 'ERR_SOURCE_RECORD_TOO_LARGE' });
  t.throws(() => createSqliteSource({ type: 'sqlite', path: '' }), { code: 'ERR_SOURCE_INVALID_CONFIG' });
});

t.test('restore runs only the one CREATE statement each schema entry stands for', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'app.sqlite');
  buildFixture(file);
  const src = createSqliteSource({ type: 'sqlite', path: file, workDir: dir });
  t.teardown(() => src.close());
  const schema = JSON.parse((await bytes(await src.read('schema.json'))).toString('utf8'));
  const books = (await bytes(await src.read('tables/books.jsonl'))).toString('utf8').split('\n');
  const header = JSON.parse(books[0] as string);
  const evil = join(dir, 'evil.db');
  const attach = `ATTACH '${evil}' AS e`;

  type Case = [string, (s: typeof schema, h: typeof header) => void, 'schema.json' | 'tables/books.jsonl'];
  const first = (s: typeof schema) => s.tables[0];
  const cases: Case[] = [
    [
      'trailing ATTACH after a table',
      (s) => {
        first(s).sql += `; ${attach}; CREATE TABLE e.x(y)`;
      },
      'schema.json',
    ],
    [
      'ATTACH as a table entry',
      (s) => {
        first(s).sql = attach;
      },
      'schema.json',
    ],
    [
      'PRAGMA as a view entry',
      (s) => {
        s.views[0].sql = 'PRAGMA writable_schema = ON';
      },
      'schema.json',
    ],
    [
      'trailing statement after a comment',
      (s) => {
        first(s).sql += ` /* ; */ ; ${attach}`;
      },
      'schema.json',
    ],
    [
      'TEMP table',
      (s) => {
        first(s).sql = first(s).sql.replace('CREATE TABLE', 'CREATE TEMP TABLE');
      },
      'schema.json',
    ],
    [
      'CREATE TABLE AS SELECT',
      (s) => {
        first(s).sql = `CREATE TABLE ${first(s).name} AS SELECT 1`;
      },
      'schema.json',
    ],
    [
      'another object than the entry names',
      (s) => {
        first(s).sql = 'CREATE TABLE other (x)';
      },
      'schema.json',
    ],
    [
      'other schema',
      (s) => {
        first(s).sql = `CREATE TABLE e.${first(s).name} (x)`;
      },
      'schema.json',
    ],
    [
      'a view trigger followed by ATTACH',
      (s) =>
        void s.viewTriggers.push(
          `CREATE TRIGGER vt INSTEAD OF INSERT ON book_titles BEGIN SELECT 1; END; ${attach}`,
        ),
      'schema.json',
    ],
    [
      'virtual table followed by ATTACH',
      (s) => {
        s.virtualTables[0].sql += `;${attach}`;
      },
      'schema.json',
    ],
    [
      'table header with a trailing ATTACH',
      (_s, h) => {
        h.sql += `;${attach}`;
      },
      'tables/books.jsonl',
    ],
    [
      'index entry that is an ATTACH',
      (_s, h) => {
        h.indexes.push(attach);
      },
      'tables/books.jsonl',
    ],
    [
      'index on another table',
      (_s, h) => {
        h.indexes.push('CREATE INDEX sneaky ON audit(what)');
      },
      'tables/books.jsonl',
    ],
    [
      'trigger followed by a DELETE',
      (_s, h) => {
        h.triggers[0] = `${h.triggers[0]} DELETE FROM audit`;
      },
      'tables/books.jsonl',
    ],
  ];
  for (const [name, mutate, record] of cases) {
    const s = structuredClone(schema);
    const h = structuredClone(header);
    mutate(s, h);
    const target = join(dir, `target-${cases.findIndex((c) => c[0] === name)}.sqlite`);
    const dst = createSqliteSource({ type: 'sqlite', path: target });
    const body =
      record === 'schema.json'
        ? Buffer.from(JSON.stringify(s))
        : Buffer.from([JSON.stringify(h), ...books.slice(1)].join('\n'));
    await t.rejects(dst.write(record, body), { code: 'ERR_SOURCE_UNSAFE_STATEMENT', record }, name);
    await dst.close();
    t.notOk(existsSync(target), `${name}: no target file created`);
    t.notOk(existsSync(evil), `${name}: nothing attached`);
  }

  // The untouched records still restore, with their view trigger, index and trigger.
  const target = join(dir, 'clean.sqlite');
  const dst = createSqliteSource({ type: 'sqlite', path: target });
  const s = structuredClone(schema);
  s.viewTriggers.push('CREATE TRIGGER vt INSTEAD OF INSERT ON book_titles BEGIN SELECT 1; END;');
  await dst.write('schema.json', Buffer.from(JSON.stringify(s)));
  await dst.write('tables/books.jsonl', Buffer.from(books.join('\n')));
  await dst.close();
  const db = new Database(target, { readonly: true });
  t.same(
    db
      .prepare(
        "SELECT name FROM sqlite_schema WHERE type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .all(),
    [{ name: 'books_audit' }, { name: 'books_by_author' }, { name: 'vt' }],
  );
  db.close();
});
