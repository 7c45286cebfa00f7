/**
 * Applying an incremental (format 0.2) run: the plan, phase one and phase two share one opened
 * index while the job's pack indexes stay as they were, every pack is still read from the store
 * in each phase, and a pack index that appears between the phases makes phase two open the run
 * afresh. Phase two of such a run hashes no record, so the record-hash thread is handed back
 * between the phases.
 */
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layout, pruneChunked, stopIdleWorkers, verifyRun } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import { createFilesSource } from '@coffer/sources';
import { countReads, tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  type ApplyOptions,
  applyRestore,
  planFromIndex,
  planRestore,
  runDrill,
  validateRestoreRequest,
  verifyRestore,
} from '../src/index.ts';
import { backupChunked, fsStore, keys, resolverOf } from './helpers.ts';

const JOB = 'job-c';
const base = tempDir(t, 'restore-chunked-');
const src = join(base, 'src');
const roots = join(base, 'roots');
mkdirSync(roots);
mkdirSync(join(src, 'd'), { recursive: true });
const files: Record<string, Buffer> = {};
for (let i = 0; i < 6; i++) files[`f${i}.bin`] = randomBytes(50_000 + i);
files['d/small.txt'] = Buffer.from('small\n');
for (const [name, body] of Object.entries(files)) writeFileSync(join(src, name), body);

/** A job with one incremental run in its own store; the store counts reads of each key. */
async function job(name: string) {
  const root = join(base, `dest-${name}`);
  const raw = fsStore(root);
  const { packIds } = await backupChunked(
    raw,
    createFilesSource({ type: 'files', root: src, binding: JOB }),
    {
      job: JOB,
      runId: 'run-1',
    },
  );
  const { store, count } = countReads(raw);
  return {
    root,
    store,
    packIds,
    /** Reads of the run's manifest, of its index, of the job's packs, of its pack indexes. */
    manifestReads: () => count((k) => k === layout.manifest(JOB, 'run-1')),
    indexReads: () => count((k) => k === layout.index(JOB, 'run-1')),
    packReads: () => count((k) => k.includes('/packs/') && k.includes('/data/')),
    packIndexReads: () => count((k) => k.includes('/packs/') && k.includes('/index/')),
  };
}

function opts(store: ObjectStore, out: string, extra: Partial<ApplyOptions> = {}): ApplyOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    signerPublicKey: keys().signer.publicKey,
    request: validateRestoreRequest({ runId: 'run-1', target: { namespaceId: out } }),
    targetResolver: resolverOf({ [JOB]: { type: 'files', root: src } }),
    restoreRoots: [roots],
    ...extra,
  };
}

function tree(dir: string, at = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of readdirSync(join(dir, at), { withFileTypes: true })) {
    const rel = at === '' ? e.name : `${at}/${e.name}`;
    if (e.isDirectory()) Object.assign(out, tree(dir, rel));
    else out[rel] = readFileSync(join(dir, rel)).toString('base64');
  }
  return out;
}

const expected = Object.fromEntries(Object.entries(files).map(([n, b]) => [n, b.toString('base64')]));

/** Runs `act` once, when phase one reports every record verified (before phase two starts). */
function betweenPhases(act: () => void): { onProgress: ApplyOptions['onProgress']; done: () => boolean } {
  let done = false;
  return {
    onProgress: (p) => {
      if (p.phase === 'verify' && p.done === p.total && !done) {
        done = true;
        act();
      }
    },
    done: () => done,
  };
}

/** The job's pack index files under `root`. */
function packIndexes(root: string): string[] {
  const packs = join(root, 'jobs', JOB, 'packs');
  return readdirSync(packs).flatMap((key) => readdirSync(join(packs, key, 'index')));
}

/** Every pack data file of the job under `root`. */
function packFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.includes('/data/') && p.endsWith('.bin')) out.push(p);
    }
  };
  walk(join(root, 'jobs', JOB, 'packs'));
  return out;
}

t.test('one opened index serves the plan and both phases; every pack is read in each phase', async (t) => {
  const j = await job('once');
  t.ok(j.packIds.length > 2, `several packs (${j.packIds.length})`);
  const out = join(roots, 'once');
  const r = await applyRestore(opts(j.store, out));
  t.equal(r.status, 'succeeded');
  t.equal(r.written, Object.keys(files).length);
  t.same(tree(out), expected, 'the target holds exactly the source');
  t.equal(j.manifestReads(), 2, 'the manifest was read by the plan and checked again by phase one');
  t.equal(j.indexReads(), 1, 'the run index was read once, by the plan');
  t.equal(j.packIndexReads(), packIndexes(j.root).length, 'each pack index was read once');
  t.equal(j.packReads(), 2 * j.packIds.length, 'every pack was read in phase one and again in phase two');
});

t.test(
  'a pack tampered after phase one: phase two, through the same index, writes verified bytes only',
  async (t) => {
    const j = await job('tamper');
    const out = join(roots, 'tamper');
    const packs = packFiles(j.root);
    const between = betweenPhases(() => {
      for (const p of packs) {
        const b = readFileSync(p);
        b[b.length >> 1]! ^= 0x01;
        writeFileSync(p, b);
      }
    });
    const r = await applyRestore(opts(j.store, out, { onProgress: between.onProgress }));
    t.ok(between.done());
    t.equal(r.status, 'aborted');
    t.equal(r.recordsVerified, Object.keys(files).length, 'phase one passed');
    t.equal(r.failure?.phase, 'write');
    t.equal(r.failure?.code, 'ERR_ARCHIVE_SHARD_TAMPERED');
    t.equal(r.written, 0, 'nothing written: every pack failed its check');
    t.equal(j.manifestReads(), 2, 'phase two used the run as the plan opened it');
  },
);

t.test('a pack index that appears between the phases: phase two opens the run afresh', async (t) => {
  const j = await job('moved');
  const out = join(roots, 'moved');
  const indexes = join(j.root, 'jobs', JOB, 'packs');
  const between = betweenPhases(() => {
    // A new name under the job's pack indexes, as a prune's rewrite or another run leaves.
    const [key] = readdirSync(indexes);
    const dir = join(indexes, key!, 'index');
    const [one] = readdirSync(dir);
    copyFileSync(join(dir, one!), join(dir, `${'f'.repeat(32)}.bin`));
  });
  const r = await applyRestore(opts(j.store, out, { onProgress: between.onProgress }));
  t.ok(between.done());
  t.equal(r.status, 'succeeded');
  t.same(tree(out), expected);
  t.equal(j.manifestReads(), 3, 'phase two opened the run again');
  const n = packIndexes(j.root).length;
  t.equal(j.packIndexReads(), n - 1 + n, 'and loaded the pack indexes again, the new one too');
  t.equal(j.packReads(), 2 * j.packIds.length, 'every pack read in each phase');
});

t.test(
  'a record over 4 MiB goes to a files target in parts: byte-exact; a pack gone near its end aborts the apply without a trace of it',
  async (t) => {
    // Its own source: 6 MiB over ~100 packs of 64 KiB, between two small files. Phase two hands
    // the writer such a record part by part as its chunks verify; the file takes its name only
    // once every chunk of the record matched its keyed id (phase two does not compute the record's
    // SHA-384 again: phase one checked it).
    const bigSrc = join(base, 'src-big');
    mkdirSync(join(bigSrc, 'm'), { recursive: true });
    const bigFiles: Record<string, Buffer> = {
      'a.txt': Buffer.from('first\n'),
      'm/large.bin': randomBytes(6 * 1024 * 1024),
      'z.txt': Buffer.from('last\n'),
    };
    for (const [name, body] of Object.entries(bigFiles)) writeFileSync(join(bigSrc, name), body);
    const root = join(base, 'dest-big');
    const store = fsStore(root);
    const { packIds } = await backupChunked(
      store,
      createFilesSource({ type: 'files', root: bigSrc, binding: JOB }),
      {
        job: JOB,
        runId: 'run-1',
      },
    );
    t.ok(packIds.length > 64, `${packIds.length} packs`);
    const withBig = (out: string, extra: Partial<ApplyOptions> = {}) =>
      opts(store, out, { targetResolver: resolverOf({ [JOB]: { type: 'files', root: bigSrc } }), ...extra });
    const want = Object.fromEntries(Object.entries(bigFiles).map(([n, b]) => [n, b.toString('base64')]));

    // Nothing is staged, whatever memoryStageBytes says: a staging directory that cannot be
    // created would fail the apply the moment a record went there.
    const out = join(roots, 'big');
    const r = await applyRestore(
      withBig(out, { memoryStageBytes: 1024, stagingDir: join(base, 'no-such-directory') }),
    );
    t.equal(r.status, 'succeeded');
    t.equal(r.written, 3);
    t.same(tree(out), want, 'the target holds exactly the source');

    // A plan of part of the run verifies it in parts too, in phase one.
    const onlyBig = (out: string) =>
      withBig(out, {
        request: validateRestoreRequest({ runId: 'run-1', target: { namespaceId: out }, include: ['m/'] }),
      });
    const part = await applyRestore(onlyBig(join(roots, 'big-part')));
    t.equal(part.status, 'succeeded');
    t.equal(part.recordsVerified, 1, 'one record verified in phase one, counted once');
    t.same(Object.keys(tree(join(roots, 'big-part'))), ['m/large.bin']);

    // The pack sealed before the last: only the large record's chunks, near its end.
    const [keyId] = readdirSync(join(root, 'jobs', JOB, 'packs'));
    const victim = join(root, ...layout.pack(JOB, keyId!, packIds.at(-2)!).split('/'));
    const broken = join(roots, 'big-broken');
    const between = betweenPhases(() => rmSync(victim));
    const x = await applyRestore(withBig(broken, { onProgress: between.onProgress }));
    t.ok(between.done());
    t.equal(x.status, 'aborted');
    t.equal(x.recordsVerified, 3, 'phase one passed');
    t.equal(x.failure?.phase, 'write');
    t.equal(x.failure?.record, 'm/large.bin', 'the failure names the record being streamed');
    t.match(x.failure?.code, /^ERR_ARCHIVE_/);
    t.same(x.failed, [], 'not counted as a write failure: the re-verification failed');
    t.equal(x.written, 1);
    t.same(Object.keys(tree(broken)), ['a.txt'], 'only the record before it; no temporary file left');

    // The same pack gone before phase one of a partial plan: aborted there, nothing written.
    const early = await applyRestore(onlyBig(join(roots, 'big-part-broken')));
    t.equal(early.status, 'aborted');
    t.equal(early.failure?.phase, 'verify');
    t.equal(early.failure?.record, 'm/large.bin');
    t.equal(early.recordsVerified, 0);
    t.equal(early.written, 0);
  },
);

t.test(
  "a plan made before a repack of the job's packs: phase one reads through the run opened afresh",
  async (t) => {
    // The plan may be hours old when it is applied (reviewed, approved), and retention's reclaim
    // may have repacked the packs holding its chunks and deleted them meanwhile. The plan reads the
    // run's index only; phase one loads the chunk map from the store as it is then.
    const root = join(base, 'dest-repacked');
    const store = fsStore(root);
    const tree2 = join(base, 'src-repacked');
    mkdirSync(join(tree2, 'd'), { recursive: true });
    for (const [name, body] of Object.entries(files)) writeFileSync(join(tree2, name), body);
    const source = () => createFilesSource({ type: 'files', root: tree2, binding: JOB });
    await backupChunked(store, source(), { job: JOB, runId: 'run-1' });
    // Half the files rewritten: run-1's packs then hold chunks no later run uses.
    for (let i = 0; i < 3; i++) writeFileSync(join(tree2, `f${i}.bin`), randomBytes(50_000 + i));
    await backupChunked(store, source(), { job: JOB, runId: 'run-2', prevRunId: 'run-1' });
    const want = tree(tree2);

    const out = join(roots, 'repacked');
    const options = opts(store, out, {
      request: validateRestoreRequest({ runId: 'run-2', target: { namespaceId: out } }),
      targetResolver: resolverOf({ [JOB]: { type: 'files', root: tree2 } }),
    });
    const plan = await planFromIndex(options);
    t.equal(plan.ok, true);
    rmSync(join(root, 'jobs', JOB, 'runs', 'run-1'), { recursive: true });
    const pruned = await pruneChunked(store, {
      job: JOB,
      secretKey: keys().operational.secretKey,
      signerPublicKey: keys().signer.publicKey,
      graceMs: 0,
      repackThreshold: 1,
      workers: 0,
    });
    t.ok(
      pruned.complete && pruned.repackedPacks > 0,
      `packs repacked and deleted: ${JSON.stringify(pruned.plan.totals)}`,
    );

    const r = await applyRestore({ ...options, prepared: plan });
    t.equal(r.status, 'succeeded', JSON.stringify(r.failure ?? {}));
    t.equal(r.recordsVerified, Object.keys(files).length);
    t.same(tree(out), want, 'the target holds exactly the run');
  },
);

t.test('phase two of a 0.2 run goes without the record-hash thread: phase one hands it back', async (t) => {
  const j = await job('threads');
  const out = join(roots, 'threads');
  stopIdleWorkers();
  // Control: a full verify leaves its codec workers and the record-hash thread idle behind it.
  const v = await verifyRun(j.store, { job: JOB, runId: 'run-1', secretKey: keys().operational.secretKey });
  t.ok(v.ok);
  const afterVerify = stopIdleWorkers();
  t.ok(afterVerify >= 2, `a verify leaves its codec workers and the record-hash thread (${afterVerify})`);
  const receipt = await applyRestore(opts(j.store, out));
  t.equal(receipt.status, 'succeeded');
  t.same(tree(out), expected);
  t.equal(
    stopIdleWorkers(),
    afterVerify - 1,
    'after the apply only the codec workers were left: the record-hash thread was handed back after phase one, and phase two did not start it again',
  );
});

t.test('the dry run and the verify read every planned record of a 0.2 run, each pack once', async (t) => {
  const j = await job('dry');
  const out = join(roots, 'dry');
  const plan = await planRestore(opts(j.store, out));
  t.equal(plan.ok, true, plan.reason ?? '');
  t.equal(plan.recordsVerified, Object.keys(files).length, 'every record read and checked');
  t.equal(j.packReads(), j.packIds.length, 'each pack read once');
  const some = await planRestore({
    ...opts(j.store, out),
    request: validateRestoreRequest({ runId: 'run-1', target: { namespaceId: out }, include: ['d/'] }),
  });
  t.equal(some.ok, true);
  t.equal(some.recordsVerified, 1, 'a selection: its records only');
  t.notOk(readdirSync(roots).includes('dry'), 'nothing written');

  // One pack damaged: the dry run and the verify say which check failed, and count what passed.
  const packs = packFiles(j.root);
  const b = readFileSync(packs[0]!);
  b[b.length >> 1]! ^= 0x01;
  writeFileSync(packs[0]!, b);
  const bad = await planRestore(opts(j.store, out));
  t.equal(bad.ok, false);
  t.match(bad.reason, /^record failed verification: /);
  t.ok(bad.recordsVerified < Object.keys(files).length, `verified before it: ${bad.recordsVerified}`);
  const v = await verifyRestore(opts(j.store, out));
  t.equal(v.ok, false);
  t.equal(v.recordsVerified, bad.recordsVerified, 'the verify stops at the same record');
});

t.test('a drill of a 0.2 run with a record in parts restores and compares every record', async (t) => {
  const drillSrc = join(base, 'src-drill');
  mkdirSync(join(drillSrc, 'm'), { recursive: true });
  const drillFiles: Record<string, Buffer> = {
    'a.txt': Buffer.from('first\n'),
    'm/large.bin': randomBytes(9 * 1024 * 1024),
    'm/second.bin': randomBytes(5 * 1024 * 1024),
    'z.txt': Buffer.from('last\n'),
  };
  for (const [name, body] of Object.entries(drillFiles)) writeFileSync(join(drillSrc, name), body);
  const root = join(base, 'dest-drill');
  const store = fsStore(root);
  await backupChunked(store, createFilesSource({ type: 'files', root: drillSrc, binding: JOB }), {
    job: JOB,
    runId: 'run-1',
  });
  const scratch = join(base, 'scratch-drill');
  mkdirSync(scratch);
  const drill = () =>
    runDrill({
      store,
      runId: 'run-1',
      job: JOB,
      operationalSecretKey: keys().operational.secretKey,
      scratch: { dir: scratch },
    });
  const ev = await drill();
  t.equal(ev.verdict, 'pass', JSON.stringify(ev));
  t.equal(ev.records, 4);
  t.equal(ev.matched, 4, 'every record read back equal, the two over 4 MiB written from their parts');
  t.equal(
    ev.bytes,
    Object.values(drillFiles).reduce((a, b) => a + b.length, 0),
  );
  t.same(readdirSync(scratch), [], 'the scratch copy is removed');

  // A damaged pack (the largest): the drill errors, naming the check, and
  // leaves nothing.
  const packs = packFiles(root).sort((a, b) => statSync(b).size - statSync(a).size);
  const b = readFileSync(packs[0]!);
  b[b.length >> 1]! ^= 0x01;
  writeFileSync(packs[0]!, b);
  const bad = await drill();
  t.equal(bad.verdict, 'error', JSON.stringify(bad));
  t.match(bad.reason, /^run cannot be read back: /);
  t.same(readdirSync(scratch), [], 'the scratch copy is removed after the failure too');
});
