import { join } from 'node:path';
import { createTestBucket, redisUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { openSource, type SourceConnector } from '../src/index.ts';

const MARKER = 'MARKER-s3cr3t-7f3a9c';
const MARKER_BYTES = Buffer.from(`backup bytes ${MARKER} backup bytes`);

/** Everything an error could leak through: message, stack, string form, enumerable fields. */
function surfaces(err: unknown): string {
  const e = err as Error;
  return [String(e), e?.message, e?.stack, JSON.stringify(e), JSON.stringify(Object.entries(e ?? {}))].join(
    '\n',
  );
}

async function expectClean(
  t: {
    ok(v: unknown, m: string): void;
    notOk(v: unknown, m: string): void;
    match(a: string, b: RegExp, m: string): void;
  },
  what: string,
  secret: string,
  fn: () => Promise<unknown> | unknown,
) {
  let caught: unknown;
  try {
    await fn();
  } catch (err) {
    caught = err;
  }
  t.ok(caught !== undefined, `${what}: fails`);
  t.notOk(surfaces(caught).includes(secret), `${what}: the secret is not in the error`);
  t.match(
    (caught as { code?: string }).code ?? '',
    /^ERR_SOURCE_/,
    `${what}: typed (${(caught as { code?: string }).code})`,
  );
}

t.test('a Redis password never appears in errors or descriptions', async (t) => {
  const url = await redisUrl();
  const real = new URL(url).password;
  const wrong = url.replace(/\/\/:[^@]*@/, `//:${MARKER}@`);
  const bad = openSource({ type: 'redis', url: wrong });
  t.notOk(bad.description.includes(MARKER), 'description has no password');
  await expectClean(t, 'wrong password', MARKER, () => bad.list());
  await expectClean(t, 'refused', MARKER, () =>
    openSource({ type: 'redis', url: `redis://:${MARKER}@127.0.0.1:1` }).list(),
  );
  await expectClean(t, 'malformed URL', MARKER, () =>
    openSource({ type: 'redis', url: `redis://:${MARKER}@127.0.0.1:notaport` }),
  );
  await expectClean(t, 'wrong scheme', MARKER, () =>
    openSource({ type: 'redis', url: `http://:${MARKER}@127.0.0.1/` }),
  );
  await expectClean(t, 'missing db', MARKER, () => openSource({ type: 'redis', url: wrong, db: 999 }).list());
  // With the real password: the error paths of a working connection never show it either.
  const good = openSource({ type: 'redis', url, prefix: 'coffer-test:secrets:' });
  t.teardown(() => good.close());
  t.notOk(good.description.includes(real));
  await expectClean(t, 'vanished', real, () => good.read('coffer-test:secrets:none'));
  await expectClean(t, 'outside prefix', real, () => good.write('elsewhere', MARKER_BYTES, {}));
  await expectClean(t, 'payload refused', MARKER, () =>
    good.write('coffer-test:secrets:x', MARKER_BYTES, {}),
  );
  await expectClean(t, 'payload refused (password)', real, () =>
    good.write('coffer-test:secrets:x', MARKER_BYTES, {}),
  );
  await expectClean(t, 'db out of range', real, () => openSource({ type: 'redis', url, db: 999 }).list());
});

t.test('an S3 secret key never appears in errors', async (t) => {
  const b = await createTestBucket('coffer-sources-secrets');
  const base = {
    type: 's3' as const,
    bucket: b.bucket,
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
  };
  const wrongSecret = openSource({
    ...base,
    credentials: { accessKeyId: b.credentials.accessKeyId, secretAccessKey: MARKER },
  });
  await expectClean(t, 'bad secret: list', MARKER, () => wrongSecret.list());
  await expectClean(t, 'bad secret: read', MARKER, () => wrongSecret.read('x'));
  await expectClean(t, 'bad secret: write', MARKER, () => wrongSecret.write('x', MARKER_BYTES, {}));
  const unreachable = openSource({
    ...base,
    endpoint: 'http://127.0.0.1:1',
    credentials: { accessKeyId: 'AK', secretAccessKey: MARKER },
  });
  await expectClean(t, 'unreachable', MARKER, () => unreachable.list());
  await expectClean(t, 'bad bucket', MARKER, () =>
    openSource({ ...base, bucket: '', credentials: { accessKeyId: 'AK', secretAccessKey: MARKER } }),
  );
  const good = openSource({ ...base, credentials: b.credentials });
  await expectClean(t, 'vanished', b.credentials.secretAccessKey, () => good.read('nope'));
  await expectClean(t, 'missing bucket', b.credentials.secretAccessKey, () =>
    openSource({ ...base, bucket: `${b.bucket}-gone`, credentials: b.credentials }).list(),
  );
});

t.test('record bytes never appear in errors', async (t) => {
  const dir = tempDir(t);
  const db: SourceConnector = openSource({ type: 'sqlite', path: join(dir, 'r.sqlite') });
  t.teardown(() => db.close());
  await expectClean(t, 'sqlite schema', MARKER, () => db.write('schema.json', MARKER_BYTES));
  await expectClean(t, 'sqlite table', MARKER, () => db.write('tables/t.jsonl', MARKER_BYTES));
  const header = JSON.stringify({
    format: 'coffer-sqlite-table/1',
    table: 't',
    columns: ['a'],
    sql: 'CREATE TABLE t (a)',
    withoutRowid: false,
    indexes: [],
    triggers: [],
    autoincrement: null,
    foreignKeys: [],
    rows: 1,
  });
  await expectClean(t, 'sqlite row', MARKER, () =>
    db.write('tables/t.jsonl', Buffer.from(`${header}\n["${MARKER}", 1]\n`)),
  );
  const files = openSource({ type: 'files', root: join(dir, 'files') });
  await expectClean(t, 'files unsafe name', MARKER, () => files.write('../x', MARKER_BYTES));
});
