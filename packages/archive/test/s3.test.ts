/** One smoke round trip against the S3-compatible server on loopback (radosgw, or s3rver locally). */
import { createS3Store } from '@coffer/objectstore';
import { createTestBucket, type TestBucket } from '@coffer/testkit';
import t from 'tap';
import {
  createArchiveWriter,
  createChunkedWriter,
  listRuns,
  openRun,
  resumeArchiveWriter,
  resumeChunkedWriter,
  verifyRun,
} from '../src/index.ts';
import { chunkedOptions, keys, pseudoRandom, readAll, sealRun, text, writerOptions } from './helpers.ts';

/** The archive's destination in a test bucket. */
const storeIn = (b: TestBucket) =>
  createS3Store({
    bucket: b.bucket,
    prefix: 'dest/coffer',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });

t.test('seal, list, verify and read a run on S3', async (t) => {
  const b = await createTestBucket('archive');
  t.comment(`S3 server: ${b.kind}`);
  const store = storeIn(b);
  const k = keys();
  const records = [
    { name: 'a.txt', body: text(200_000, 1) },
    { name: 'empty', body: new Uint8Array(0) },
    { name: 'b.bin', body: pseudoRandom(300_000, 2) },
    { name: 'ü/日本.txt', body: text(1000, 3) },
  ];
  const s = await sealRun(store, k, records, { shardSize: 64 * 1024 });
  t.ok(s.shards > 3);
  t.same(
    (await listRuns(store)).map((r) => r.runId),
    ['run-0001'],
  );
  const v = await verifyRun(store, {
    runId: 'run-0001',
    secretKey: k.breakGlass.secretKey,
    pinSigner: s.signer,
  });
  t.equal(v.ok, true, JSON.stringify(v.failure));
  const all = await readAll(
    await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey }),
  );
  t.same(
    all.map((r) => Buffer.from(r.body).toString('base64')),
    records.map((r) => Buffer.from(r.body).toString('base64')),
  );
});

t.test(
  "on S3: a holder paused past its lease replaces none of its successor's committed objects",
  async (t) => {
    const b = await createTestBucket('archive-stalled');
    if (b.kind !== 'radosgw') {
      t.plan(0, `${b.kind} ignores If-None-Match: nothing to prove against it`);
      return;
    }
    const store = storeIn(b);
    const k = keys();
    const records = [0, 1, 2, 3, 4].map((i) => ({ name: `r/${i}`, body: pseudoRandom(90_000, 60 + i) }));
    const objects = async (prefix: string) =>
      (await store.list(prefix)).objects.map((o) => `${o.key} ${o.size} ${o.etag ?? ''}`);

    // Format 0.2: the paused holder passed its fence once; its index put meets the committed one.
    let checks = 0;
    const a = await createChunkedWriter(
      chunkedOptions(store, k, {
        job: 'job-b',
        beforeCommit: () => {
          if (++checks > 1) throw Object.assign(new Error('lease lost'), { code: 'ERR_STATE_LEASE_LOST' });
        },
      }),
    );
    for (const r of records.slice(0, 2)) await a.addRecord(r);
    const cp = await a.exportCheckpoint();
    for (const r of records.slice(2)) await a.addRecord(r);
    const resumed = await resumeChunkedWriter(cp, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    });
    for (const r of records) await resumed.writer.addRecord(r);
    await resumed.writer.finish();
    const before = await objects('jobs/job-b/runs/');
    await t.rejects(a.finish(), {
      code: 'ERR_ARCHIVE_DESTINATION',
      storeErrorCode: 'ERR_OBJECTSTORE_PRECONDITION_FAILED',
    });
    t.same(
      await objects('jobs/job-b/runs/'),
      before,
      '0.2: index, signature and manifest are the successor’s',
    );
    const v2 = await verifyRun(store, { job: 'job-b', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    t.equal(v2.ok, true, `0.2: the committed run verifies: ${JSON.stringify(v2.failure)}`);

    // Format 0.1: the paused holder's final shard meets the successor's.
    let checkpoint: Uint8Array | null = null;
    const paused = await createArchiveWriter(
      writerOptions(store, k, {
        job: 'job-c',
        shardSize: 64 * 1024,
        onShard: async () => {
          checkpoint ??= await paused.exportCheckpoint();
        },
      }),
    );
    for (const r of records) await paused.addRecord(r);
    for (let i = 0; i < 500 && checkpoint === null; i++) await new Promise((r) => setTimeout(r, 10));
    const r1 = await resumeArchiveWriter(checkpoint!, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.operational.secretKey,
    });
    for (const r of records.slice(r1.resume.recordsDone)) await r1.writer.addRecord(r);
    await r1.writer.finish();
    const before1 = await objects('jobs/job-c/runs/');
    await t.rejects(paused.finish(), { code: 'ERR_ARCHIVE_DESTINATION' }, '0.1: the paused holder stops');
    t.same(await objects('jobs/job-c/runs/'), before1, '0.1: no object of the committed run was replaced');
    const v1 = await verifyRun(store, { job: 'job-c', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    t.equal(v1.ok, true, `0.1: the committed run verifies: ${JSON.stringify(v1.failure)}`);
  },
);
