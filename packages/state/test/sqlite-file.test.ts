// Behaviours that need a hand on the database file itself (SQLite: open it with better-sqlite3):
// the wound-back run counter, a hand-edited JSON column, a schema from a newer engine, WAL mode.
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { openState, type StateError } from '../src/index.ts';

t.test('runlogCounterReset when the counter is wound back below a retained run', async (t) => {
  const dataDir = tempDir(t);
  const s = await openState({ dataDir, historyLimit: 2 });
  for (let i = 1; i <= 4; i++) {
    await s.runs.start({ id: `r${i}`, jobId: 'j' });
    await s.runs.update(`r${i}`, { status: 'ok' });
  }
  t.same(await s.runs.counters(), {
    runsRecordedTotal: 4,
    runsRetainedCount: 2,
    runsRolledOverCount: 2,
    runlogCounterReset: false,
  });
  const raw = new Database(join(dataDir, 'state.sqlite'));
  raw.prepare("update counters set value = 3 where name = 'runs.recorded'").run();
  raw.close();
  const c = await s.runs.counters();
  t.equal(c.runlogCounterReset, true, 'counter below the highest retained seq');
  t.equal(c.runsRecordedTotal, 3);
  t.ok(c.runsRolledOverCount >= 1, 'rolled-over figure is a floor');
  await s.close();
});

t.test('a hand-edited JSON column reads as ERR_STATE_CORRUPT; an unchecked write repairs it', async (t) => {
  const dataDir = tempDir(t);
  const s = await openState({ dataDir });
  t.teardown(() => s.close());
  await s.jobs.upsert({ id: 'j', a: 1 });
  const raw = new Database(join(dataDir, 'state.sqlite'));
  raw.prepare("update jobs set config = '{broken' where id = 'j'").run();
  raw.close();
  await t.rejects(s.jobs.get('j'), { code: 'ERR_STATE_CORRUPT' });
  await t.rejects(s.jobs.upsert({ id: 'j', a: 2 }, { ifMatchRev: 1 }), {
    code: 'ERR_STATE_PRECONDITION',
    precondition: { reason: 'precondition-unreadable', currentRev: 1 },
  });
  const fixed = await s.jobs.upsert({ id: 'j', a: 3 });
  t.equal(fixed.job.configRev, 2, 'a write without a check replaces the unreadable record');
  t.same(fixed.changedFields, ['a', 'id']);
});

t.test('a database migrated by a newer engine is refused', async (t) => {
  const dataDir = tempDir(t);
  const s = await openState({ dataDir });
  await s.close();
  const raw = new Database(join(dataDir, 'state.sqlite'));
  t.equal(raw.pragma('journal_mode', { simple: true }), 'wal', 'WAL mode');
  raw
    .prepare(
      "insert into kysely_migration (name, timestamp) values ('9999_from_the_future', '2031-01-01T00:00:00.000Z')",
    )
    .run();
  raw.close();
  try {
    await openState({ dataDir });
    t.fail('opened');
  } catch (e) {
    t.equal((e as StateError).code, 'ERR_STATE_MIGRATION');
    t.match((e as StateError).message, /newer engine/);
  }
});

t.test('a file that is not a database', async (t) => {
  const dataDir = tempDir(t);
  const { writeFileSync } = await import('node:fs');
  writeFileSync(join(dataDir, 'state.sqlite'), 'this is not a database, just some text'.repeat(100));
  await t.rejects(openState({ dataDir }), { code: 'ERR_STATE_CORRUPT' });
});

t.test('the opened store commits durably: WAL with synchronous=FULL on its own connection', async (t) => {
  const dataDir = tempDir(t);
  const s = await openState({ dataDir });
  t.teardown(() => s.close());
  // Read back from the store's connection: `synchronous` is per connection, so a second handle on
  // the file would show SQLite's default, not what the store commits with.
  t.same(await s.durability(), { journalMode: 'wal', synchronous: 'FULL' });
  const weak = await openState({ dataDir: tempDir(t), sqliteSynchronous: 'NORMAL' });
  t.teardown(() => weak.close());
  t.same(await weak.durability(), { journalMode: 'wal', synchronous: 'NORMAL' }, 'the read-back can fail');
});
