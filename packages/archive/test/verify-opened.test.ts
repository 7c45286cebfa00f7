/**
 * `verifyRun` with `opened` (a run already opened, verified instead of opened again) and
 * `isOpenedRunCurrent`: what a restore uses to hold a run's index once across its plan, phase one
 * and phase two. The index is not read again, every pack is, and a reader whose pack indexes
 * changed is reported stale.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateSigner } from '@coffer/crypto';
import { countReads } from '@coffer/testkit';
import t from 'tap';
import { isOpenedRunCurrent, layout, openRun, type RecordInput, verifyRun } from '../src/index.ts';
import { JOB, writeRun } from './chain-helpers.ts';
import { fsStore, keys, pseudoRandom, readAll, sealRun, text } from './helpers.ts';

const records = (seed: number): RecordInput[] => [
  ...Array.from({ length: 20 }, (_, i) => ({ name: `small/${i}`, body: text(1500 + i, i + seed) })),
  { name: 'big', body: pseudoRandom(300 * 1024, seed) },
];

/** Every pack data file under `root` (largest first). */
function packFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\/packs\/[^/]+\/data\/.+\.bin$/.test(p)) out.push(p);
    }
  };
  walk(join(root, 'jobs'));
  return out.sort((a, b) => statSync(b).size - statSync(a).size);
}

t.test('verifying an opened run reads every pack again but not the index', async (t) => {
  const { store: raw, root } = fsStore(t);
  const k = keys();
  await writeRun(raw, k, 'run-0001', null, records(1));
  const { store, reads } = countReads(raw);
  const opts = {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  };
  const fresh = await verifyRun(store, opts);
  t.ok(fresh.ok, 'a fresh verify passes');
  const index = layout.index(JOB, 'run-0001');
  t.equal(reads(index), 1, 'a fresh verify reads the index');

  // As a restore's plan does: open the run and list its records.
  const run = await openRun(store, opts);
  let listed = 0;
  for await (const _ of run.records()) listed++;
  t.equal(listed, records(1).length);
  t.equal(await isOpenedRunCurrent(run), false, 'not current before its chunk map is loaded');
  t.equal(reads(index), 2, 'the opened run read the index once');
  const packs = packFiles(root);
  t.ok(packs.length > 1, `several packs (${packs.length})`);
  const packReads = () => packs.reduce((s, p) => s + reads(p.slice(root.length + 1)), 0);
  const before = packReads();
  const first = await verifyRun(store, { ...opts, opened: run });
  t.ok(first.ok, 'verifying the opened run passes');
  t.same(first.checks, fresh.checks, 'with the same checks as a fresh verify');
  t.equal(reads(index), 2, 'and without reading the index again');
  t.equal(packReads() - before, packs.length, 'every pack was read from the store');
  const second = await verifyRun(store, { ...opts, opened: run });
  t.same(second.checks, fresh.checks, 'a second verify counts its own packs only');
  t.equal(await isOpenedRunCurrent(run), true, 'current once verified');

  // The reader stays usable: its records read back (from the store again) and match.
  const got = await readAll(run);
  t.same(
    got.map((g) => Buffer.from(g.body).toString('base64')),
    records(1).map((r) => Buffer.from(r.body as Uint8Array).toString('base64')),
  );
  t.same(second.checks, fresh.checks, 'reading the run afterwards leaves the verdict as it was');

  // A pack changed after the run opened is caught: the reader holds the index, not the bytes.
  const victim = packs[0]!;
  const bytes = readFileSync(victim);
  bytes[bytes.length >> 1]! ^= 0x01;
  writeFileSync(victim, bytes);
  const tampered = await verifyRun(store, { ...opts, opened: run });
  t.equal(tampered.ok, false, 'a pack tampered after opening fails the verify');
  t.equal(tampered.failure?.code, 'ERR_ARCHIVE_SHARD_TAMPERED');
});

t.test('isOpenedRunCurrent turns false when another run adds pack indexes', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  const opts = { job: JOB, runId: 'run-0001', secretKey: k.operational.secretKey };
  const run = await openRun(store, opts);
  t.ok((await verifyRun(store, { ...opts, opened: run })).ok);
  t.equal(await isOpenedRunCurrent(run), true);
  await writeRun(store, k, 'run-0002', 'run-0001', records(2));
  t.equal(await isOpenedRunCurrent(run), false, 'stale: the job has a pack index it did not load');
  // Verifying it again loads nothing new, so it stays stale; a fresh open is current once verified.
  const again = await openRun(store, opts);
  t.ok((await verifyRun(store, { ...opts, opened: again })).ok);
  t.equal(await isOpenedRunCurrent(again), true);
});

t.test('`opened` must be the run named; a 0.1 run is opened again', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  const run = await openRun(store, { job: JOB, runId: 'run-0001', secretKey: k.operational.secretKey });
  const missing = await verifyRun(store, {
    job: JOB,
    runId: 'run-0002',
    secretKey: k.operational.secretKey,
    opened: run,
  });
  t.equal(missing.failure?.code, 'ERR_ARCHIVE_NOT_FOUND', 'the run named is looked up, not assumed');
  await writeRun(store, k, 'run-0002', 'run-0001', records(2));
  await t.rejects(
    verifyRun(store, { job: JOB, runId: 'run-0002', secretKey: k.operational.secretKey, opened: run }),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
    'another run of the job',
  );
  // The reader was opened without a trusted signer: a verify that names one still checks it.
  const other = generateSigner();
  const pinned = await verifyRun(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: other.publicKey,
    opened: run,
  });
  t.equal(pinned.ok, false, 'a manifest signed by another key than the one named fails');
  t.equal(pinned.failure?.code, 'ERR_ARCHIVE_SIGNER_NOT_PINNED');
  const trusted = await verifyRun(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
    opened: run,
  });
  t.ok(trusted.ok);
  t.equal(trusted.checks.signerPinned, true, 'pinned by this call, though the reader was not');

  const { store: s01 } = fsStore(t);
  await sealRun(s01, k, [{ name: 'a', body: text(4000, 3) }]);
  const old = await openRun(s01, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
  const v = await verifyRun(s01, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    opened: old,
  });
  t.ok(v.ok, 'a 0.1 run verifies (opened again)');
  t.equal(v.checks.records, 1);
  t.equal(await isOpenedRunCurrent(old), false, 'a 0.1 reader is never reused');
});

t.test('a run opened without its lines yields no base; verifying it afresh does', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  const opts = {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  };
  // A reader keeps only the records parsed from its index, not the signed lines a base compares.
  const run = await openRun(store, opts);
  let listed = 0;
  for await (const _ of run.records()) listed++;
  t.equal(listed, records(1).length);
  const reused = await verifyRun(store, { ...opts, opened: run, keepBase: true });
  t.ok(reused.ok, 'the opened run verifies');
  t.equal(reused.base, undefined, 'but is no base: its lines were not kept');
  const fresh = await verifyRun(store, { ...opts, keepBase: true });
  t.ok(fresh.ok);
  t.equal(fresh.base?.records.size, records(1).length, 'a verify that opens the index itself keeps a base');
  t.equal(fresh.base?.lines.size, records(1).length, 'with every line');
});
