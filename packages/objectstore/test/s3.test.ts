import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { createTestBucket, s3Endpoint, type TestBucket } from '@coffer/testkit';
import t from 'tap';
import { createS3Store, openStore, type S3StoreOptions } from '../src/index.ts';
import { chunks, expectCode, storeContract } from './contract.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const MIB = 1024 * 1024;

const server = await s3Endpoint();
const shared: TestBucket = await createTestBucket('objectstore');
const strict = server.kind === 'radosgw';
t.comment(`S3 server: ${server.kind} at ${server.endpoint}`);

function storeOptions(b: TestBucket, extra: Partial<S3StoreOptions> = {}): S3StoreOptions {
  return {
    bucket: b.bucket,
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
    ...extra,
  };
}

// Each contract test gets its own prefix in one bucket, which also proves prefix isolation.
storeContract(
  t,
  `s3 (${server.kind})`,
  async () =>
    createS3Store(
      storeOptions(shared, { prefix: `run-${randomBytes(4).toString('hex')}`, partSize: 5 * MIB }),
    ),
  { conditionalWrites: strict, oneByteRange: strict, faithfulListing: strict, streamMemoryBound: 14 * MIB },
);

t.test('s3: keys live under the prefix and stores with other prefixes do not see them', async (t) => {
  const a = createS3Store(storeOptions(shared, { prefix: 'iso/a' }));
  const a2 = createS3Store(storeOptions(shared, { prefix: '/iso/a2/' }));
  const whole = createS3Store(storeOptions(shared));
  t.equal(a.description, `s3://${shared.bucket}/iso/a`, 'description');
  t.equal(a2.description, `s3://${shared.bucket}/iso/a2`, 'prefix slashes are trimmed');
  await a.put('k', enc('in a'));
  await a2.put('k', enc('in a2'));
  t.equal(dec(await a.get('k')), 'in a', 'a reads its own');
  t.equal(dec(await a2.get('k')), 'in a2', 'a2 reads its own');
  t.same(
    (await a.list('')).objects.map((o) => o.key),
    ['k'],
    'a lists only its prefix ("iso/a/", not "iso/a2/")',
  );
  t.equal(dec(await whole.get('iso/a/k')), 'in a', 'stored as <prefix>/<key>');
});

t.test('s3: a multipart upload with ifNoneMatch', async (t) => {
  const store = createS3Store(storeOptions(shared, { prefix: 'mp', partSize: 5 * MIB }));
  const body = randomBytes(11 * MIB + 5);
  await store.put('big', chunks(body, MIB), { ifNoneMatch: '*' });
  t.equal((await store.head('big'))?.size, body.byteLength, 'created by multipart');
  t.ok(Buffer.from(await store.get('big')).equals(body), 'bytes match');
  if (strict) {
    await expectCode(
      t,
      store.put('big', chunks(body, MIB), { ifNoneMatch: '*' }),
      'ERR_OBJECTSTORE_PRECONDITION_FAILED',
      'second multipart create',
    );
  }
  await store.put('sized', body, { contentLength: body.byteLength });
  t.ok(Buffer.from(await store.get('sized')).equals(body), 'large Uint8Array body goes multipart');
});

t.test(
  's3: wrong credentials are ACCESS_DENIED',
  { skip: !strict && 's3rver does not check signatures' },
  async (t) => {
    const wrongSecret = createS3Store(
      storeOptions(shared, { credentials: { ...shared.credentials, secretAccessKey: 'not-the-secret' } }),
    );
    const wrongKey = createS3Store(
      storeOptions(shared, { credentials: { accessKeyId: 'NOSUCHKEYID0000', secretAccessKey: 'x' } }),
    );
    await shared_put();
    const e1 = await expectCode(
      t,
      wrongSecret.get('acl/k'),
      'ERR_OBJECTSTORE_ACCESS_DENIED',
      'get, wrong secret',
    );
    t.equal(e1.storeCode, 'SignatureDoesNotMatch', 'SignatureDoesNotMatch');
    t.equal(e1.status, 403, 'HTTP 403');
    await expectCode(
      t,
      wrongSecret.put('acl/k2', enc('x')),
      'ERR_OBJECTSTORE_ACCESS_DENIED',
      'put, wrong secret',
    );
    await expectCode(t, wrongSecret.list('acl/'), 'ERR_OBJECTSTORE_ACCESS_DENIED', 'list, wrong secret');
    await expectCode(t, wrongSecret.head('acl/k'), 'ERR_OBJECTSTORE_ACCESS_DENIED', 'head, wrong secret');
    await expectCode(t, wrongSecret.delete('acl/k'), 'ERR_OBJECTSTORE_ACCESS_DENIED', 'delete, wrong secret');
    const e2 = await expectCode(
      t,
      wrongKey.get('acl/k'),
      'ERR_OBJECTSTORE_ACCESS_DENIED',
      'get, unknown key id',
    );
    t.equal(e2.storeCode, 'InvalidAccessKeyId', 'InvalidAccessKeyId');
  },
);

async function shared_put(): Promise<void> {
  await createS3Store(storeOptions(shared)).put('acl/k', enc('x'));
}

t.test('s3: a missing bucket is REJECTED with the S3 code', async (t) => {
  const store = createS3Store(storeOptions(shared, { bucket: `missing-${randomBytes(4).toString('hex')}` }));
  const e = await expectCode(t, store.put('k', enc('x')), 'ERR_OBJECTSTORE_REJECTED', 'put');
  t.equal(e.storeCode, 'NoSuchBucket', 'storeCode NoSuchBucket');
  const l = await expectCode(t, store.list(''), 'ERR_OBJECTSTORE_REJECTED', 'list');
  t.equal(l.storeCode, 'NoSuchBucket', 'list storeCode NoSuchBucket');
  const g = await expectCode(t, store.get('k'), 'ERR_OBJECTSTORE_REJECTED', 'get');
  t.equal(g.storeCode, 'NoSuchBucket', 'get storeCode NoSuchBucket');
});

t.test('s3: an unreachable endpoint is a FAULT', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
  const store = createS3Store(storeOptions(shared, { endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1 }));
  const e = await expectCode(t, store.get('k'), 'ERR_OBJECTSTORE_FAULT', 'connection refused');
  t.equal(e.storeCode, 'ECONNREFUSED', 'storeCode is the network error');
});

t.test('s3: openStore with an s3:// URL', async (t) => {
  const url = `s3://${shared.bucket}/via-url?endpoint=${encodeURIComponent(shared.endpoint)}&region=${shared.region}`;
  const store = openStore(url, { credentials: shared.credentials });
  t.equal(
    store.description,
    `s3://${shared.bucket}/via-url`,
    'description has no endpoint query or credentials',
  );
  await store.put('k', enc('v'));
  t.equal(
    dec(await createS3Store(storeOptions(shared)).get('via-url/k')),
    'v',
    'path-style by default with an endpoint',
  );
  const bad = (u: string) => Promise.resolve().then(() => openStore(u));
  await expectCode(
    t,
    bad(`s3://AKID:secret@${shared.bucket}/p`),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'credentials in URL',
  );
  await expectCode(
    t,
    bad(`s3://${shared.bucket}/p?secret=x`),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'unknown parameter',
  );
  await expectCode(t, bad('s3:///p'), 'ERR_OBJECTSTORE_INVALID_CONFIG', 'no bucket');
  await expectCode(
    t,
    bad(`s3://${shared.bucket}/p?forcePathStyle=maybe`),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'bad forcePathStyle',
  );
  await expectCode(
    t,
    Promise.resolve().then(() => createS3Store({ bucket: 'b', partSize: 1024 })),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'tiny partSize',
  );
  await expectCode(
    t,
    Promise.resolve().then(() => createS3Store({ bucket: 'b', endpoint: 'http://u:p@127.0.0.1:1' })),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'credentials in endpoint',
  );
});
