// coffer-recover straight from a real S3-compatible server on loopback (radosgw, or s3rver as the
// fallback), credentials from the environment only; format 0.1 runs and a 0.2 chain.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createChunkedWriter, layout, loadChunkedBase } from '@coffer/archive';
import { encodeKeyFile, fingerprint, generateRecipient, generateSigner } from '@coffer/crypto';
import { createS3Store } from '@coffer/objectstore';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { pseudoRandom, RECORDS, writeRun } from './fixture.ts';
import { runCli } from './helpers.ts';

/**
 * A fresh bucket, a store on its `backups/coffer` prefix, and how the CLI reaches the same place:
 * the credentials in the environment (the CLI refuses them on argv) and the options naming it.
 */
async function s3Prefix(name: string) {
  const b = await createTestBucket(name);
  const store = createS3Store({
    bucket: b.bucket,
    prefix: 'backups/coffer',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });
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
  return { b, store, env, where };
}

t.test('inspect, verify and extract from s3://bucket/prefix', async (t) => {
  const { b, store, env, where } = await s3Prefix('coffer-recover');
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

t.test(
  'a 0.2 chain from s3://bucket/prefix: packs of the earlier run are followed, a deleted one named',
  async (t) => {
    const { store, env, where } = await s3Prefix('coffer-recover-chunked');
    const dir = tempDir(t, 'coffer-recover-s3-chunked-');
    const signer = generateSigner();
    const op = generateRecipient();
    const bg = generateRecipient();
    const recipients = { operational: op.publicKey, breakGlass: bg.publicKey };
    const common = {
      store,
      job: 'files',
      signerSecretKey: signer.secretKey,
      recipients,
      source: { type: 'files', binding: 'main', origin: '/srv/data' },
      chunking: { minSize: 2048, avgSize: 8192, maxSize: 65536 },
      packSize: 64 * 1024,
    };
    const stable = pseudoRandom(300 * 1024, 1);
    const first = await createChunkedWriter({ ...common, runId: 'c1', prevRunId: null });
    await first.addRecord({ name: 'stable.bin', body: stable, size: stable.byteLength, change: 's-1' });
    await first.addRecord({ name: 'note.txt', body: Buffer.from('first\n'), change: 'n-1' });
    const firstPacks = (await first.finish()).packIds;
    const base = await loadChunkedBase(store, { job: 'files', runId: 'c1', secretKey: op.secretKey });
    const second = await createChunkedWriter({ ...common, runId: 'c2', prevRunId: 'c1', base });
    await second.addRecord({ name: 'stable.bin', body: stable, size: stable.byteLength, change: 's-1' });
    await second.addRecord({ name: 'note.txt', body: Buffer.from('second\n'), change: 'n-2' });
    const s2 = await second.finish();
    t.equal(s2.unchangedRecords, 1, 'stable.bin is referenced from run 1');

    const key = join(dir, 'bg.key');
    writeFileSync(key, encodeKeyFile('recipient-secret', bg.secretKey), { mode: 0o600 });
    const pin = ['--pin-signer', fingerprint(signer.publicKey)];

    const list = await runCli(['inspect', ...where, '--json'], { env });
    t.equal(list.code, 0, list.stderr);
    const c2 = JSON.parse(list.stdout).runs.find((r: { runId: string }) => r.runId === 'c2');
    t.equal(c2.formatVersion, '0.2.0');
    t.equal(c2.newChunks, s2.newChunks);
    t.equal(c2.shards, null);

    const v = await runCli(['verify', ...where, '--run', 'c2', '--key', key, ...pin], { env });
    t.equal(v.code, 0, v.stderr);
    const out = join(dir, 'out');
    const x = await runCli(['extract', ...where, '--run', 'c2', '--key', key, '--to', out, ...pin], { env });
    t.equal(x.code, 0, x.stderr);
    t.ok(readFileSync(join(out, 'stable.bin')).equals(stable), "stable.bin byte for byte from run 1's packs");
    t.equal(readFileSync(join(out, 'note.txt'), 'utf8'), 'second\n');

    // Every pack run 1 stored is gone: run 2 cannot read stable.bin, and says which object is missing.
    const keyId = (await store.list('jobs/files/packs/')).objects[0]!.key.split('/')[3]!;
    for (const pack of firstPacks) await store.delete(layout.pack('files', keyId, pack));
    const broken = await runCli(['verify', ...where, '--run', 'c2', '--key', key, ...pin, '--json'], { env });
    t.equal(broken.code, 3, broken.stderr);
    const doc = JSON.parse(broken.stdout);
    t.ok(
      firstPacks.some((p) => doc.error.object === layout.pack('files', keyId, p)),
      `names a pack of run 1 (${doc.error.object})`,
    );
    t.match(doc.error.message, /the whole jobs\/files\/ prefix/);
  },
);
