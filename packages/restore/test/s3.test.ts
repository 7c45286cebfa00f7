import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createS3Store } from '@coffer/objectstore';
import { createS3Source } from '@coffer/sources';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { applyRestore, planRestore, runDrill, validateRestoreRequest } from '../src/index.ts';
import { backup, collect, fsStore, keys, resolverOf } from './helpers.ts';

const a = await createTestBucket('restore-src');
const b = await createTestBucket('restore-dst');
const conn = { endpoint: a.endpoint, region: a.region, forcePathStyle: true, credentials: a.credentials };
const srcStore = createS3Store({ bucket: a.bucket, ...conn });
const objects: Record<string, Buffer> = {
  'docs/readme.txt': Buffer.from('read me'),
  'img/a.bin': randomBytes(200_000),
  'img/b.bin': randomBytes(10),
};
for (const [k, v] of Object.entries(objects)) await srcStore.put(k, v);

const base = tempDir(t, 'restore-s3-');
const store = fsStore(join(base, 'dest'));
await backup(store, createS3Source({ type: 's3', bucket: a.bucket, binding: 'job-s3', ...conn }), {
  job: 'job-s3',
  runId: 'run-1',
});
const resolver = resolverOf({ 'job-s3': { type: 's3', bucket: a.bucket, ...conn } });

t.test('restore into another bucket (target.bucketName), byte for byte', async (t) => {
  const dst = createS3Store({ bucket: b.bucket, ...conn });
  await dst.put('restored/img/b.bin', Buffer.from('old'));
  const request = validateRestoreRequest({
    runId: 'run-1',
    target: { bucketName: b.bucket, namespaceId: 'restored' },
  });
  const o = {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request,
    targetResolver: resolver,
    restoreRoots: [],
  };
  const plan = await planRestore(o);
  t.equal(plan.ok, true);
  t.equal(plan.target?.namespace, `${b.bucket}/restored`);
  t.equal(plan.sample.find((r) => r.name === 'img/b.bin')?.targetExists, true);
  t.equal(plan.sample.find((r) => r.name === 'img/a.bin')?.targetExists, false);
  const r = await applyRestore({ ...o, request: { ...request, confirm: true } });
  t.equal(r.status, 'succeeded');
  t.equal(r.written, 3);
  for (const [k, v] of Object.entries(objects))
    t.ok(Buffer.from(await dst.get(`restored/${k}`)).equals(v), k);
  t.ok(
    (await collect(await srcStore.getStream('img/a.bin'))).equals(objects['img/a.bin']!),
    'the source is untouched',
  );
});

t.test('drill into a scratch prefix', async (t) => {
  const ev = await runDrill({
    store,
    runId: 'run-1',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: base, s3: { bucket: b.bucket, prefix: 'drills', ...conn } },
  });
  t.equal(ev.verdict, 'pass', JSON.stringify(ev));
  t.equal(ev.matched, 3);
  const left = [];
  for await (const o of createS3Store({ bucket: b.bucket, ...conn }).listAll('drills/')) left.push(o.key);
  t.same(left, [], 'scratch objects removed');
});
