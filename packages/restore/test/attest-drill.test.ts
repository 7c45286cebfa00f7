import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layout } from '@coffer/archive';
import { createFilesSource, createSqliteSource } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import Database from 'better-sqlite3';
import t from 'tap';
import { attestRun, type DrillEvidence, estimateRto, runDrill } from '../src/index.ts';
import { backup, fsStore, keys } from './helpers.ts';

const base = tempDir(t, 'restore-attest-');
const src = join(base, 'src');
mkdirSync(src);
for (let i = 0; i < 5; i++) writeFileSync(join(src, `f${i}.txt`), `file ${i}\n`.repeat(2000));
const destRoot = join(base, 'dest');
const store = fsStore(destRoot);
const times = ['2031-01-01T00:00:00.000Z', '2031-01-02T00:00:00.000Z', '2031-01-03T00:00:00.000Z'];
let prev: string | null = null;
for (const [i, at] of times.entries()) {
  const runId = `run-${i + 1}`;
  await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-at' }), {
    job: 'job-at',
    runId,
    prevRunId: prev,
    shardSize: 64 * 1024,
    now: () => new Date(at),
  });
  prev = runId;
}

t.test('attestation: signature, completeness, chain, head; no key', async (t) => {
  const a = await attestRun(store, { runId: 'run-3', signerPublicKey: keys().signer.publicKey });
  t.equal(a.ok, true, JSON.stringify(a.failures));
  t.equal(a.signature.pinned, true);
  t.equal(a.completeness.shards > 1, true);
  t.same(a.chain, { ok: true, length: 2, end: 'complete' });
  t.equal(a.rollback.isHead, true);
  t.equal(a.rollback.newestRunId, 'run-3');
  const older = await attestRun(store, { runId: 'run-2' });
  t.equal(older.ok, true);
  t.equal(older.rollback.isHead, false);
});

t.test('attestation: rollback against the engine record, pruned predecessor, missing shard', async (t) => {
  const rolled = await attestRun(store, { runId: 'run-2', expectedLatest: { runId: 'run-4' } });
  t.equal(rolled.ok, false);
  t.match(rolled.rollback.reason, /missing from the destination/);
  await store.delete(layout.manifest('job-at', 'run-1'));
  const pruned = await attestRun(store, { runId: 'run-3' });
  t.equal(pruned.chain.end, 'pruned');
  t.equal(pruned.ok, true, 'a pruned predecessor is not a failure');
  await store.delete(layout.shard('job-at', 'run-3', 1));
  await store.put(layout.shard('job-at', 'run-3', 99), new Uint8Array(3));
  const broken = await attestRun(store, { runId: 'run-3' });
  t.equal(broken.ok, false);
  t.same(broken.completeness.missing, [1]);
  t.equal(broken.completeness.unexpected, 1);
  const forged = await attestRun(store, {
    runId: 'run-2',
    signerPublicKey: (await import('@coffer/crypto')).generateSigner().publicKey,
  });
  t.equal(forged.ok, false);
  t.equal(forged.signature.code, 'ERR_ARCHIVE_SIGNER_NOT_PINNED');
  const none = await attestRun(store, { runId: 'run-9', job: 'job-at' });
  t.equal(none.ok, false);
  t.equal(none.signature.code, 'ERR_ARCHIVE_NOT_FOUND');
});

t.test('drills: files and sqlite into scratch targets; RTO from history', async (t) => {
  const scratch = tempDir(t, 'restore-scratch-');
  const ev1 = await runDrill({
    store,
    runId: 'run-2',
    job: 'job-at',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: scratch },
    trigger: 'schedule',
  });
  t.equal(ev1.verdict, 'pass', JSON.stringify(ev1));
  t.equal(ev1.records, 5);
  t.equal(ev1.matched, 5);
  t.equal(ev1.trigger, 'schedule');
  t.ok(ev1.bytes > 0);

  const dbPath = join(base, 'db.sqlite');
  const db = new Database(dbPath);
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE TABLE u (x BLOB);');
  for (let i = 0; i < 100; i++) db.prepare('INSERT INTO t (v) VALUES (?)').run(`v${i}`);
  db.prepare('INSERT INTO u VALUES (?)').run(Buffer.from([1, 2, 3]));
  db.close();
  const sstore = fsStore(join(base, 'sdest'));
  await backup(
    sstore,
    createSqliteSource({ type: 'sqlite', path: dbPath, binding: 'job-sq', workDir: base }),
    { job: 'job-sq', runId: 'run-1' },
  );
  const ev2 = await runDrill({
    store: sstore,
    runId: 'run-1',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: scratch },
  });
  t.equal(ev2.verdict, 'pass', JSON.stringify(ev2));
  t.equal(ev2.matched, 3);

  const tampered = fsStore(join(base, 'sdest'));
  await tampered.put(layout.index('job-sq', 'run-1'), new Uint8Array(10));
  const ev3 = await runDrill({
    store: sstore,
    runId: 'run-1',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: scratch },
  });
  t.equal(ev3.verdict, 'error');
  t.match(ev3.reason, /record index tampered/);
  const noRedis = await runDrill({
    store: fsStore(join(base, 'nothing')),
    runId: 'run-1',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: scratch },
  });
  t.equal(noRedis.verdict, 'error');

  const fake = (
    job: string,
    bytes: number,
    durationMs: number,
    startedAt: string,
    verdict: DrillEvidence['verdict'] = 'pass',
  ) => ({ ...ev1, job, bytes, durationMs, startedAt, verdict }) as DrillEvidence;
  t.same(estimateRto([], { jobs: ['a'] }), {
    status: 'unknown',
    jobs: [{ job: 'a', status: 'unknown' }],
    jobsUnknown: ['a'],
  });
  const est = estimateRto(
    [
      fake('a', 10_000_000, 1000, '2031-01-01'),
      fake('a', 10_000_000, 2000, '2031-01-02'),
      fake('a', 10_000_000, 3000, '2031-01-03'),
      fake('b', 1, 1, '2031-01-01', 'fail'),
    ],
    { jobs: ['a', 'b'], sizes: { a: 50_000_000 } },
  );
  t.equal(est.status, 'partial');
  t.same(est.jobsUnknown, ['b']);
  const a = est.jobs.find((j) => j.job === 'a');
  t.equal(a?.basis?.medianBytesPerSecond, 5_000_000);
  t.equal(a?.seconds, 10);
  t.equal(est.seconds, 10);
});
