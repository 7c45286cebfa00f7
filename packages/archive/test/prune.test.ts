// Pruning and repacking a 0.2 job (docs/archive-format.md §12.9): real runs in a real filesystem
// store, small chunking parameters so a few hundred KiB make many chunks and packs.
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { ObjectStore } from '@coffer/objectstore';
import t, { type Test } from 'tap';
import {
  type ChunkedPruneRunOptions,
  createChunkedWriter,
  loadChunkedBase,
  openRun,
  type PruneProgress,
  planChunkedPrune,
  pruneChunked,
  type RecordInput,
  verifyRun,
} from '../src/index.ts';
import { openPackIndex } from '../src/internal/chunked-index.ts';
import { deleteRun, JOB, pruneOptions, writeRun } from './chain-helpers.ts';
import { chunkedOptions, fsStore, type Keys, keys, pseudoRandom, readAll, sealRun, text } from './helpers.ts';

/** Every object under the job's packs/ (relative path: size). */
function packObjects(root: string): Map<string, number> {
  const dir = join(root, 'jobs', JOB, 'packs');
  const out = new Map<string, number>();
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out.set(relative(dir, path), statSync(path).size);
  }
  return out;
}

function bytesOf(objects: Map<string, number>, part?: '/data/' | '/index/'): number {
  let n = 0;
  for (const [path, size] of objects) if (part === undefined || path.includes(part)) n += size;
  return n;
}

/** Pack ids present in the store. */
function packIds(root: string): Set<string> {
  const out = new Set<string>();
  for (const path of packObjects(root).keys()) {
    const m = /\/data\/[0-9a-f]{2}\/([0-9a-f]{32})\.bin$/.exec(path);
    if (m) out.add(m[1]!);
  }
  return out;
}

async function readBack(store: ObjectStore, k: Keys, runId: string): Promise<Map<string, Uint8Array>> {
  const run = await openRun(store, { job: JOB, runId, secretKey: k.operational.secretKey });
  return new Map((await readAll(run)).map((r) => [r.entry.name, r.body]));
}

/** Each expected run verifies and reads back byte for byte. */
async function checkRuns(
  t: Test,
  store: ObjectStore,
  k: Keys,
  expected: Map<string, RecordInput[]>,
  when: string,
): Promise<void> {
  for (const [runId, records] of expected) {
    const v = await verifyRun(store, {
      job: JOB,
      runId,
      secretKey: k.operational.secretKey,
      signerPublicKey: k.signer.publicKey,
    });
    t.ok(v.ok, `${when}: ${runId} verifies${v.ok ? '' : ` (${v.failure?.code})`}`);
    const got = await readBack(store, k, runId);
    const exact = records.every((r) => {
      const body = got.get(r.name);
      return body !== undefined && Buffer.from(body).equals(Buffer.from(r.body as Uint8Array));
    });
    t.ok(exact && got.size === records.length, `${when}: ${runId} reads back byte-exact`);
  }
}

// ---- a three-run chain with churn ----

function dataSet(): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 30; i++)
    out.push({ name: `small/${i}.txt`, body: text(500 + i * 97, i), change: `v1-${i}` });
  out.push({ name: 'big.bin', body: pseudoRandom(400 * 1024, 7), change: 'big-v1' });
  return out;
}

function replace(records: RecordInput[], name: string, body: Uint8Array, change: string): RecordInput[] {
  return records.map((r) => (r.name === name ? { ...r, body, change } : r));
}

/**
 * run-0001: the data set plus gone.bin (dropped by run-0002: whole packs become dead); run-0002
 * rewrites 25 of the 30 small files, run-0003 one more; each rewrites a middle part of big.bin and
 * adds a file.
 */
async function churnChain(store: ObjectStore, k: Keys): Promise<Map<string, RecordInput[]>> {
  const r1 = [...dataSet(), { name: 'gone.bin', body: pseudoRandom(300 * 1024, 11), change: 'g1' }];
  await writeRun(store, k, 'run-0001', null, r1);
  const big2 = Uint8Array.from(pseudoRandom(400 * 1024, 7));
  big2.set(pseudoRandom(1000, 99), 200 * 1024);
  let r2 = replace(dataSet(), 'big.bin', big2, 'big-v2');
  // Most small files change: the pack they shared with the start of big.bin keeps little live data.
  for (let i = 0; i < 25; i++) r2 = replace(r2, `small/${i}.txt`, text(600 + i * 50, 1000 + i), `v2-${i}`);
  r2.push({ name: 'new.txt', body: text(3000, 5) });
  await writeRun(store, k, 'run-0002', 'run-0001', r2);
  const big3 = Uint8Array.from(big2);
  big3.set(pseudoRandom(1000, 98), 50 * 1024);
  const r3 = replace(replace(r2, 'small/5.txt', text(900, 555), 'v3-5'), 'big.bin', big3, 'big-v3');
  r3.push({ name: 'new3.txt', body: text(5000, 9) });
  await writeRun(store, k, 'run-0003', 'run-0002', r3);
  return new Map([
    ['run-0002', r2],
    ['run-0003', r3],
  ]);
}

/** What the plan should say, worked out independently from the runs' records and the pack indexes. */
async function expectedFates(store: ObjectStore, k: Keys, runIds: string[], threshold: number) {
  const referenced = new Set<string>();
  for (const runId of runIds) {
    const run = await openRun(store, { job: JOB, runId, secretKey: k.operational.secretKey });
    for await (const e of run.records()) for (const c of e.chunks ?? []) referenced.add(c.id);
  }
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: runIds.at(-1)!,
    secretKey: k.operational.secretKey,
  });
  const dead: string[] = [];
  const repack: string[] = [];
  const live: string[] = [];
  for (const line of base!.map.packs.values()) {
    const bytes = line.chunks.filter((c) => referenced.has(c.id)).reduce((n, c) => n + c.length, 0);
    if (bytes === 0) dead.push(line.pack);
    else if (bytes < threshold * line.plainSize) repack.push(line.pack);
    else live.push(line.pack);
  }
  return { dead: dead.sort(), repack: repack.sort(), live: live.sort(), base: base! };
}

t.test('the dry run reports what pruning would do, and changes nothing', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await churnChain(store, k);
  deleteRun(root, 'run-0001');
  const before = packObjects(root);
  const plan = await planChunkedPrune(store, pruneOptions(k));
  t.same(
    plan.runs.map((r) => r.runId),
    ['run-0002', 'run-0003'],
    'it read every remaining run',
  );
  t.equal(plan.keys.length, 1);
  const key = plan.keys[0]!;
  const want = await expectedFates(store, k, ['run-0002', 'run-0003'], 0.5);
  t.ok(want.dead.length >= 2, `whole packs died with gone.bin (${want.dead.length})`);
  t.same([...key.deletePacks].sort(), want.dead, 'dead packs: exactly those with no referenced chunk');
  t.same([...key.repackPacks].sort(), want.repack, 'packs to repack: live data under half');
  t.equal(key.packs.live, want.live.length);
  t.equal(key.packs.total, before.size - key.indexes.total);
  t.equal(key.packs.orphans + key.packs.young + key.packs.unknown + key.packs.missing, 0);
  const sizeOf = (pack: string) => before.get(`${key.keyId}/data/${pack.slice(0, 2)}/${pack}.bin`)!;
  t.equal(
    key.bytes.dead,
    want.dead.reduce((n, p) => n + sizeOf(p), 0),
    'bytes freed by deleting dead packs',
  );
  t.equal(key.bytes.packs, bytesOf(before, '/data/'));
  t.equal(key.bytes.indexes, bytesOf(before, '/index/'));
  t.equal(plan.totals.storedBytes, bytesOf(before));
  t.ok(key.indexes.rewrite + key.indexes.empty >= 1, "run-0001's pack index is rewritten or emptied");
  t.same(packObjects(root), before, 'a dry run deletes and writes nothing');
});

t.test('prune deletes the dead packs, every remaining run verifies and reads back', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const expected = await churnChain(store, k);
  deleteRun(root, 'run-0001');
  const want = await expectedFates(store, k, ['run-0002', 'run-0003'], 0);
  const before = packObjects(root);
  // Threshold 0 (no repack): the store shrinks by exactly the planned bytes.
  const plan = await planChunkedPrune(store, pruneOptions(k, { repackThreshold: 0 }));
  const steps: PruneProgress['step'][] = [];
  const result = await pruneChunked(
    store,
    pruneOptions(k, {
      repackThreshold: 0,
      onProgress: (p) => {
        if (steps.at(-1) !== p.step) steps.push(p.step);
      },
    }),
  );
  t.same(steps, ['repack', 'rewrite', 'delete'], 'the steps run in the crash-safe order');
  t.ok(result.complete);
  t.equal(result.deletedPacks, plan.totals.deadPacks);
  const after = packObjects(root);
  t.equal(
    bytesOf(before, '/data/') - bytesOf(after, '/data/'),
    plan.keys[0]!.bytes.dead,
    'pack storage shrank by the planned amount',
  );
  t.equal(bytesOf(before) - bytesOf(after), result.freedBytes, 'the result counts what was freed');
  const left = packIds(root);
  t.ok(
    want.live.every((p) => left.has(p)),
    'no pack holding a referenced chunk was deleted',
  );
  t.ok(want.dead.every((p) => !left.has(p)));
  await checkRuns(t, store, k, expected, 'after prune');
  const again = await planChunkedPrune(store, pruneOptions(k, { repackThreshold: 0 }));
  t.equal(again.totals.deadPacks + again.totals.orphanPacks, 0, 'a second plan finds nothing left to do');
  t.equal(again.totals.freesBytes, 0);
});

t.test('prune with repacking: the live chunks move, the store shrinks by what it reports', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const expected = await churnChain(store, k);
  deleteRun(root, 'run-0001');
  deleteRun(root, 'run-0002');
  expected.delete('run-0002');
  const want = await expectedFates(store, k, ['run-0003'], 0.5);
  t.ok(want.repack.length >= 1, `some packs fall under the threshold (${want.repack.length})`);
  const before = packObjects(root);
  const result = await pruneChunked(store, pruneOptions(k));
  t.same([...result.plan.keys[0]!.repackPacks].sort(), want.repack);
  t.equal(result.repackedPacks, want.repack.length);
  t.ok(result.newPacks >= 1);
  const left = packIds(root);
  t.ok(
    want.live.every((p) => left.has(p)),
    'packs above the threshold are kept',
  );
  t.ok(
    [...want.repack, ...want.dead].every((p) => !left.has(p)),
    'repacked and dead packs are gone',
  );
  t.equal(bytesOf(before) - bytesOf(packObjects(root)), result.freedBytes);
  t.ok(result.freedBytes > 0);
  await checkRuns(t, store, k, expected, 'after repack');
  const again = await planChunkedPrune(store, pruneOptions(k));
  t.equal(again.totals.repackPacks + again.totals.deadPacks, 0, 'the new packs are full: nothing to repack');
});

// ---- a controlled chain: one pack per run ----

const A = pseudoRandom(50 * 1024, 1);
const B = pseudoRandom(6 * 1024, 2);
const C = pseudoRandom(50 * 1024, 3);
const D = pseudoRandom(6 * 1024, 4);

/**
 * run-0001: x (whole packs, dropped next); run-0002: a + b (one pack, P1); run-0003: b (reused),
 * c + d (one pack, P2); run-0004: b and c (reused, no new pack). With runs 1-3 deleted, x's packs
 * are dead, P1 is about 11 % live (b) and P2 about 89 % (c).
 */
async function controlledChain(store: ObjectStore, k: Keys) {
  const x = await writeRun(store, k, 'run-0001', null, [{ name: 'x', body: pseudoRandom(150 * 1024, 9) }]);
  const [p1] = await writeRun(store, k, 'run-0002', 'run-0001', [
    { name: 'a', body: A, change: 'a' },
    { name: 'b', body: B, change: 'b' },
  ]);
  const p2s = await writeRun(store, k, 'run-0003', 'run-0002', [
    { name: 'b', body: B, change: 'b' },
    { name: 'c', body: C, change: 'c' },
    { name: 'd', body: D, change: 'd' },
  ]);
  const none = await writeRun(store, k, 'run-0004', 'run-0003', [
    { name: 'b', body: B, change: 'b' },
    { name: 'c', body: C, change: 'c' },
  ]);
  const expected = new Map([
    [
      'run-0004',
      [
        { name: 'b', body: B },
        { name: 'c', body: C },
      ],
    ],
  ]);
  return { x, p1: p1!, p2s, none, expected };
}

async function controlledAndDeleted(store: ObjectStore, root: string, k: Keys) {
  const c = await controlledChain(store, k);
  for (const r of ['run-0001', 'run-0002', 'run-0003']) deleteRun(root, r);
  return c;
}

t.test('repack threshold: a pack with little live data is repacked, a fuller one is kept', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const c = await controlledAndDeleted(store, root, k);
  t.equal(c.p2s.length, 1, 'run-0003 stored one pack');
  t.equal(c.none.length, 0, 'run-0004 stored nothing');
  const p2 = c.p2s[0]!;
  const low = await planChunkedPrune(store, pruneOptions(k, { repackThreshold: 0.05 }));
  t.same(low.keys[0]!.repackPacks, [], 'at a 5 % threshold the 11 %-live pack is kept');
  const plan = await planChunkedPrune(store, pruneOptions(k));
  const key = plan.keys[0]!;
  t.same(key.repackPacks, [c.p1], 'at 50 % the 11 %-live pack is repacked');
  t.same([...key.deletePacks].sort(), [...c.x].sort(), "x's packs are dead");
  t.equal(key.packs.live, 1, 'the 89 %-live pack is kept');
  t.ok(key.bytes.repack > 0 && key.bytes.repack < key.bytes.packs);
  const result = await pruneChunked(store, pruneOptions(k));
  const left = packIds(root);
  t.notOk(left.has(c.p1), 'the repacked pack is gone');
  t.ok(left.has(p2), 'the fuller pack is still there');
  t.equal(left.size, 2, 'it and one new pack holding b');
  t.equal(result.newPacks, 1);
  await checkRuns(t, store, k, c.expected, 'after repack');
});

t.test('grace period: nothing younger is touched', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await controlledAndDeleted(store, root, k);
  const before = packObjects(root);
  const now = { now: () => new Date() };
  const plan = await planChunkedPrune(store, pruneOptions(k, now));
  const key = plan.keys[0]!;
  t.equal(key.packs.young, key.packs.total, 'every pack was just written: all young');
  t.equal(plan.totals.deadPacks + plan.totals.repackPacks + plan.totals.orphanPacks, 0);
  const result = await pruneChunked(store, pruneOptions(k, now));
  t.equal(result.deletedPacks + result.deletedIndexes + result.newPacks, 0);
  t.same(packObjects(root), before, 'the store is unchanged');
  const zero = await planChunkedPrune(store, pruneOptions(k, { ...now, graceMs: 0 }));
  t.ok(zero.totals.deadPacks > 0 && zero.totals.repackPacks === 1, 'with no grace the same packs qualify');
});

/** A store that fails its Nth delete (or put) matching a pattern: a crash at that point. */
function crashingStore(inner: ObjectStore, op: 'put' | 'delete', pattern: RegExp, nth: number): ObjectStore {
  let seen = 0;
  const check = (o: string, key: string) => {
    if (o === op && pattern.test(key) && ++seen === nth) throw new Error('simulated crash');
  };
  return {
    description: inner.description,
    put: async (key, body, options) => {
      check('put', key);
      return inner.put(key, body, options);
    },
    get: (key, range, options) => inner.get(key, range, options),
    getStream: (key, range) => inner.getStream(key, range),
    head: (key) => inner.head(key),
    list: (prefix, options) => inner.list(prefix, options),
    listAll: (prefix) => inner.listAll(prefix),
    delete: async (key) => {
      check('delete', key);
      return inner.delete(key);
    },
  };
}

/** Each pack described by exactly one pack index (no duplicate left behind). */
async function describedOnce(t: Test, store: ObjectStore, root: string, k: Keys, runId: string) {
  const base = (await loadChunkedBase(store, { job: JOB, runId, secretKey: k.operational.secretKey }))!;
  let lines = 0;
  for (const key of base.map.indexes) {
    const id = /([0-9a-f]{32})\.bin$/.exec(key)![1]!;
    lines += openPackIndex(readFileSync(join(root, key)), JOB, base.keys, id)!.length;
  }
  t.equal(base.map.unreadable.length, 0);
  t.equal(lines, base.map.packs.size, 'each pack is described once');
  t.same(new Set(base.map.packs.keys()), packIds(root), 'every pack present is described, and no other');
}

async function finishesAfterCrash(
  t: Test,
  crash: (store: ObjectStore) => { store: ObjectStore; options: Partial<ChunkedPruneRunOptions> },
  chain: 'controlled' | 'churn',
) {
  const { store, root } = fsStore(t);
  const k = keys();
  let expected: Map<string, RecordInput[]>;
  let last: string;
  if (chain === 'controlled') {
    expected = (await controlledAndDeleted(store, root, k)).expected;
    last = 'run-0004';
  } else {
    expected = await churnChain(store, k);
    deleteRun(root, 'run-0001');
    last = 'run-0003';
  }
  const clean = await planChunkedPrune(store, pruneOptions(k));
  if (chain === 'churn') t.ok(clean.keys[0]!.indexes.rewrite >= 1, 'a pack index is written again');
  const indexCount = () => [...packObjects(root).keys()].filter((p) => p.includes('/index/')).length;
  const indexesBefore = indexCount();
  const c = crash(store);
  await t.rejects(pruneChunked(c.store, pruneOptions(k, c.options)), 'the prune stops at the crash');
  if (chain === 'churn') {
    const repackIndex = clean.totals.repackPacks > 0 ? 1 : 0;
    t.equal(indexCount(), indexesBefore + repackIndex + 1, 'the old pack index and its rewrite both exist');
  }
  await checkRuns(t, store, k, expected, 'after the crash');
  const second = await pruneChunked(store, pruneOptions(k));
  t.ok(second.complete, 'a second prune runs');
  await checkRuns(t, store, k, expected, 'after the second prune');
  const done = await planChunkedPrune(store, pruneOptions(k));
  t.equal(
    done.totals.deadPacks + done.totals.repackPacks + done.totals.orphanPacks,
    0,
    'and finishes the job',
  );
  t.equal(done.keys[0]!.indexes.rewrite + done.keys[0]!.indexes.empty, 0, 'no pack index left to rewrite');
  t.ok(
    clean.keys[0]!.deletePacks.every((p) => !packIds(root).has(p)),
    'every pack the first plan found dead is gone',
  );
  await describedOnce(t, store, root, k, last);
}

t.test('crash safety: a crash after step 1 (repacked, nothing rewritten)', async (t) => {
  await finishesAfterCrash(
    t,
    (store) => ({
      store,
      options: {
        onProgress: (p) => {
          if (p.step === 'rewrite') throw new Error('crash after repack');
        },
      },
    }),
    'controlled',
  );
});

t.test('crash safety: a crash after step 2 (indexes rewritten, nothing deleted)', async (t) => {
  await finishesAfterCrash(
    t,
    (store) => ({
      store,
      options: {
        onProgress: (p) => {
          if (p.step === 'delete') throw new Error('crash after rewrite');
        },
      },
    }),
    'controlled',
  );
});

t.test('crash safety: between writing a pack index again and deleting the old one', async (t) => {
  // run-0001's index describes dead packs (gone.bin) and live ones: it is written again, then the
  // crash comes at its deletion, so both describe the live packs until the second prune.
  await finishesAfterCrash(
    t,
    (store) => ({ store: crashingStore(store, 'delete', /\/index\//, 1), options: {} }),
    'churn',
  );
});

t.test('crash safety: in the middle of deleting packs', async (t) => {
  await finishesAfterCrash(
    t,
    (store) => ({ store: crashingStore(store, 'delete', /\/data\//, 2), options: {} }),
    'controlled',
  );
});

t.test('crash safety: while storing a repacked pack', async (t) => {
  await finishesAfterCrash(
    t,
    (store) => ({ store: crashingStore(store, 'put', /\/data\//, 1), options: {} }),
    'controlled',
  );
});

t.test('a run that does not open makes the plan refuse', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const c = await controlledAndDeleted(store, root, k);
  const before = packObjects(root);
  const indexFile = join(root, 'jobs', JOB, 'runs', 'run-0004', 'index.bin');
  const saved = readFileSync(indexFile);
  const flipped = Buffer.from(saved);
  flipped[40] = flipped[40]! ^ 1;
  writeFileSync(indexFile, flipped);
  const refusal = {
    code: 'ERR_ARCHIVE_INDEX_TAMPERED',
    object: `jobs/${JOB}/runs/run-0004/index.bin`,
    message: /pruning refused: run job-a\/run-0004/,
  };
  await t.rejects(planChunkedPrune(store, pruneOptions(k)), refusal);
  await t.rejects(pruneChunked(store, pruneOptions(k)), refusal);
  t.same(packObjects(root), before, 'nothing was deleted');
  writeFileSync(indexFile, saved);
  const sigFile = join(root, 'jobs', JOB, 'runs', 'run-0004', 'manifest.sig');
  const sig = readFileSync(sigFile);
  rmSync(sigFile);
  await t.rejects(planChunkedPrune(store, pruneOptions(k)), { code: 'ERR_ARCHIVE_SIGNATURE_MISSING' });
  t.same(packObjects(root), before);
  writeFileSync(sigFile, sig);
  // A referenced pack already gone: the job is damaged, so nothing is pruned on this view either.
  const keyId = [...before.keys()][0]!.split('/')[0]!;
  const p2 = c.p2s[0]!;
  rmSync(join(root, 'jobs', JOB, 'packs', keyId, 'data', p2.slice(0, 2), `${p2}.bin`));
  await t.rejects(planChunkedPrune(store, pruneOptions(k)), {
    code: 'ERR_ARCHIVE_PACK_MISSING',
    message: /pruning refused: chunk [0-9a-f]{64} of run job-a\/run-0004 has no usable copy/,
  });
});

t.test('a run committed while the prune repacks stops it before anything is deleted', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const c = await controlledAndDeleted(store, root, k);
  const before = packIds(root);
  let wrote = false;
  const e = pseudoRandom(20 * 1024, 31);
  const result = await pruneChunked(
    store,
    pruneOptions(k, {
      onProgress: async (p) => {
        if (p.step !== 'repack' || wrote) return;
        wrote = true;
        // It deduplicates against packs the plan found dead or about to be repacked.
        await writeRun(store, k, 'run-0005', 'run-0004', [
          { name: 'b', body: B, change: 'b' },
          { name: 'c', body: C, change: 'c' },
          { name: 'x', body: pseudoRandom(150 * 1024, 9) },
          { name: 'e', body: e },
        ]);
      },
    }),
  );
  t.equal(result.complete, false);
  t.match(result.stopped ?? '', /run job-a\/run-0005 was committed/);
  t.equal(result.deletedPacks + result.deletedIndexes, 0, 'nothing was deleted or rewritten');
  t.ok([...before].every((p) => packIds(root).has(p)));
  const expected = new Map(c.expected);
  expected.set('run-0005', [
    { name: 'b', body: B },
    { name: 'c', body: C },
    { name: 'x', body: pseudoRandom(150 * 1024, 9) },
    { name: 'e', body: e },
  ]);
  await checkRuns(t, store, k, expected, 'after the stopped prune');
  const again = await pruneChunked(store, pruneOptions(k));
  t.ok(again.complete);
  t.ok(
    c.x.every((p) => packIds(root).has(p)),
    "x's packs are live again and kept",
  );
  await checkRuns(t, store, k, expected, 'after the next prune');
});

t.test('orphan packs of an aborted writer are removed once old', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const [p1] = await writeRun(store, k, 'run-0001', null, [{ name: 'a', body: A, change: 'a' }]);
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  const w = await createChunkedWriter(
    chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base, writeRecovery: false }),
  );
  await w.addRecord({ name: 'big', body: pseudoRandom(200 * 1024, 21) });
  await w.abort();
  const orphans = [...packIds(root)].filter((p) => p !== p1).sort();
  t.ok(orphans.length >= 2, `the aborted writer left packs (${orphans.length})`);

  const young = await planChunkedPrune(store, pruneOptions(k, { now: () => new Date() }));
  t.equal(young.totals.orphanPacks, 0, 'young orphans are left alone (a run may be writing)');
  const plan = await planChunkedPrune(store, pruneOptions(k));
  t.same([...plan.keys[0]!.orphanPacks].sort(), orphans, 'old undescribed packs are orphans');
  t.equal(plan.keys[0]!.packs.live, 1);

  // A pack index that does not open might describe them: they are kept, and it is never touched.
  const junk = `jobs/${JOB}/packs/${plan.keys[0]!.keyId}/index/${'ab'.repeat(16)}.bin`;
  writeFileSync(join(root, junk), pseudoRandom(300, 5));
  const held = await planChunkedPrune(store, pruneOptions(k));
  t.same(held.keys[0]!.indexes.unreadable, [junk]);
  t.equal(held.keys[0]!.packs.unknown, orphans.length, 'orphans are kept while an index is unreadable');
  t.equal(held.totals.orphanPacks, 0);
  const kept = await pruneChunked(store, pruneOptions(k));
  t.equal(kept.deletedPacks + kept.deletedIndexes, 0);
  t.ok(packObjects(root).has(junk.slice(`jobs/${JOB}/packs/`.length)), 'the unreadable index is left');
  rmSync(join(root, junk));

  const result = await pruneChunked(store, pruneOptions(k));
  t.equal(result.deletedPacks, orphans.length);
  t.same([...packIds(root)], [p1], 'only the described pack remains');
  await checkRuns(t, store, k, new Map([['run-0001', [{ name: 'a', body: A }]]]), 'after orphan removal');
});

t.test('a chunk key no remaining run names is removed whole; 0.1 runs are read and kept', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, [{ name: 'a', body: A }]);
  // run-0002 starts a fresh key (no base), as a run that cannot open its predecessor does.
  await writeRun(store, k, 'run-0002', null, [{ name: 'c', body: C }]);
  await sealRun(store, k, [{ name: 'old', body: text(1000, 3) }], { runId: 'run-0000' });
  const keyOf = async (runId: string) => {
    const run = await openRun(store, { job: JOB, runId, secretKey: k.operational.secretKey });
    return (run.manifest.document as { chunkKey: string }).chunkKey;
  };
  const key1 = await keyOf('run-0001');
  const key2 = await keyOf('run-0002');
  t.not(key1, key2);
  deleteRun(root, 'run-0001');
  const plan = await planChunkedPrune(store, pruneOptions(k));
  t.same(
    plan.runs.map((r) => [r.runId, r.keyId]),
    [
      ['run-0000', null],
      ['run-0002', key2],
    ],
  );
  const gone = plan.keys.find((x) => x.keyId === key1)!;
  t.equal(gone.referenced, false);
  t.equal(gone.packs.dead, gone.packs.total);
  t.equal(gone.indexes.empty, gone.indexes.total);
  t.equal(plan.keys.find((x) => x.keyId === key2)!.packs.live, 1);
  await pruneChunked(store, pruneOptions(k));
  t.notOk(
    [...packObjects(root).keys()].some((p) => p.startsWith(key1)),
    "nothing is left under the unreferenced key's prefix",
  );
  await checkRuns(
    t,
    store,
    k,
    new Map([
      ['run-0002', [{ name: 'c', body: C }]],
      ['run-0000', [{ name: 'old', body: text(1000, 3) }]],
    ]),
    'after removing a key',
  );
});

t.test('bad options are refused', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  for (const over of [{ graceMs: -1 }, { repackThreshold: 2 }, { packSize: 0 }, { job: '../x' }]) {
    await t.rejects(planChunkedPrune(store, pruneOptions(k, over)), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' });
  }
});

t.test('lost pack indexes: packs that hold referenced chunks are never taken for orphans', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const expected = await churnChain(store, k);
  deleteRun(root, 'run-0001');
  // Every pack index of the job is lost (a bucket writer, an operator's mistake).
  const packs = join(root, 'jobs', JOB, 'packs');
  for (const keyDir of readdirSync(packs)) rmSync(join(packs, keyDir, 'index'), { recursive: true });
  const before = packIds(root);
  const plan = await planChunkedPrune(store, pruneOptions(k, { graceMs: 0 }));
  t.ok(plan.totals.orphanPacks < before.size, 'not every undescribed pack is an orphan');
  await pruneChunked(store, pruneOptions(k, { graceMs: 0 }));
  const after = packIds(root);
  t.ok(
    after.size > 0 && after.size <= before.size,
    `${before.size - after.size} truly unused pack(s) removed`,
  );
  // The remaining runs still read back whole: their packs describe themselves (§12.4).
  await checkRuns(t, store, k, expected, 'after a prune without pack indexes');
});
