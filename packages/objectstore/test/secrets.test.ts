// Plants a marker secret (an S3 secret access key, a session token, backup bytes) and drives every
// error path; the marker must never appear in an error's message, stack, properties or inspection.
import { randomBytes } from 'node:crypto';
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { createFsStore, createS3Store, ObjectStoreError, openStore } from '../src/index.ts';
import { chunks } from './contract.ts';

const MARKER = `MARKER-${randomBytes(12).toString('hex')}`;

async function errorOf(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

function assertClean(t: Test, err: unknown, what: string): void {
  if (err === undefined) {
    t.pass(`${what}: succeeded (no error text to check)`);
    return;
  }
  t.ok(err instanceof ObjectStoreError, `${what}: typed error`);
  const e = err as ObjectStoreError;
  const texts = [
    e.message,
    String(e.stack),
    JSON.stringify(e),
    inspect(e, { depth: 10, showHidden: true }),
    String(e),
  ];
  t.notOk(
    texts.some((x) => x.includes(MARKER)),
    `${what}: the marker appears nowhere in the error (${e.code})`,
  );
}

t.test('S3 errors never carry the secret access key or session token', async (t) => {
  const b = await createTestBucket('secrets');
  const bad = createS3Store({
    bucket: b.bucket,
    prefix: 'p',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: { accessKeyId: b.credentials.accessKeyId, secretAccessKey: MARKER, sessionToken: MARKER },
    maxAttempts: 1,
  });
  const body = new TextEncoder().encode(MARKER);
  const ops: [string, () => unknown][] = [
    ['put', () => bad.put('k', body)],
    ['put streamed', () => bad.put('k', chunks(body, 5))],
    ['put conditional', () => bad.put('k', body, { ifNoneMatch: '*' })],
    ['get', () => bad.get('k')],
    ['get range', () => bad.get('k', { start: 1, end: 2 })],
    ['getStream', () => bad.getStream('k')],
    ['head', () => bad.head('k')],
    ['list', () => bad.list('')],
    ['delete', () => bad.delete('k')],
  ];
  for (const [what, fn] of ops) assertClean(t, await errorOf(fn), `wrong secret: ${what}`);
  const unreachable = createS3Store({
    bucket: b.bucket,
    endpoint: 'http://127.0.0.1:9',
    forcePathStyle: true,
    credentials: { accessKeyId: MARKER, secretAccessKey: MARKER },
    maxAttempts: 1,
  });
  assertClean(t, await errorOf(() => unreachable.put('k', body)), 'unreachable endpoint');
  const missingBucket = createS3Store({
    ...b,
    bucket: `nb-${randomBytes(4).toString('hex')}`,
    maxAttempts: 1,
  });
  assertClean(t, await errorOf(() => missingBucket.put('k', body)), 'missing bucket');
  const good = createS3Store({ ...b, prefix: 'p' });
  await good.put('exists', body);
  assertClean(t, await errorOf(() => good.put('exists', body, { ifNoneMatch: '*' })), 'precondition');
  assertClean(t, await errorOf(() => good.put('len', chunks(body), { contentLength: 3 })), 'length mismatch');
  assertClean(t, await errorOf(() => good.get('exists', { start: 10_000 })), 'invalid range');
  assertClean(t, await errorOf(() => openStore(`s3://AKID:${MARKER}@bucket/p`)), 'credentials in URL');
  assertClean(
    t,
    await errorOf(() => createS3Store({ bucket: 'b', endpoint: `http://AKID:${MARKER}@127.0.0.1:1` })),
    'credentials in endpoint',
  );
});

t.test('fs errors never carry object bytes', async (t) => {
  const base = tempDir(t);
  const root = join(base, 'root');
  mkdirSync(join(base, 'outside'));
  mkdirSync(root);
  symlinkSync(join(base, 'outside'), join(root, 'out'));
  const store = createFsStore({ root });
  const body = new TextEncoder().encode(MARKER);
  await store.put('exists', body);
  assertClean(t, await errorOf(() => store.put('exists', body, { ifNoneMatch: '*' })), 'precondition');
  assertClean(
    t,
    await errorOf(() => store.put('len', chunks(body), { contentLength: 3 })),
    'length mismatch',
  );
  assertClean(t, await errorOf(() => store.put('out/x', body)), 'outside the root');
  assertClean(t, await errorOf(() => store.put('exists/under', body)), 'under a file key');
  assertClean(t, await errorOf(() => store.get('exists', { start: 10_000 })), 'invalid range');
  assertClean(t, await errorOf(() => store.get('absent')), 'not found');
});
