// Marker secrets planted in credentials, key files, stdin, argv and record bytes must never be
// printed by coffer-recover, on any path (success, failure, --json).
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { decodeKeyFile, encodeKeyFile, generateRecipient, generateSigner } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { copyBucket, type Fixture, writeRun } from './fixture.ts';
import { type CliResult, cliArgs, runCli } from './helpers.ts';

const MARKER = 'MARKER-c0ffee-5ecret-9f3a';

function clean(t: Test, r: CliResult, what: string, extra: string[] = []): void {
  const all = r.stdout + r.stderr;
  t.notOk(all.includes(MARKER), `${what}: marker never printed`);
  for (const s of extra) t.notOk(all.includes(s), `${what}: key material never printed`);
}

/** A port on loopback nothing listens on (bound then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

t.test('S3 credentials from the environment are never printed', async (t) => {
  const port = await closedPort();
  const env = { AWS_ACCESS_KEY_ID: `AKIA${MARKER}`, AWS_SECRET_ACCESS_KEY: MARKER };
  for (const json of [false, true]) {
    for (const cmd of [
      ['inspect', '--from', 's3://bucket/prefix', '--endpoint', `http://127.0.0.1:${port}`, '--path-style'],
      [
        'verify',
        '--trust-unpinned-signer',
        '--from',
        's3://bucket/prefix',
        '--run',
        'r1',
        '--endpoint',
        `http://127.0.0.1:${port}`,
        '--path-style',
      ],
    ]) {
      const r = await runCli([...cmd, ...(json ? ['--json'] : [])], { env });
      t.not(r.code, 0, `${cmd[0]} fails against a closed port`);
      clean(t, r, `${cmd[0]} json=${json}`);
    }
  }
  const half = await runCli(['inspect', '--from', 's3://b/p'], { env: { AWS_SECRET_ACCESS_KEY: MARKER } });
  t.equal(half.code, 2, 'only one of the two variables set is a usage error');
  clean(t, half, 'half credentials');
});

t.test('credentials or secrets on argv are refused and not echoed', async (t) => {
  for (const args of [
    [
      'verify',
      '--trust-unpinned-signer',
      '--from',
      's3://b/p',
      '--run',
      'r',
      `--secret-access-key=${MARKER}`,
    ],
    [
      'verify',
      '--trust-unpinned-signer',
      '--from',
      's3://b/p',
      '--run',
      'r',
      '--aws-secret-access-key',
      MARKER,
    ],
    ['verify', '--trust-unpinned-signer', '--from', 's3://b/p', '--run', 'r', MARKER],
    ['extract', MARKER],
    [MARKER],
  ]) {
    for (const json of [false, true]) {
      const r = await runCli([...args, ...(json ? ['--json'] : [])]);
      t.equal(r.code, 2);
      clean(t, r, `argv case ${args.length}/${json}`);
    }
  }
});

t.test('key files: damaged, wrong kind, stdin; and real key material never printed', async (t) => {
  const dir = tempDir(t, 'coffer-recover-secrets-');
  const bucket = join(dir, 'bucket');
  const signer = generateSigner();
  const op = generateRecipient();
  const bg = generateRecipient();
  await writeRun(
    bucket,
    'job1',
    'run1',
    null,
    signer,
    { operational: op.publicKey, breakGlass: bg.publicKey },
    [
      { name: 'secret.txt', data: Buffer.from(`payload ${MARKER} payload`) },
      {
        name: 'big.bin',
        data: Buffer.concat(Array.from({ length: 40 }, () => Buffer.from(`${MARKER}\n`.repeat(200)))),
      },
    ],
  );
  const keyText = encodeKeyFile('recipient-secret', bg.secretKey);
  const keyFile = join(dir, 'bg.key');
  writeFileSync(keyFile, keyText, { mode: 0o600 });
  // Every base64 line of the armoured secret key: none may appear in any output.
  const keyLines = keyText.split('\n').filter((l) => /^[A-Za-z0-9+/=]{16,}$/.test(l));
  t.ok(keyLines.length > 0);
  const keyHex = Buffer.from(bg.secretKey).toString('hex').slice(0, 32);

  // A damaged key file that carries the marker in its body.
  const damaged = join(dir, 'damaged.key');
  writeFileSync(damaged, keyText.replace(keyLines[0]!, `${MARKER}${keyLines[0]!.slice(MARKER.length)}`), {
    mode: 0o600,
  });
  const plain = join(dir, 'plain.key');
  writeFileSync(plain, `${MARKER}\n`, { mode: 0o600 });
  const loose = join(dir, 'loose.key');
  writeFileSync(loose, keyText, { mode: 0o644 });

  const runs: [string, string[], { input?: string }][] = [
    [
      'verify ok',
      cliArgs('verify', { from: bucket, run: 'run1', key: keyFile }, '--trust-unpinned-signer'),
      {},
    ],
    [
      'verify json',
      cliArgs('verify', { from: bucket, run: 'run1', key: keyFile }, '--trust-unpinned-signer', '--json'),
      {},
    ],
    ['inspect records', cliArgs('inspect', { from: bucket, run: 'run1', key: keyFile }, '--json'), {}],
    [
      'extract',
      cliArgs(
        'extract',
        { from: bucket, run: 'run1', key: keyFile, to: join(dir, 'out') },
        '--trust-unpinned-signer',
      ),
      {},
    ],
    [
      'damaged key',
      cliArgs('verify', { from: bucket, run: 'run1', key: damaged }, '--trust-unpinned-signer'),
      {},
    ],
    [
      'damaged key json',
      cliArgs('verify', { from: bucket, run: 'run1', key: damaged }, '--trust-unpinned-signer', '--json'),
      {},
    ],
    [
      'not a key',
      cliArgs(
        'extract',
        { from: bucket, run: 'run1', key: plain, to: join(dir, 'o2') },
        '--trust-unpinned-signer',
      ),
      {},
    ],
    [
      'stdin marker',
      cliArgs('verify', { from: bucket, run: 'run1', key: '-' }, '--trust-unpinned-signer'),
      { input: `${MARKER}\n` },
    ],
    [
      'stdin key',
      cliArgs('verify', { from: bucket, run: 'run1', key: '-' }, '--trust-unpinned-signer', '--json'),
      { input: keyText },
    ],
    [
      'loose mode',
      cliArgs('verify', { from: bucket, run: 'run1', key: loose }, '--trust-unpinned-signer'),
      {},
    ],
  ];
  for (const [what, args, opts] of runs) {
    const r = await runCli(args, opts);
    if (what.includes('damaged') || what.includes('not a key') || what === 'stdin marker')
      t.equal(r.code, 4, what);
    else t.equal(r.code, 0, `${what}: ${r.stderr}`);
    clean(t, r, what, [...keyLines, keyHex]);
  }
  t.ok(decodeKeyFile(readFileSync(keyFile, 'utf8')).kind === 'recipient-secret', 'key file untouched');

  // Tampered data: the failing paths must not print record bytes either.
  const fx = { dir, bucket } as Fixture;
  const tampered = copyBucket(fx, 'tampered');
  const shard = join(tampered, 'jobs', 'job1', 'runs', 'run1', 'shards', '000000.bin');
  const b = readFileSync(shard);
  b[b.length - 20]! ^= 0xff;
  writeFileSync(shard, b);
  for (const args of [
    cliArgs('verify', { from: tampered, run: 'run1', key: keyFile }, '--trust-unpinned-signer'),
    cliArgs('verify', { from: tampered, run: 'run1', key: keyFile }, '--trust-unpinned-signer', '--json'),
    cliArgs(
      'extract',
      { from: tampered, run: 'run1', key: keyFile, to: join(dir, 'o3') },
      '--trust-unpinned-signer',
      '--json',
    ),
  ]) {
    const r = await runCli(args);
    t.equal(r.code, 3);
    clean(t, r, `tampered ${args[0]}`, [...keyLines, keyHex]);
  }
});
