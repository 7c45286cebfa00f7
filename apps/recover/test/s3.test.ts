// coffer-recover straight from a real S3-compatible server on loopback (radosgw, or s3rver as the
// fallback), credentials from the environment only.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient, generateSigner } from '@coffer/crypto';
import { createS3Store } from '@coffer/objectstore';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { RECORDS, writeRun } from './fixture.ts';
import { runCli } from './helpers.ts';

t.test('inspect, verify and extract from s3://bucket/prefix', async (t) => {
  const b = await createTestBucket('coffer-recover');
  const store = createS3Store({
    bucket: b.bucket,
    prefix: 'backups/coffer',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });
  const dir = tempDir(t, 'coffer-recover-s3-');
  const signer = generateSigner();
  const op = generateRecipient();
  const bg = generateRecipient();
  await writeRun(
    store,
    'nightly',
    'r1',
    null,
    signer,
    { operational: op.publicKey, breakGlass: bg.publicKey },
    RECORDS,
  );
  const key = join(dir, 'bg.key');
  writeFileSync(key, encodeKeyFile('recipient-secret', bg.secretKey), { mode: 0o600 });

  const env = {
    AWS_ACCESS_KEY_ID: b.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: b.credentials.secretAccessKey,
  };
  const where = [
    '--from',
    `s3://${b.bucket}/backups/coffer`,
    '--endpoint',
    b.endpoint,
    '--region',
    b.region,
    '--path-style',
  ];

  const list = await runCli(['inspect', ...where, '--json'], { env });
  t.equal(list.code, 0, list.stderr);
  const doc = JSON.parse(list.stdout);
  t.same(doc.jobs, ['nightly']);
  t.equal(doc.runs[0].check.status, 'ok');

  const v = await runCli(['verify', '--trust-unpinned-signer', ...where, '--run', 'r1', '--key', key], {
    env,
  });
  t.equal(v.code, 0, v.stderr);
  const out = join(dir, 'out');
  const x = await runCli(
    [
      'extract',
      '--trust-unpinned-signer',
      ...where,
      '--run',
      'r1',
      '--key',
      key,
      '--to',
      out,
      '--include',
      'logs/',
    ],
    { env },
  );
  t.equal(x.code, 0, x.stderr);
  const log = RECORDS.find((r) => r.name === 'logs/app.log')!;
  t.ok(readFileSync(join(out, 'logs', 'app.log')).equals(log.data), 'byte for byte from S3');

  const nf = await runCli(['verify', '--trust-unpinned-signer', ...where, '--run', 'nope', '--key', key], {
    env,
  });
  t.equal(nf.code, 5, 'unknown run: not found');
  if (b.kind === 'radosgw') {
    // s3rver accepts any secret; radosgw checks signatures like AWS.
    const denied = await runCli(
      ['verify', '--trust-unpinned-signer', ...where, '--run', 'r1', '--key', key],
      {
        env: { AWS_ACCESS_KEY_ID: b.credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: 'wrong-secret' },
      },
    );
    t.equal(denied.code, 9, `wrong credentials: store error (${denied.stderr.trim()})`);
  }
});
