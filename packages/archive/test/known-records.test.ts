/**
 * `verifyRun` with `knownRecords` (the writer's read-back given the base the run was written on):
 * a line equal to a known record's line is taken as that record, with this index's sequence
 * number, instead of being parsed again; every other line is parsed. The verdict, the records and
 * the kept base are exactly those of a verification without it.
 * `openRun` takes the same option (records and lines only): a reader of the base's own run shares
 * its records.
 */
import t from 'tap';
import { type IndexEntry, loadChunkedBase, openRun, type RecordInput, verifyRun } from '../src/index.ts';
import { JOB, writeRun } from './chain-helpers.ts';
import { fsStore, keys, pseudoRandom, text } from './helpers.ts';

const small = (i: number, edit = 0): RecordInput => ({
  name: `small/${String(i).padStart(2, '0')}`,
  body: text(1500 + i, i + edit),
  change: `c${i}-${edit}`,
});

/** Entries without the fields a reader never compares (plain data, for t.same). */
const plain = (es: Iterable<IndexEntry>) => [...es].map((e) => JSON.parse(JSON.stringify(e)));

t.test('records unchanged since the base are taken from it; changed and new ones are parsed', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const first = [
    ...Array.from({ length: 12 }, (_, i) => small(i)),
    { name: 'z-big', body: pseudoRandom(200 * 1024, 1) },
  ];
  await writeRun(store, k, 'run-0001', null, first);
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  t.ok(base);
  // Run 2: a new record sorts first (every unchanged record moves one place), one record changed.
  const second = [
    { name: 'a-new', body: text(900, 77) },
    ...first.map((r, i) => (i === 3 ? small(3, 1) : r)),
  ];
  await writeRun(store, k, 'run-0002', 'run-0001', second);

  const opts = { job: JOB, runId: 'run-0002', secretKey: k.operational.secretKey, keepBase: true };
  const without = await verifyRun(store, opts);
  const known = await verifyRun(store, { ...opts, knownRecords: base! });
  t.ok(without.ok);
  t.ok(known.ok);
  t.same(known.checks, without.checks, 'the same checks');
  const a = [...known.base!.records.values()];
  const b = [...without.base!.records.values()];
  t.same(plain(a), plain(b), 'the same records, sequence numbers included');
  t.same([...known.base!.lines], [...without.base!.lines], 'the same signed lines');
  t.same(
    a.map((e) => e.seq),
    second.map((_, i) => i),
    'each record has its place in the new index',
  );

  const shared = a.filter((e) => e.chunks === base!.records.get(e.name)?.chunks).map((e) => e.name);
  t.same(
    shared.sort(),
    first
      .map((r) => r.name)
      .filter((n) => n !== 'small/03')
      .sort(),
    'unchanged records were taken from the base (their chunk lists are the base’s), not parsed',
  );
  t.equal(base!.records.get('small/00')!.seq, 0, 'the base’s own records keep their sequence numbers');
});

t.test('known records cannot stand in for a line they do not equal', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const records = Array.from({ length: 6 }, (_, i) => small(i));
  await writeRun(store, k, 'run-0001', null, records);
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  // A record whose line is one character off from the stored one is never used.
  const lines = new Map(base!.lines);
  const forged = new Map(base!.records);
  const victim = 'small/02';
  lines.set(victim, `${lines.get(victim)!} `);
  forged.set(victim, { ...forged.get(victim)!, size: 1 });
  const v = await verifyRun(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    keepBase: true,
    knownRecords: { lines, records: forged },
  });
  t.ok(v.ok);
  t.equal(
    v.base!.records.get(victim)!.size,
    (records[2]!.body as Uint8Array).length,
    'the stored line was parsed',
  );
  t.same(plain(v.base!.records.values()), plain(base!.records.values()));
});

t.test('openRun with knownRecords shares the base’s records and still checks every line', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const records = [
    ...Array.from({ length: 8 }, (_, i) => small(i)),
    { name: 'z-big', body: pseudoRandom(150 * 1024, 2) },
  ];
  await writeRun(store, k, 'run-0001', null, records);
  const secretKey = k.operational.secretKey;
  const base = await loadChunkedBase(store, { job: JOB, runId: 'run-0001', secretKey });
  t.ok(base);

  // The engine's restore of the kept base's own run: every entry is the base's object.
  const opened = await openRun(store, { job: JOB, runId: 'run-0001', secretKey, knownRecords: base! });
  const entries: IndexEntry[] = [];
  for await (const e of opened.records()) entries.push(e);
  t.equal(entries.length, records.length);
  t.ok(
    entries.every((e) => e === base!.records.get(e.name)),
    'each entry is the known record itself, not a parsed copy',
  );
  const fresh: IndexEntry[] = [];
  for await (const e of (await openRun(store, { job: JOB, runId: 'run-0001', secretKey })).records())
    fresh.push(e);
  t.same(plain(entries), plain(fresh), 'the same records as a reader without them');
  t.notOk(
    fresh.some((e) => e === base!.records.get(e.name)),
    'a reader without them parses its own',
  );
  // The records read through it are the stored bytes, checked as always.
  let i = 0;
  for await (const r of opened.readRecords(entries)) {
    t.same(Buffer.concat(r.pieces), Buffer.from(records[i++]!.body as Uint8Array), r.entry.name);
    r.release();
  }
  t.equal(i, records.length);

  // A known record whose line is not the stored one is not taken: the stored line is parsed.
  const lines = new Map(base!.lines);
  const forged = new Map(base!.records);
  lines.set('small/04', `${lines.get('small/04')!} `);
  forged.set('small/04', { ...forged.get('small/04')!, size: 1 });
  const wary = await openRun(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey,
    knownRecords: { lines, records: forged },
  });
  const got: IndexEntry[] = [];
  for await (const e of wary.records()) got.push(e);
  t.equal(got.find((e) => e.name === 'small/04')!.size, (records[4]!.body as Uint8Array).length);
  t.same(plain(got), plain(fresh));

  await t.rejects(
    openRun(store, {
      job: JOB,
      runId: 'run-0001',
      secretKey,
      knownRecords: { lines: [], records: new Map() } as never,
    }),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
    'knownRecords without maps is refused',
  );
});
