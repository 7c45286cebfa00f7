// The air-gapped bundle runs on its own: copied alone into an empty directory (no node_modules
// anywhere above it), `node coffer-recover.mjs` runs keygen and verify.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { buildFixture, copyBucket } from './fixture.ts';
import { APP_ROOT, cliArgs, runCli } from './helpers.ts';

const BUNDLE = join(APP_ROOT, 'dist', 'coffer-recover.mjs');

t.test('dist/coffer-recover.mjs runs keygen and verify by itself', async (t) => {
  t.ok(existsSync(BUNDLE), 'bundle built (pnpm --filter @coffer/recover build)');
  if (!existsSync(BUNDLE)) return;
  const text = readFileSync(BUNDLE, 'utf8');
  t.ok(text.startsWith('#!/usr/bin/env node\n'), 'shebang');
  t.ok((statSync(BUNDLE).mode & 0o111) !== 0, 'executable');
  t.notMatch(text, /from ['"]@coffer\//, 'no import of a workspace package left');
  t.notMatch(text, /from ['"]@(noble|aws-sdk)\//, 'no import of a dependency left');

  // An isolated directory under the OS temp dir: nothing to resolve packages from.
  const alone = tempDir(t, 'coffer-recover-bundle-');
  t.ok(alone.startsWith(tmpdir()));
  const copy = join(alone, 'coffer-recover.mjs');
  copyFileSync(BUNDLE, copy);
  const run = (args: string[], input?: string) =>
    runCli(args, { entry: copy, cwd: alone, ...(input ? { input } : {}) });

  const v = await run(['version']);
  t.equal(v.code, 0);
  t.match(v.stdout, /^coffer-recover \d+\.\d+\.\d+/);
  const kg = await run(['keygen', '--out', join(alone, 'bg.key')]);
  t.equal(kg.code, 0, kg.stderr);
  t.match(kg.stdout.trim(), /^sha384:[0-9a-f]{96}$/);
  t.equal(statSync(join(alone, 'bg.key')).mode & 0o777, 0o600);

  const f = await buildFixture(tempDir(t, 'coffer-recover-bundle-fx-'));
  const ok = await run(
    cliArgs(
      'verify',
      { from: f.bucket, run: 'r1', key: f.breakGlassKey },
      '--pin-signer',
      f.signerFingerprint,
    ),
  );
  t.equal(ok.code, 0, ok.stderr);
  t.match(ok.stdout, /run r1 \(job nightly\): ok/);
  const x = await run(
    cliArgs(
      'extract',
      { from: f.bucket, run: 'r1', key: f.breakGlassKey, to: join(alone, 'out') },
      '--trust-unpinned-signer',
      '--record',
      'docs/readme.txt',
    ),
  );
  t.equal(x.code, 0, x.stderr);
  t.equal(readFileSync(join(alone, 'out', 'docs', 'readme.txt'), 'utf8'), 'hello from coffer\n');

  const bad = copyBucket(f, 'bad');
  const manifest = join(bad, 'jobs', 'nightly', 'runs', 'r1', 'manifest.json');
  const doc = JSON.parse(readFileSync(manifest, 'utf8'));
  doc.formatVersion = '1.0.0';
  writeFileSync(manifest, JSON.stringify(doc));
  const six = await run(
    cliArgs('verify', { from: bad, run: 'r1', key: f.breakGlassKey }, '--trust-unpinned-signer'),
  );
  t.equal(six.code, 6, 'unsupported format version exits 6 from the bundle too');

  // A Node without zstd (the machine's own /usr/bin/node may be one): decrypting commands refuse
  // plainly instead of calling a good archive damaged; keygen still works.
  const old = '/usr/bin/node';
  const probe = existsSync(old)
    ? spawnSync(old, ['-e', "process.stdout.write(typeof require('zlib').zstdDecompressSync)"], {
        encoding: 'utf8',
      })
    : null;
  if (probe?.status === 0 && probe.stdout === 'undefined') {
    const x2 = spawnSync(
      old,
      [
        copy,
        ...cliArgs('extract', { from: f.bucket, run: 'r1', key: f.breakGlassKey, to: join(alone, 'o2') }),
      ],
      { encoding: 'utf8' },
    );
    t.equal(x2.status, 1, 'old Node: extract exits 1');
    t.match(x2.stderr, /no zstd in node:zlib; reading archives needs Node 22\.15\+/);
    t.match(x2.stderr, /ERR_RECOVER_RUNTIME/);
    t.notOk(existsSync(join(alone, 'o2')), 'nothing written');
  } else {
    t.pass('no zstd-less Node on this machine to check the runtime refusal with');
  }
  const s3 = await run(
    cliArgs('inspect', { from: 's3://b/p' }, '--endpoint', 'http://127.0.0.1:9', '--path-style', '--json'),
  );
  t.equal(JSON.parse(s3.stdout).ok, false, 'the S3 driver loads inside the bundle');
});
