/** One smoke round trip against the S3-compatible server on loopback (radosgw, or s3rver locally). */
import { createS3Store } from '@coffer/objectstore';
import { createTestBucket } from '@coffer/testkit';
import t from 'tap';
import { listRuns, openRun, verifyRun } from '../src/index.ts';
import { keys, pseudoRandom, readAll, sealRun, text } from './helpers.ts';

t.test('seal, list, verify and read a run on S3', async (t) => {
  const b = await createTestBucket('archive');
  t.comment(`S3 server: ${b.kind}`);
  const store = createS3Store({
    bucket: b.bucket,
    prefix: 'dest/coffer',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });
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
