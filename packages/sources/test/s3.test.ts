import { randomBytes } from 'node:crypto';
import { createS3Store } from '@coffer/objectstore';
import { createTestBucket } from '@coffer/testkit';
import t from 'tap';
import { createS3Source, type S3SourceConfig } from '../src/s3-source.ts';
import { isSkipped, type SourceRecordInfo } from '../src/types.ts';

async function bytes(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

async function bucketConfig(prefix?: string): Promise<S3SourceConfig> {
  const b = await createTestBucket('coffer-sources');
  return {
    type: 's3',
    bucket: b.bucket,
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
    ...(prefix === undefined ? {} : { prefix }),
  };
}

t.test('lists a prefix page by page, reads whole and by range, restores elsewhere', async (t) => {
  const config = await bucketConfig('data');
  const seed = createS3Store({ ...config, prefix: undefined });
  const big = randomBytes(300_000);
  await seed.put('data/a/one.txt', Buffer.from('one'), { contentType: 'text/plain; charset=utf-8' });
  await seed.put('data/a/two.bin', big);
  await seed.put('data/b', Buffer.from('bee'));
  for (let i = 0; i < 12; i++)
    await seed.put(`data/many/${String(i).padStart(2, '0')}`, Buffer.from(`m${i}`));
  await seed.put('other/not-listed', Buffer.from('x'));

  const src = createS3Source({ ...config, binding: 'media' });
  t.teardown(() => src.close());
  const recs: SourceRecordInfo[] = [];
  for await (const e of src.enumerate({ pageSize: 4 })) {
    if (isSkipped(e)) throw new Error('s3 never skips');
    recs.push(e);
  }
  t.same(
    recs.map((r) => r.name),
    [
      'a/one.txt',
      'a/two.bin',
      'b',
      ...Array.from({ length: 12 }, (_, i) => `many/${String(i).padStart(2, '0')}`),
    ],
  );
  const two = recs[1]!;
  t.equal(two.size, 300_000);
  t.equal(two.sourceType, 's3');
  t.equal(two.binding, 'media');
  t.equal(two.namespace, config.bucket);
  t.type(two.metadata.etag, 'string');
  t.type(two.metadata.lastModified, 'string');
  t.equal(recs[0]!.metadata.contentType, 'text/plain; charset=utf-8', 'the stored content type is listed');
  t.same(await bytes(await src.read('a/two.bin')), big);
  t.same(Buffer.from(await src.readRange('a/two.bin', 1000, 1999)), big.subarray(1000, 2000));
  t.same(Buffer.from(await src.readRange('a/two.bin', 299_990, 400_000)), big.subarray(299_990));
  t.equal((await src.readRange('b', 10, 20)).byteLength, 0);

  // The cursor resumes in another connector.
  const page = await src.list({ pageSize: 3 });
  const again = createS3Source(config);
  const next = await again.list({ pageSize: 100, cursor: page.cursor! });
  t.same(next.records[0]?.name, 'many/00');

  // Restore into another bucket: stream bodies, exists for onExisting: skip.
  const targetConfig = await bucketConfig();
  const target = createS3Source(targetConfig);
  for (const r of recs) {
    t.equal(await target.exists(r.name), false);
    t.same(await target.write(r.name, await src.read(r.name), r.metadata), { written: true });
  }
  t.equal(await target.exists('a/two.bin'), true);
  t.same(await bytes(await target.read('a/two.bin')), big);
  t.equal(
    (await createS3Store({ ...targetConfig, prefix: undefined }).head('a/one.txt'))?.contentType,
    'text/plain; charset=utf-8',
    'a restored object keeps its content type',
  );
  await t.rejects(target.write('../escape', Buffer.from('x')), { code: 'ERR_SOURCE_UNSAFE_NAME' });
  const boom = new Error('body broke');
  await t.rejects(
    target.write(
      'partial',
      (async function* () {
        yield new Uint8Array([1]);
        throw boom;
      })(),
    ),
    boom,
  );
  t.equal(await target.exists('partial'), false);
});

t.test('faults are typed', async (t) => {
  const config = await bucketConfig();
  const src = createS3Source(config);
  await t.rejects(src.read('nope'), { code: 'ERR_SOURCE_RECORD_VANISHED', disposition: 'warn' });
  const seed = createS3Store(config);
  await seed.put('big', randomBytes(2000));
  const small = createS3Source({ ...config, maxRecordBytes: 1000 });
  await t.rejects(small.read('big'), { code: 'ERR_SOURCE_RECORD_TOO_LARGE' });
  await t.rejects(small.readRange('big', 0, 10), { code: 'ERR_SOURCE_RECORD_TOO_LARGE' });
  await t.rejects(createS3Source({ ...config, bucket: `${config.bucket}-missing` }).list(), {
    code: 'ERR_SOURCE_RESOURCE_MISSING',
    reason: 'source resource missing',
  });
  // HEAD cannot tell a missing bucket from a missing object: exists() says which, never false.
  await t.rejects(createS3Source({ ...config, bucket: `${config.bucket}-missing` }).exists('a'), {
    code: 'ERR_SOURCE_RESOURCE_MISSING',
  });
  t.equal(await src.exists('nope'), false, 'a missing object in an existing bucket');
  await t.rejects(createS3Source({ ...config, endpoint: 'http://127.0.0.1:1' }).list(), {
    code: 'ERR_SOURCE_BINDING',
  });
  await t.rejects(src.list({ cursor: 'not-ours' }), { code: 'ERR_SOURCE_INVALID_CURSOR' });
  t.throws(() => createS3Source({ ...config, bucket: 'bad bucket!' }), { code: 'ERR_SOURCE_INVALID_CONFIG' });
});
