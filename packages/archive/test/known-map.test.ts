/**
 * `verifyRun` given the base a run was written on (`knownRecords`, the writer's read-back): the
 * chunk map is built on the base's, reading only the pack indexes stored since the base loaded;
 * when one the base was built from is gone, the whole map is loaded again. The new pack indexes
 * are read from the store, never taken from what the writer knew.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ObjectStore } from '@coffer/objectstore';
import { countReads } from '@coffer/testkit';
import t from 'tap';
import { type ChunkedBase, createChunkedWriter, loadChunkedBase, verifyRun } from '../src/index.ts';
import { editedRecords, isPackIndex, JOB, writeRun } from './chain-helpers.ts';
import { chunkedOptions, fsStore, type Keys, keys } from './helpers.ts';

const records = editedRecords;

/** Writes `runId` on `base` (as the engine does: the base loaded once, given to the writer). */
async function writeOn(store: ObjectStore, k: Keys, runId: string, base: ChunkedBase): Promise<string[]> {
  const w = await createChunkedWriter(
    chunkedOptions(store, k, { runId, prevRunId: base.runId, base, writeRecovery: false }),
  );
  for (const r of records(Number(runId.slice(-1)))) await w.addRecord(r);
  return (await w.finish()).packIds;
}

/** Two runs written and a base of the second loaded; its pack index keys. */
async function chain(t: { teardown(fn: () => void): void }) {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  await writeRun(store, k, 'run-0002', 'run-0001', records(2));
  const base = (await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0002',
    secretKey: k.operational.secretKey,
  }))!;
  const before = [...base.map.indexes];
  return { store, root, k, base, before };
}

t.test('the read-back reads only the pack indexes stored since the base loaded', async (t) => {
  const { store, k, base, before } = await chain(t);
  t.equal(before.length, 2, 'the base was built from two pack indexes');
  const newPacks = await writeOn(store, k, 'run-0003', base);
  t.ok(newPacks.length > 0, 'the run stored packs');
  const opts = { job: JOB, runId: 'run-0003', secretKey: k.operational.secretKey, newPacks, keepBase: true };

  const without = await verifyRun(store, opts);
  const counted = countReads(store);
  const known = await verifyRun(counted.store, { ...opts, knownRecords: base });
  t.ok(without.ok, 'verified without the base');
  t.ok(known.ok, 'verified with it');
  t.same(known.checks, without.checks, 'the same checks');
  for (const key of before) t.equal(counted.reads(key), 0, `${key.slice(-12)}: not read again`);
  t.equal(counted.count(isPackIndex), 1, 'the one pack index the run stored was read');
  const added = known.base!.map.indexes.filter((key) => !before.includes(key));
  t.equal(added.length, 1, 'and joined the map');
  t.equal(counted.reads(added[0]!), 1);
  t.equal(known.base!.map, base.map, 'the kept base shares the base’s chunk map');
  t.same(
    [...known.base!.map.chunks].sort(),
    [...without.base!.map.chunks].sort(),
    'which now holds exactly what a fresh load finds',
  );
  t.same(known.base!.map.indexes.sort(), without.base!.map.indexes.sort());
});

t.test('a pack index the base was built from is gone: the whole map is loaded again', async (t) => {
  const { store, root, k, base, before } = await chain(t);
  const newPacks = await writeOn(store, k, 'run-0003', base);
  // A prune or repack rewrites pack indexes under new names; here one of the base's is removed.
  rmSync(join(root, before[0]!));
  const counted = countReads(store);
  const opts = { job: JOB, runId: 'run-0003', secretKey: k.operational.secretKey, newPacks, keepBase: true };
  const verdict = await verifyRun(counted.store, { ...opts, knownRecords: base });
  t.equal(counted.count(isPackIndex), 2, 'every listed pack index read (the other old one and the new one)');
  t.equal(counted.reads(before[1]!), 1, 'the base’s remaining index read again');
  const fresh = await verifyRun(store, opts);
  t.equal(verdict.ok, fresh.ok, 'the same verdict as without the base');
  t.same(verdict.failure?.code, fresh.failure?.code);
  t.not(verdict.base?.map, base.map, 'the base’s map is not the one used');
});

t.test('the new pack index is judged as stored, not as the writer knew it', async (t) => {
  const { store, root, k, base, before } = await chain(t);
  const newPacks = await writeOn(store, k, 'run-0003', base);
  const listed: string[] = [];
  for await (const o of store.listAll(`jobs/${JOB}/packs/`)) listed.push(o.key);
  const stored = listed.filter((key) => isPackIndex(key) && !before.includes(key));
  t.equal(stored.length, 1);
  // Flip one byte of the new pack index: it no longer opens.
  const path = join(root, stored[0]!);
  const bytes = readFileSync(path);
  bytes[bytes.length - 5]! ^= 1;
  writeFileSync(path, bytes);
  const opts = { job: JOB, runId: 'run-0003', secretKey: k.operational.secretKey, newPacks, keepBase: true };
  const verdict = await verifyRun(store, { ...opts, knownRecords: base });
  const fresh = await verifyRun(store, opts);
  t.same(base.map.unreadable, stored, 'the new index is listed unreadable in the map');
  t.equal(verdict.ok, fresh.ok, 'the same verdict as a fresh load');
  // Its packs were described from their own chunk tables, so no base is kept from this map.
  t.equal(verdict.base, undefined, 'no base kept from a map completed by scanning packs');
  t.equal(fresh.base, undefined);
});
