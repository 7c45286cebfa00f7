/**
 * `openRun` given the kept base of the very run it opens (`knownRecords`, the engine's restore of
 * "the latest"): the reader reads through the base's chunk map instead of loading every pack index
 * again, but only while that map is exactly the job's pack indexes and names every chunk of the
 * run; it never writes to the map, and otherwise loads one of its own. Either way every pack it
 * reads is checked as always.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { countReads } from '@coffer/testkit';
import t from 'tap';
import {
  type ChunkedBase,
  isOpenedRunCurrent,
  loadChunkedBase,
  type OpenedRun,
  openRun,
} from '../src/index.ts';
import { editedRecords, isPackIndex, JOB, writeRun } from './chain-helpers.ts';
import { fsStore, keys } from './helpers.ts';

const records = editedRecords;

/** Two runs written and the base of the second loaded (what the engine keeps after it). */
async function chain(t: { teardown(fn: () => void): void }) {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  await writeRun(store, k, 'run-0002', 'run-0001', records(2));
  const secretKey = k.operational.secretKey;
  const base = (await loadChunkedBase(store, { job: JOB, runId: 'run-0002', secretKey }))!;
  return { store, root, k, secretKey, base };
}

/** Every record of `run`, read and checked. */
async function readAll(run: OpenedRun): Promise<Map<string, Buffer>> {
  const entries = [];
  for await (const e of run.records()) entries.push(e);
  const out = new Map<string, Buffer>();
  for await (const r of run.readRecords(entries)) {
    out.set(r.entry.name, Buffer.concat(r.pieces));
    r.release();
  }
  return out;
}

/** What a base's map holds, to see that a reader left it as it was. */
const snapshot = (base: ChunkedBase) => ({
  chunks: [...base.map.chunks.keys()].sort(),
  packs: [...base.map.packs.keys()].sort(),
  indexes: [...base.map.indexes].sort(),
  unreadable: [...base.map.unreadable],
});

const expected = new Map(records(2).map((r) => [r.name, Buffer.from(r.body as Uint8Array)]));

t.test('a reader of the base’s own run reads through the base’s chunk map', async (t) => {
  const { store, secretKey, base } = await chain(t);
  const before = snapshot(base);
  const counted = countReads(store);
  const run = await openRun(counted.store, { job: JOB, runId: 'run-0002', secretKey, knownRecords: base });
  t.same(await readAll(run), expected, 'every record, as stored');
  t.equal(counted.count(isPackIndex), 0, 'no pack index read: the base’s map was used');
  t.ok(counted.count((key) => key.includes('/packs/') && key.includes('/data/')) > 0, 'the packs were read');
  t.ok(await isOpenedRunCurrent(run), 'the reader is current on the lent map');
  t.same(snapshot(base), before, 'the base’s map is as it was');

  const own = countReads(store);
  t.same(await readAll(await openRun(own.store, { job: JOB, runId: 'run-0002', secretKey })), expected);
  t.equal(own.count(isPackIndex), 2, 'a reader without the base loads both pack indexes');
});

t.test('a base of an earlier run lends no map to a reader of another run', async (t) => {
  const { store, secretKey, base } = await chain(t);
  const counted = countReads(store);
  // The base is of run-0002; the lines of run-0001 differ from it, the map would be the same key's.
  const run = await openRun(counted.store, { job: JOB, runId: 'run-0001', secretKey, knownRecords: base });
  t.same(
    await readAll(run),
    new Map(records(1).map((r) => [r.name, Buffer.from(r.body as Uint8Array)])),
    'run-0001 read as stored',
  );
  t.equal(counted.count(isPackIndex), 0, 'the map is of the same job and key: it is lent');
  t.same(snapshot(base).indexes.length, 2);
});

t.test('a base whose map no longer describes the store: the reader loads its own', async (t) => {
  const { store, root, k, secretKey, base } = await chain(t);
  const before = snapshot(base);
  // Another run's pack index joins the store (written on a base of its own), so the kept base's
  // map is no longer exactly the job's pack indexes.
  await writeRun(store, k, 'run-0003', 'run-0002', records(3));
  const counted = countReads(store);
  const run = await openRun(counted.store, { job: JOB, runId: 'run-0002', secretKey, knownRecords: base });
  t.same(await readAll(run), expected, 'every record, as stored');
  t.equal(counted.count(isPackIndex), 3, 'the reader loaded every pack index itself');
  t.same(snapshot(base), before, 'the base’s map is as it was (not extended)');

  // One of the base's pack indexes gone (a prune or repack rewrites them under new names).
  rmSync(join(root, before.indexes[0]!));
  const after = countReads(store);
  const again = await openRun(after.store, { job: JOB, runId: 'run-0002', secretKey, knownRecords: base });
  const got = await readAll(again).catch((e: { code?: string }) => e.code);
  const fresh = await readAll(await openRun(store, { job: JOB, runId: 'run-0002', secretKey })).catch(
    (e: { code?: string }) => e.code,
  );
  t.same(got, fresh, 'the same outcome as a reader without the base');
  t.equal(after.count(isPackIndex), 2, 'the two pack indexes left, read by the reader');
  t.same(snapshot(base), before, 'the base’s map is still as it was');
});

t.test('a lent map that misses a chunk of the run is not used, and not written', async (t) => {
  const { store, secretKey, base } = await chain(t);
  const chunks = new Map(base.map.chunks);
  const dropped = [...chunks.keys()][0]!;
  chunks.delete(dropped);
  const packs = new Map(base.map.packs);
  const partial = { ...base, map: { ...base.map, chunks, packs } } as ChunkedBase;
  const counted = countReads(store);
  const run = await openRun(counted.store, {
    job: JOB,
    runId: 'run-0002',
    secretKey,
    knownRecords: partial,
  });
  t.same(await readAll(run), expected, 'every record, as stored');
  t.equal(counted.count(isPackIndex), 2, 'the reader loaded both pack indexes itself');
  t.notOk(chunks.has(dropped), 'the missing chunk was not added to the lent map');
  t.equal(packs.size, base.map.packs.size, 'nor any pack');
});

t.test('a reader never scans packs into a lent map, even when a chunk goes missing from it', async (t) => {
  const { store, secretKey, base } = await chain(t);
  const chunks = new Map(base.map.chunks);
  const packs = new Map(base.map.packs);
  const lent = { ...base, map: { ...base.map, chunks, packs } } as ChunkedBase;
  const run = await openRun(store, { job: JOB, runId: 'run-0002', secretKey, knownRecords: lent });
  t.same(await readAll(run), expected, 'read through the lent map');
  // Whatever changed the map afterwards, the reader does not complete it from the packs.
  const dropped = [...chunks.keys()][0]!;
  const pack = chunks.get(dropped)!.pack;
  chunks.delete(dropped);
  packs.delete(pack);
  await t.rejects(
    readAll(run),
    { code: 'ERR_ARCHIVE_CHUNK_MISSING' },
    'the chunk is missing, not found by scanning',
  );
  t.notOk(chunks.has(dropped), 'nothing was added to the lent map');
  t.notOk(packs.has(pack), 'not even the pack that holds it');
});
