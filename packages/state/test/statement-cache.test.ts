// The SQLite state's prepared statements are reused (src/internal/statement-cache.ts): one per
// SQL text, never a busy one, at most `max`, least recently used dropped first.
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { withStatementCache } from '../src/internal/statement-cache.ts';

function fixture(t: { teardown(fn: () => void): void }) {
  const raw = new Database(join(tempDir(t), 'cache.sqlite'));
  raw.exec('create table kv (k text primary key, v text)');
  let prepared = 0;
  const prepare = raw.prepare.bind(raw);
  raw.prepare = ((sql: string) => {
    prepared++;
    return prepare(sql);
  }) as typeof raw.prepare;
  t.teardown(() => {
    if (raw.open) raw.close();
  });
  return { raw, prepared: () => prepared };
}

t.test('the same SQL reuses its statement, with new parameters each time', async (t) => {
  const { raw, prepared } = fixture(t);
  const db = withStatementCache(raw);
  const insert = 'insert into kv (k, v) values (?, ?)';
  for (let i = 0; i < 5; i++) db.prepare(insert).run(`k${i}`, `v${i}`);
  const select = 'select v from kv where k = ?';
  t.equal(db.prepare(select), db.prepare(select), 'one statement object');
  t.same(db.prepare(select).get('k3'), { v: 'v3' });
  t.same(db.prepare(select).get('k4'), { v: 'v4' });
  t.equal(prepared(), 2, 'prepared once per SQL text');
});

t.test('a statement busy in an open iteration is not handed out again', async (t) => {
  const { raw, prepared } = fixture(t);
  const db = withStatementCache(raw);
  for (let i = 0; i < 3; i++) db.prepare('insert into kv (k, v) values (?, ?)').run(`k${i}`, `v${i}`);
  const all = 'select k from kv order by k';
  const it = db.prepare(all).iterate() as IterableIterator<{ k: string }>;
  t.equal(it.next().value?.k, 'k0');
  const other = db.prepare(all);
  t.equal(other.busy, false, 'a fresh statement while the cached one iterates');
  t.same(
    other.all().map((r) => (r as { k: string }).k),
    ['k0', 'k1', 'k2'],
  );
  t.same(
    [...it].map((r) => r.k),
    ['k1', 'k2'],
    'the iteration goes on undisturbed',
  );
  t.equal(prepared(), 3, 'insert, the iterated select, and the fresh one');
});

t.test('at most max statements, the least recently used dropped first; close closes the file', async (t) => {
  const { raw, prepared } = fixture(t);
  const db = withStatementCache(raw, 2);
  const a = db.prepare('select 1');
  db.prepare('select 2');
  t.equal(db.prepare('select 1'), a, 'a used again: now the most recent');
  db.prepare('select 3'); // drops "select 2"
  t.equal(db.prepare('select 1'), a, 'still cached');
  const before = prepared();
  db.prepare('select 2');
  t.equal(prepared(), before + 1, 'the dropped one is prepared again');
  db.close();
  t.equal(raw.open, false);
});
