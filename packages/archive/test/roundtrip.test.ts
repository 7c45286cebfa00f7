import type { ObjectStore } from '@coffer/objectstore';
import t from 'tap';
import {
  createArchiveWriter,
  FORMAT_VERSION,
  listJobs,
  listRuns,
  openRun,
  type RecordInput,
  readRecoveryPointer,
  readRecoverySigner,
  verifyRun,
} from '../src/index.ts';
import { fsStore, keys, pseudoRandom, readAll, sealRun, text, writerOptions } from './helpers.ts';

t.test('many small records, empty records and unicode names round-trip', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const records: RecordInput[] = [];
  for (let i = 0; i < 500; i++) {
    const body = i % 2 === 0 ? text(1 + ((i * 37) % 3000), i) : pseudoRandom((i * 53) % 2000, i);
    records.push({ name: `dir/file-${i}.txt`, body, metadata: { contentType: 'text/plain', mode: 0o644 } });
  }
  records.splice(10, 0, { name: 'empty-1', body: new Uint8Array(0), metadata: {} });
  records.push({ name: 'empty-last', body: new Uint8Array(0), metadata: {} });
  records.push({
    name: 'ünïcødé/日本語/😀.bin',
    body: pseudoRandom(777, 9),
    metadata: { mtime: '2024-01-01T00:00:00.000Z' },
  });
  const summary = await sealRun(store, k, records, { shardSize: 64 * 1024 });
  t.equal(summary.records, records.length);
  t.ok(summary.shards > 5, 'several shards');
  t.equal(summary.formatVersion, FORMAT_VERSION);

  for (const secretKey of [k.operational.secretKey, k.breakGlass.secretKey]) {
    const run = await openRun(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey,
      pinSigner: summary.signer,
    });
    t.equal(run.manifest.signerPinned, true);
    const all = await readAll(run);
    t.equal(all.length, records.length);
    let same = true;
    for (let i = 0; i < all.length; i++) {
      if (
        all[i]!.entry.name !== records[i]!.name ||
        Buffer.compare(all[i]!.body, records[i]!.body as Uint8Array) !== 0
      )
        same = false;
    }
    t.ok(same, 'every record and name equal');
  }
  const verdict = await verifyRun(store, { runId: 'run-0001', secretKey: k.breakGlass.secretKey });
  t.equal(verdict.ok, true, JSON.stringify(verdict.failure));
  t.equal(verdict.checks.records, records.length);
  t.equal(verdict.checks.shards, summary.shards);
  t.same(await listJobs(store), ['job-a']);
  t.same(
    (await listRuns(store)).map((r) => r.runId),
    ['run-0001'],
  );
  const pointer = await readRecoveryPointer(store);
  t.equal(pointer?.supported, true);
  t.equal(pointer?.signer, summary.signer);
  t.same(await readRecoverySigner(store), k.signer.publicKey);
});

t.test('streamed body, metadata and defaults are kept in the index', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w = await createArchiveWriter(writerOptions(store, k, { shardSize: 64 * 1024 }));
  async function* gen() {
    for (let i = 0; i < 40; i++) yield pseudoRandom(10_000, i + 1);
  }
  const r = await w.addRecord({
    name: 'big',
    body: gen(),
    size: 400_000,
    namespace: 'ns1',
    metadata: { ttlSeconds: 30 },
  });
  t.equal(r.size, 400_000);
  t.equal(r.sizeChanged, false);
  const r2 = await w.addRecord({ name: 'declared-wrong', body: new Uint8Array(5), size: 6 });
  t.equal(r2.sizeChanged, true);
  await w.finish();
  const run = await openRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey });
  t.equal(run.manifest.signerPinned, false);
  const all = await readAll(run);
  t.equal(all[0]!.entry.namespace, 'ns1');
  t.equal(all[0]!.entry.binding, 'data');
  t.equal(all[0]!.entry.sourceType, 'files');
  t.same(all[0]!.entry.metadata, { ttlSeconds: 30 });
  t.equal(all[0]!.body.length, 400_000);
  t.equal(all[1]!.entry.size, 5);
});

t.test('a run with no records seals and verifies', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const s = await sealRun(store, k, []);
  t.equal(s.records, 0);
  t.equal(s.shards, 1);
  const v = await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
  t.equal(v.ok, true);
});

t.test('inline and worker codecs make the same choices and read each other', async (t) => {
  const { store: a, root: ra } = fsStore(t);
  const { store: b, root: rb } = fsStore(t);
  const k = keys();
  const records = [
    { name: 'x', body: text(300_000, 3) },
    { name: 'y', body: pseudoRandom(200_000, 4) },
  ];
  const sa = await sealRun(a, k, records, { shardSize: 64 * 1024, workers: 0 });
  const sb = await sealRun(b, k, records, { shardSize: 64 * 1024, workers: 2 });
  t.equal(sa.shards, sb.shards);
  const { readFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  // The data keys differ per run, so compare plaintext-level properties: sizes and compression choices.
  const ma = JSON.parse(readFileSync(join(ra, 'jobs/job-a/runs/run-0001/manifest.json'), 'utf8'));
  const mb = JSON.parse(readFileSync(join(rb, 'jobs/job-a/runs/run-0001/manifest.json'), 'utf8'));
  t.same(
    ma.shards.map((s: { size: number; compression: string }) => [s.size, s.compression]),
    mb.shards.map((s: { size: number; compression: string }) => [s.size, s.compression]),
  );
  t.ok(
    ma.shards.some((s: { compression: string }) => s.compression === 'zstd'),
    'text shards compressed',
  );
  t.ok(
    ma.shards.some((s: { compression: string }) => s.compression === 'none'),
    'random shards stored',
  );
  for (const [store, workers] of [
    [a, 2],
    [b, 0],
  ] as const) {
    const v = await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey, workers });
    t.equal(v.ok, true);
  }
});

t.test(
  'shards waiting on a slow store hold no frame buffer once written, and the run is intact',
  async (t) => {
    const k = keys();
    const { store: fs } = fsStore(t);
    // A store whose durability step is slow: each shard's bytes are written (onBodyWritten), then its
    // put waits until three shards are pending, so the writer must seal on with reused frame buffers
    // (a safety timer lets everything through, so a regression fails the count instead of hanging).
    let pending = 0;
    let peak = 0;
    let written = 0;
    const waiting: (() => void)[] = [];
    const go = () => {
      for (const f of waiting.splice(0)) f();
    };
    const safety = setInterval(go, 500);
    t.teardown(() => clearInterval(safety));
    const slow: ObjectStore = {
      description: fs.description,
      put: async (key, body, options) => {
        const r = await fs.put(key, body, { ...options, onBodyWritten: undefined });
        if (!key.includes('/shards/')) return r;
        written++;
        options?.onBodyWritten?.();
        pending++;
        peak = Math.max(peak, pending);
        if (pending >= 3) go();
        else await new Promise<void>((f) => waiting.push(f));
        pending--;
        return r;
      },
      get: (key, range) => fs.get(key, range),
      getStream: (key, range) => fs.getStream(key, range),
      head: (key) => fs.head(key),
      list: (prefix, options) => fs.list(prefix, options),
      listAll: (prefix) => fs.listAll(prefix),
      delete: (key) => fs.delete(key),
    };
    const shardSize = 64 * 1024;
    const w = await createArchiveWriter(writerOptions(slow, k, { shardSize, workers: 1 }));
    await w.addRecord({ name: 'big.bin', body: pseudoRandom(shardSize * 12 + 5, 7) });
    const summary = await w.finish();
    t.equal(summary.shards, 13, 'every shard stored');
    t.equal(written, 13, 'each shard written once');
    t.ok(peak >= 3, `three shards were pending in the store at once (peak ${peak})`);
    const v = await verifyRun(fs, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
    t.ok(v.ok, 'the run verifies');
  },
);
