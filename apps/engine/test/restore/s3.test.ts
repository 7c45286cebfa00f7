/**
 * Restore of an `s3` source end to end through HTTP against a started engine and the loopback
 * S3-compatible server (radosgw): objects of several content types (text, JSON, binary, an empty
 * object, nested keys, non-ASCII names) under a prefix, backed up by a real run; a dry run with
 * `targetExists` on the sample and the overwrite check; an apply into a FRESH bucket (same
 * endpoint and credentials, `target.bucketName`) and into another prefix (`target.namespaceId`),
 * compared byte for byte with the content type of every object; `onExisting: skip` into a bucket
 * that already holds some objects (reported skipped, those objects untouched).
 */
import { randomBytes } from 'node:crypto';
import {
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { createTestBucket } from '@coffer/testkit';
import t from 'tap';
import { connectionsFile, restoreWorld } from './helpers.ts';

const srcBucket = await createTestBucket('coffer-restore-src');
const scratchBucket = await createTestBucket('coffer-restore-scratch');
const freshBucket = await createTestBucket('coffer-restore-fresh');
const partialBucket = await createTestBucket('coffer-restore-partial');
const KEY_ENV = 'COFFER_TEST_RESTORE_S3_KEY';
const SECRET_ENV = 'COFFER_TEST_RESTORE_S3_SECRET';
process.env[KEY_ENV] = srcBucket.credentials.accessKeyId;
process.env[SECRET_ENV] = srcBucket.credentials.secretAccessKey;
const s3 = new S3Client({
  endpoint: srcBucket.endpoint,
  region: srcBucket.region,
  forcePathStyle: true,
  credentials: srcBucket.credentials,
  requestChecksumCalculation: 'WHEN_REQUIRED',
  responseChecksumValidation: 'WHEN_REQUIRED',
});
t.teardown(() => s3.destroy());

const objects: Record<string, { body: Buffer; contentType: string }> = {
  'index.html': { body: Buffer.from('<!doctype html><p>hi</p>\n'), contentType: 'text/html; charset=utf-8' },
  'data/report.json': { body: Buffer.from('{"a":[1,2,3]}'), contentType: 'application/json' },
  'data/blob.bin': { body: randomBytes(200_000), contentType: 'application/octet-stream' },
  'data/deep/empty.txt': { body: Buffer.alloc(0), contentType: 'text/plain' },
  'images/ünïcødé pic.png': { body: randomBytes(5000), contentType: 'image/png' },
};
const PREFIX = 'site/';
for (const [k, o] of Object.entries(objects))
  await s3.send(
    new PutObjectCommand({
      Bucket: srcBucket.bucket,
      Key: PREFIX + k,
      Body: o.body,
      ContentType: o.contentType,
    }),
  );
// Outside the job's prefix: never backed up.
await s3.send(new PutObjectCommand({ Bucket: srcBucket.bucket, Key: 'other/x.txt', Body: 'x' }));

async function read(bucket: string, key: string): Promise<{ body: Buffer; contentType: string | undefined }> {
  const out = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return { body: Buffer.from(await out.Body!.transformToByteArray()), contentType: out.ContentType };
}
async function keys(bucket: string, prefix = ''): Promise<string[]> {
  const out = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix }));
  return (out.Contents ?? []).map((o) => o.Key!).sort();
}

const connections = connectionsFile(t, {
  connections: {
    'test-s3': {
      type: 's3',
      endpoint: srcBucket.endpoint,
      region: srcBucket.region,
      forcePathStyle: true,
      accessKeyIdEnv: KEY_ENV,
      secretAccessKeyEnv: SECRET_ENV,
      restore: true,
    },
    // Restores allowed, but only into the source bucket.
    'limited-s3': {
      type: 's3',
      endpoint: srcBucket.endpoint,
      region: srcBucket.region,
      forcePathStyle: true,
      accessKeyIdEnv: KEY_ENV,
      secretAccessKeyEnv: SECRET_ENV,
      buckets: [srcBucket.bucket],
      restore: true,
    },
  },
  scratch: { s3: { connection: 'test-s3', bucket: scratchBucket.bucket, prefix: 'drills/' } },
});
const w = await restoreWorld(t, { ENGINE_CONNECTIONS_FILE: connections });
const runId = await w.backUp('site', {
  type: 's3',
  connection: 'test-s3',
  bucket: srcBucket.bucket,
  prefix: PREFIX,
});
const names = Object.keys(objects).sort();

t.test('dry run, apply into a fresh bucket: bytes and content types equal', async (t) => {
  const body = { runId, target: { bucketName: freshBucket.bucket } };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const p = plan.json();
  t.match(p, {
    ok: true,
    mode: 'dry-run',
    job: 'site',
    isLatest: true,
    recordsVerified: 5,
    plannedWrites: 5,
    bytes: Object.values(objects).reduce((n, o) => n + o.body.length, 0),
    target: { type: 's3', binding: 'site' },
    overwriteCheck: { onExisting: 'overwrite', checked: 5, existing: 0, absent: 5, complete: true },
    fidelityWarnings: [],
    dependencyWarnings: [],
  });
  t.same(p.sample.map((s: { name: string }) => s.name).sort(), names);
  t.ok(
    p.sample.every((s: { targetExists?: boolean }) => s.targetExists === false),
    'targetExists on every row',
  );
  t.notMatch(plan.text, srcBucket.credentials.secretAccessKey, 'no secret in the plan');
  t.same(await keys(freshBucket.bucket), [], 'a dry run writes nothing');

  const done = await w.apply({ ...body, planHash: p.planHash });
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.match(done.receipt, { written: 5, failedCount: 0, skippedCount: 0, bytes: p.bytes });
  t.same(
    await keys(freshBucket.bucket),
    names.map((n) => PREFIX + n),
    'the same keys under the same prefix',
  );
  for (const [k, o] of Object.entries(objects)) {
    const got = await read(freshBucket.bucket, PREFIX + k);
    t.ok(got.body.equals(o.body), `${k} byte for byte`);
    t.equal(got.contentType, o.contentType, `${k} keeps its content type`);
  }
});

t.test('apply into another prefix of the same bucket', async (t) => {
  const body = { runId, target: { namespaceId: 'restored/' }, include: ['data/'], exclude: ['data/deep/'] };
  const p = (await w.dryRun(body)).json();
  t.match(p, { ok: true, plannedWrites: 2 });
  t.same(p.skipped.map((s: { name: string; reason: string }) => [s.name, s.reason]).sort(), [
    ['data/deep/empty.txt', 'excluded by selector'],
    ['images/ünïcødé pic.png', 'not included by selector'],
    ['index.html', 'not included by selector'],
  ]);
  const done = await w.apply(body);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.same(await keys(srcBucket.bucket, 'restored/'), ['restored/data/blob.bin', 'restored/data/report.json']);
  for (const k of ['data/blob.bin', 'data/report.json']) {
    const got = await read(srcBucket.bucket, `restored/${k}`);
    t.ok(got.body.equals(objects[k]!.body), `${k} byte for byte`);
    t.equal(got.contentType, objects[k]!.contentType);
  }
  t.same(
    await keys(srcBucket.bucket, PREFIX),
    names.map((n) => PREFIX + n),
    'the source prefix untouched',
  );
});

t.test('onExisting skip into a bucket that holds some objects', async (t) => {
  const kept = Buffer.from('the operator put this here');
  await s3.send(
    new PutObjectCommand({
      Bucket: partialBucket.bucket,
      Key: `${PREFIX}index.html`,
      Body: kept,
      ContentType: 'text/x-kept',
    }),
  );
  const body = { runId, target: { bucketName: partialBucket.bucket }, onExisting: 'skip' };
  const p = (await w.dryRun(body)).json();
  t.match(p, {
    ok: true,
    onExisting: 'skip',
    plannedWrites: 5,
    overwriteCheck: { onExisting: 'skip', checked: 5, existing: 1, absent: 4, complete: true },
  });
  t.same(
    p.sample.filter((s: { targetExists: boolean }) => s.targetExists).map((s: { name: string }) => s.name),
    ['index.html'],
  );
  const done = await w.apply(body);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.match(done.receipt, { written: 4, skippedCount: 1, failedCount: 0 });
  t.same(done.receipt.skipped, [{ name: 'index.html', reason: 'exists in the target (onExisting: skip)' }]);
  const got = await read(partialBucket.bucket, `${PREFIX}index.html`);
  t.ok(got.body.equals(kept), 'the existing object is untouched');
  t.equal(got.contentType, 'text/x-kept');
  const head = await s3.send(
    new HeadObjectCommand({ Bucket: partialBucket.bucket, Key: `${PREFIX}data/blob.bin` }),
  );
  t.equal(head.ContentLength, objects['data/blob.bin']!.body.length, 'an absent object is written');
});

t.test('refusals of an s3 target', async (t) => {
  const r = await w.dryRun({ runId, target: { bucketName: '' } });
  t.equal(r.status, 400);
  t.same(r.json(), { error: 'target.bucketName must be a non-empty string' });
  // A bucket that does not exist: the dry run cannot check the target (unknown, never absent); the
  // apply records every write as a failure and goes on.
  const body = { runId, target: { bucketName: `coffer-no-such-${randomBytes(4).toString('hex')}` } };
  const missing = await w.dryRun(body);
  t.equal(missing.status, 200, missing.text);
  t.match(missing.json(), {
    ok: true,
    overwriteCheck: { checked: 5, existing: 0, absent: 0, unknown: 5, complete: true },
  });
  t.ok(
    missing.json().sample.every((s: { targetExists?: boolean }) => s.targetExists === undefined),
    'no targetExists where the check failed',
  );
  const done = await w.apply(body);
  t.equal(done.status, 'completed-with-failures', JSON.stringify(done));
  t.match(done.receipt, { written: 0, failedCount: 5 });
  t.ok(
    done.receipt.failed.every((f: { code: string }) => f.code === 'ERR_SOURCE_RESOURCE_MISSING'),
    JSON.stringify(done.receipt.failed),
  );
  t.notMatch(JSON.stringify(done), srcBucket.credentials.secretAccessKey);
});

t.test('a bucket outside the connection’s buckets: the apply is refused, the dry run plans it', async (t) => {
  const limitedRun = await w.backUp('site-limited', {
    type: 's3',
    connection: 'limited-s3',
    bucket: srcBucket.bucket,
    prefix: PREFIX,
  });
  const body = { runId: limitedRun, target: { bucketName: freshBucket.bucket, namespaceId: 'limited/' } };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const r = await w.post('/restore', { ...body, confirm: true, planHash: plan.json().planHash });
  t.equal(r.status, 400, r.text);
  t.match(r.json().error, /not one of the buckets of connection "limited-s3"/);
  t.same(await keys(freshBucket.bucket, 'limited/'), [], 'nothing written');
  // Within the list: allowed.
  const inside = { runId: limitedRun, target: { namespaceId: 'limited-copy/' } };
  const p2 = await w.dryRun(inside);
  const done = await w.apply({ ...inside, planHash: p2.json().planHash });
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal((await keys(srcBucket.bucket, 'limited-copy/')).length, 5);
});

t.test('a drill restores into the scratch bucket only, compares, removes it', async (t) => {
  const before = await keys(srcBucket.bucket);
  const ev = await w.drill('site');
  t.ok(before.length > 0);
  t.match(
    ev,
    { kind: 'coffer-drill-evidence', job: 'site', runId, sourceType: 's3', verdict: 'pass', records: 5 },
    JSON.stringify(ev),
  );
  t.same(ev.mismatched, []);
  t.same(
    await keys(srcBucket.bucket, PREFIX),
    names.map((n) => PREFIX + n),
    'the source prefix untouched',
  );
  t.same(await keys(srcBucket.bucket), before, 'nothing written into the source bucket');
  t.same(await keys(scratchBucket.bucket), [], 'the scratch copy was removed');
  t.same(await w.e.app.state.settings.list('drill.scratch.'), [], 'the namespace is forgotten');
});
