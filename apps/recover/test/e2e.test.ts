// coffer-recover end to end, as a real process, on real archives written by @coffer/archive.
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { decodeKeyFile, recipientPublicKeyFromSecret } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { buildFixture, copyBucket, type Fixture, writeRun } from './fixture.ts';
import { CLI_SRC, type CliTarget, cliArgs, runCli } from './helpers.ts';

let f: Fixture;

t.before(async () => {
  f = await buildFixture(tempDir(t, 'coffer-recover-e2e-'));
});

/** Run r1 of the fixture read with the break-glass key; `to` is extract's output folder. */
const runR1 = (to?: string): CliTarget => ({ from: f.bucket, run: 'r1', key: f.breakGlassKey, to });

const shardKey = (job: string, run: string, i: number) =>
  `jobs/${job}/runs/${run}/shards/${String(i).padStart(6, '0')}.bin`;

t.test('inspect lists jobs, runs, versions, signer, sizes; --json parses', async (t) => {
  const r = await runCli(cliArgs('inspect', { from: f.bucket }));
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /job nightly/);
  t.match(r.stdout, /job weekly/);
  t.match(r.stdout, /r1 .*format 0\.1\.\d+ .*7 records.* ok/);
  t.match(r.stdout, /w1 /);
  t.match(r.stdout, f.signerFingerprint, 'full signer fingerprint listed for pinning');
  t.notMatch(r.stdout, /docs\/readme\.txt/, 'no record names without a key');

  const j = await runCli(cliArgs('inspect', { from: f.bucket }, '--json'));
  t.equal(j.code, 0);
  const doc = JSON.parse(j.stdout);
  t.equal(doc.ok, true);
  t.same(doc.jobs, ['nightly', 'weekly']);
  const r1 = doc.runs.find((x: { runId: string }) => x.runId === 'r1');
  t.equal(r1.formatVersion.slice(0, 4), '0.1.');
  t.equal(r1.signer, f.signerFingerprint);
  t.equal(r1.records, f.records.length);
  t.equal(
    r1.bytes,
    f.records.reduce((n, x) => n + x.data.byteLength, 0),
  );
  t.ok(r1.shards > 1, 'several shards');
  t.equal(r1.check.status, 'ok');
  const r2 = doc.runs.find((x: { runId: string }) => x.runId === 'r2');
  t.equal(r2.prevRunId, 'r1');

  const one = await runCli(cliArgs('inspect', runR1(), '--json'));
  t.equal(one.code, 0, one.stderr);
  const d1 = JSON.parse(one.stdout);
  t.same(
    d1.records.map((x: { name: string }) => x.name),
    f.records.map((x) => x.name),
    'records listed with the key',
  );
  t.equal(d1.signer, f.signerFingerprint);

  const nf = await runCli(cliArgs('inspect', { from: f.bucket, job: 'nope' }));
  t.equal(nf.code, 5);
});

t.test('verify: ok with break-glass, operational and no key; non-TTY prints no progress bar', async (t) => {
  for (const key of [f.breakGlassKey, f.operationalKey]) {
    const r = await runCli(cliArgs('verify', { from: f.bucket, run: 'r1', key }, '--trust-unpinned-signer'));
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /run r1 \(job nightly\): ok/);
    t.notMatch(r.stderr, /\r/, 'no carriage returns: no progress bar when stderr is not a TTY');
  }
  const nk = await runCli(cliArgs('verify', { from: f.bucket, run: 'r1' }, '--trust-unpinned-signer'));
  t.equal(nk.code, 0, nk.stderr);
  t.match(nk.stdout, /records not decrypted/);
  const j = await runCli(cliArgs('verify', runR1(), '--trust-unpinned-signer', '--json'));
  t.equal(j.code, 0);
  const doc = JSON.parse(j.stdout);
  t.equal(doc.verdict.ok, true);
  t.equal(doc.verdict.checks.records, f.records.length);
  const nf = await runCli(
    cliArgs('verify', { from: f.bucket, run: 'nope', key: f.breakGlassKey }, '--trust-unpinned-signer'),
  );
  t.equal(nf.code, 5, nf.stderr);
  const nd = await runCli(
    cliArgs('verify', { from: join(f.dir, 'no-such-dir'), run: 'r1' }, '--trust-unpinned-signer'),
  );
  t.equal(nd.code, 5);
});

t.test('extract writes every record byte for byte, inside DIR, refuses to overwrite', async (t) => {
  const out = join(f.dir, 'out-all');
  const r = await runCli(cliArgs('extract', runR1(out), '--trust-unpinned-signer'));
  t.equal(r.code, 0, r.stderr);
  const expectPath: Record<string, string> = {
    'docs/readme.txt': 'docs/readme.txt',
    'docs/data.bin': 'docs/data.bin',
    empty: 'empty',
    'photos/🐈 cat.jpg': 'photos/🐈 cat.jpg',
    '../escape.txt': '%2E%2E/escape.txt',
    'logs/app.log': 'logs/app.log',
    'user:42:profile': 'user%3A42%3Aprofile',
  };
  for (const rec of f.records) {
    const p = join(out, ...expectPath[rec.name]!.split('/'));
    t.ok(readFileSync(p).equals(rec.data), `${expectPath[rec.name]} byte-for-byte`);
  }
  t.notOk(existsSync(join(f.dir, 'escape.txt')), 'nothing escaped DIR');
  t.equal(statSync(join(out, 'docs', 'readme.txt')).mode & 0o777, 0o640, 'mode from metadata');
  t.equal(statSync(join(out, 'docs', 'readme.txt')).mtime.toISOString(), '2024-01-02T03:04:05.000Z', 'mtime');

  const again = await runCli(cliArgs('extract', runR1(out), '--trust-unpinned-signer'));
  t.equal(again.code, 7, 'refuses to overwrite');
  t.match(again.stderr, /already exists; refusing to overwrite/);
  writeFileSync(join(out, 'empty'), 'changed');
  const forced = await runCli(cliArgs('extract', runR1(out), '--trust-unpinned-signer', '--force'));
  t.equal(forced.code, 0, forced.stderr);
  t.equal(readFileSync(join(out, 'empty'), 'utf8'), '', 'replaced with --force');
});

t.test('extract selection: --include, --exclude, --record; --json', async (t) => {
  const run = async (name: string, ...sel: string[]) => {
    const out = join(f.dir, name);
    const r = await runCli(cliArgs('extract', runR1(out), '--trust-unpinned-signer', '--json', ...sel));
    return { r, out };
  };
  let { r, out } = await run('sel-include', '--include', 'docs/', '--include', 'logs/');
  t.equal(r.code, 0, r.stderr);
  t.same(
    JSON.parse(r.stdout)
      .written.map((w: { name: string }) => w.name)
      .sort(),
    ['docs/data.bin', 'docs/readme.txt', 'logs/app.log'],
  );
  t.same(readdirSync(out).sort(), ['docs', 'logs']);
  ({ r, out } = await run('sel-exclude', '--exclude', 'docs/', '--exclude', '..'));
  t.equal(r.code, 0, r.stderr);
  t.same(readdirSync(out).sort(), ['empty', 'logs', 'photos', 'user%3A42%3Aprofile']);
  ({ r, out } = await run('sel-record', '--record', 'photos/🐈 cat.jpg'));
  t.equal(r.code, 0, r.stderr);
  t.same(readdirSync(join(out, 'photos')), ['🐈 cat.jpg']);
  t.equal(JSON.parse(r.stdout).records, 1);
  ({ r } = await run('sel-missing', '--record', 'no/such/record'));
  t.equal(r.code, 5);
  t.equal(JSON.parse(r.stdout).error.code, 'ERR_RECOVER_NOT_FOUND');
  ({ r } = await run('sel-conflict', '--record', 'empty', '--include', 'x'));
  t.equal(r.code, 2, 'usage error');
});

t.test('records from several namespaces get binding/namespace directories', async (t) => {
  const out = join(f.dir, 'out-weekly');
  const r = await runCli(
    cliArgs(
      'extract',
      { from: f.bucket, run: 'w1', key: f.breakGlassKey, to: out },
      '--trust-unpinned-signer',
    ),
  );
  t.equal(r.code, 0, r.stderr);
  t.equal(readFileSync(join(out, 'main', 'a', 'same'), 'utf8'), 'from main');
  t.equal(readFileSync(join(out, 'main', 'b', 'same'), 'utf8'), 'from other');
});

t.test('two records that map to one path: refused before anything is written', async (t) => {
  const bucket = copyBucket(f, 'dup');
  const breakGlass = decodeKeyFile(readFileSync(`${f.breakGlassKey}.pub`, 'utf8'), 'recipient-public').key;
  const operational = recipientPublicKeyFromSecret(
    decodeKeyFile(readFileSync(f.operationalKey, 'utf8'), 'recipient-secret').key,
  );
  // One source, the same name twice (a run may list a name again; the last one is the current one).
  await writeRun(bucket, 'dup', 'd1', null, f.signer, { operational, breakGlass }, [
    { name: 'first.txt', data: Buffer.from('first') },
    { name: 'twice.txt', data: Buffer.from('one') },
    { name: 'twice.txt', data: Buffer.from('two') },
  ]);
  const out = join(f.dir, 'out-dup');
  const r = await runCli(
    cliArgs('extract', { from: bucket, run: 'd1', key: f.breakGlassKey, to: out }, '--trust-unpinned-signer'),
  );
  t.equal(r.code, 7, r.stderr);
  t.match(
    r.stderr,
    /records "twice\.txt" and "twice\.txt" both map to .*twice\.txt; extract them separately/,
  );
  t.notOk(existsSync(join(out, 'first.txt')), 'not even the record before them was written');
});

t.test('--pin-signer: the right fingerprint passes, another exits 8', async (t) => {
  const ok = await runCli(cliArgs('verify', runR1(), '--pin-signer', f.signerFingerprint));
  t.equal(ok.code, 0, ok.stderr);
  t.match(ok.stdout, /pinned signer/);
  const other = `sha384:${'ab'.repeat(48)}`;
  for (const cmd of [
    cliArgs('verify', runR1()),
    cliArgs('verify', { from: f.bucket, run: 'r1' }),
    cliArgs('extract', runR1(join(f.dir, 'pin-out'))),
    cliArgs('inspect', { from: f.bucket, run: 'r1' }),
  ]) {
    const r = await runCli([...cmd, '--pin-signer', other]);
    t.equal(r.code, 8, `${cmd[0]} exits 8`);
    t.match(r.stderr, /ERR_RECOVER_SIGNER_NOT_PINNED/);
  }
  t.notOk(
    existsSync(join(f.dir, 'pin-out')) && readdirSync(join(f.dir, 'pin-out')).length > 0,
    'nothing extracted',
  );
  const bad = await runCli(cliArgs('verify', { from: f.bucket, run: 'r1' }, '--pin-signer', 'sha384:xyz'));
  t.equal(bad.code, 2, 'malformed fingerprint is a usage error');
});

t.test('no pin: verify and extract refuse (exit 10) and print the fingerprint to pin', async (t) => {
  const out = join(f.dir, 'unpinned-out');
  for (const cmd of [
    cliArgs('verify', runR1()),
    cliArgs('verify', { from: f.bucket, run: 'r1' }),
    cliArgs('extract', runR1(out)),
  ]) {
    const r = await runCli(cmd);
    t.equal(r.code, 10, `${cmd[0]} without a pin exits 10 (${cmd.includes('--key') ? 'key' : 'no key'})`);
    t.match(r.stderr, /ERR_RECOVER_SIGNER_UNPINNED/);
    t.match(r.stderr, `--pin-signer ${f.signerFingerprint}`, 'the fingerprint to pin is printed');
    const j = await runCli([...cmd, '--json']);
    t.equal(j.code, 10);
    t.match(JSON.parse(j.stdout || j.stderr).error, { code: 'ERR_RECOVER_SIGNER_UNPINNED' });
  }
  t.notOk(existsSync(out) && readdirSync(out).length > 0, 'nothing extracted');
  // A key on stdin is not even read: the refusal comes first.
  const stdin = await runCli(cliArgs('verify', { from: f.bucket, run: 'r1', key: '-' }), {
    input: 'not a key',
  });
  t.equal(stdin.code, 10, stdin.stderr);

  // The printed fingerprint is the one to pin: passing it succeeds.
  const fp = /--pin-signer (sha384:[0-9a-f]{96})/.exec(
    (await runCli(cliArgs('verify', { from: f.bucket, run: 'r1' }))).stderr,
  )?.[1];
  t.equal(fp, f.signerFingerprint);
  const pinned = await runCli(cliArgs('verify', runR1(), '--pin-signer', fp!));
  t.equal(pinned.code, 0, pinned.stderr);

  // Trusting the unpinned signer must be said explicitly, and is repeated on stderr.
  const trusted = await runCli(cliArgs('verify', runR1(), '--trust-unpinned-signer'));
  t.equal(trusted.code, 0, trusted.stderr);
  t.match(trusted.stderr, /signer was not pinned/);
  const both = await runCli(
    cliArgs('extract', runR1(out), '--pin-signer', f.signerFingerprint, '--trust-unpinned-signer'),
  );
  t.equal(both.code, 2, 'the two flags together are a usage error');

  // A tampered run is still a verification failure (3), not a request to pin its signer.
  const bucket = copyBucket(f, 'unpinned-tampered');
  const sig = join(bucket, 'jobs/nightly/runs/r1/manifest.sig');
  writeFileSync(sig, readFileSync(sig, 'utf8').replace('"signature":"A', '"signature":"B'));
  const bad = await runCli(cliArgs('verify', { from: bucket, run: 'r1' }));
  t.equal(bad.code, 3, bad.stderr);
});

t.test('key problems exit 4', async (t) => {
  const dir = tempDir(t, 'coffer-recover-keys-');
  const other = join(dir, 'other.key');
  t.equal((await runCli(['keygen', '--out', other])).code, 0);
  const wrong = await runCli(
    cliArgs('verify', { from: f.bucket, run: 'r1', key: other }, '--trust-unpinned-signer'),
  );
  t.equal(wrong.code, 4, wrong.stderr);
  t.match(wrong.stderr, /ERR_RECOVER_KEY/);
  const wrongX = await runCli(
    cliArgs(
      'extract',
      { from: f.bucket, run: 'r1', key: other, to: join(dir, 'o') },
      '--trust-unpinned-signer',
    ),
  );
  t.equal(wrongX.code, 4);
  const pub = await runCli(
    cliArgs(
      'verify',
      { from: f.bucket, run: 'r1', key: `${f.breakGlassKey}.pub` },
      '--trust-unpinned-signer',
    ),
  );
  t.equal(pub.code, 4);
  t.match(pub.stderr, /is a public key; pass the secret key file/);
  const missing = await runCli(
    cliArgs('verify', { from: f.bucket, run: 'r1', key: join(dir, 'absent.key') }, '--trust-unpinned-signer'),
  );
  t.equal(missing.code, 4);
  t.match(missing.stderr, /no such file/);
  writeFileSync(join(dir, 'garbage.key'), 'not a key at all\n');
  const garbage = await runCli(
    cliArgs(
      'verify',
      { from: f.bucket, run: 'r1', key: join(dir, 'garbage.key') },
      '--trust-unpinned-signer',
    ),
  );
  t.equal(garbage.code, 4);
  const stdin = await runCli(
    cliArgs('verify', { from: f.bucket, run: 'r1', key: '-' }, '--trust-unpinned-signer'),
    {
      input: readFileSync(f.breakGlassKey, 'utf8'),
    },
  );
  t.equal(stdin.code, 0, `--key - reads stdin: ${stdin.stderr}`);
});

t.test(
  'a tampered shard: verify exits 3 naming the object; extract never shows the bad record',
  async (t) => {
    const bucket = copyBucket(f, 'bucket-tampered');
    const key = shardKey('nightly', 'r1', 1);
    const file = join(bucket, ...key.split('/'));
    const bytes = readFileSync(file);
    bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
    writeFileSync(file, bytes);
    for (const withKey of [true, false]) {
      const r = await runCli(
        cliArgs(
          'verify',
          { from: bucket, run: 'r1' },
          '--trust-unpinned-signer',
          ...(withKey ? ['--key', f.breakGlassKey] : []),
        ),
      );
      t.equal(r.code, 3, `verify exits 3 (key: ${withKey})`);
      const lines = r.stderr
        .trim()
        .split('\n')
        .filter((l) => l.includes('ERR_RECOVER_VERIFY_FAILED'));
      t.equal(lines.length, 1, 'one error line');
      t.match(lines[0], key, 'the line names the tampered object');
    }
    const j = await runCli(
      cliArgs(
        'verify',
        { from: bucket, run: 'r1', key: f.breakGlassKey },
        '--trust-unpinned-signer',
        '--json',
      ),
    );
    const doc = JSON.parse(j.stdout);
    t.equal(doc.ok, false);
    t.equal(doc.error.code, 'ERR_RECOVER_VERIFY_FAILED');
    t.equal(doc.error.object, key);
    const out = join(f.dir, 'out-tampered');
    const x = await runCli(
      cliArgs(
        'extract',
        { from: bucket, run: 'r1', key: f.breakGlassKey, to: out },
        '--trust-unpinned-signer',
      ),
    );
    t.equal(x.code, 3);
    t.notOk(existsSync(join(out, 'docs', 'data.bin')), 'the record in the tampered shard never appears');
    for (const name of existsSync(join(out, 'docs')) ? readdirSync(join(out, 'docs')) : []) {
      t.notMatch(name, /\.tmp$/, 'no temporary file left');
    }
  },
);

t.test('a missing shard exits 3', async (t) => {
  const bucket = copyBucket(f, 'bucket-missing');
  rmSync(join(bucket, ...shardKey('nightly', 'r1', 0).split('/')));
  const r = await runCli(
    cliArgs('verify', { from: bucket, run: 'r1', key: f.breakGlassKey }, '--trust-unpinned-signer'),
  );
  t.equal(r.code, 3, r.stderr);
  t.match(r.stderr, shardKey('nightly', 'r1', 0));
});

t.test('an 8 GiB object in place of index.bin or a shard exits 3, within a small heap', async (t) => {
  // A sparse file costs no disk. The CLI runs with a 64 MiB heap and a 7 GiB address space, so
  // reading the object whole would crash it (no exit 3) instead of passing.
  const index = 'jobs/nightly/runs/r1/index.bin';
  const shard = shardKey('nightly', 'r1', 0);
  for (const object of [index, shard]) {
    const bucket = copyBucket(f, `bucket-huge-${object === index ? 'index' : 'shard'}`);
    truncateSync(join(bucket, ...object.split('/')), 8 * 1024 ** 3);
    const pin = ['--pin-signer', f.signerFingerprint];
    for (const args of [
      cliArgs('verify', { from: bucket, run: 'r1', key: f.breakGlassKey }, ...pin),
      cliArgs('verify', { from: bucket, run: 'r1' }, ...pin),
      cliArgs('extract', { from: bucket, run: 'r1', key: f.breakGlassKey, to: join(bucket, 'x') }, ...pin),
    ]) {
      const quoted = [process.execPath, '--max-old-space-size=64', CLI_SRC, ...args]
        .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
        .join(' ');
      const r = spawnSync('sh', ['-c', `ulimit -v ${7 * 1024 * 1024} && exec ${quoted}`], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' },
      });
      const what = `${args[0]}${args.includes('--key') ? '' : ' (no key)'} with a huge ${object === index ? 'index' : 'shard'}`;
      t.equal(r.status, 3, `${what} exits 3: ${r.stderr.slice(-300)}`);
      t.match(r.stderr, object, `${what} names the object`);
    }
  }
});

t.test('a doctored format version exits 6 (the specification requires it)', async (t) => {
  const bucket = copyBucket(f, 'bucket-version');
  const manifest = join(bucket, 'jobs', 'nightly', 'runs', 'r1', 'manifest.json');
  const doc = JSON.parse(readFileSync(manifest, 'utf8'));
  doc.formatVersion = '0.3.0';
  writeFileSync(manifest, JSON.stringify(doc));
  for (const cmd of [
    cliArgs('verify', { from: bucket, run: 'r1', key: f.breakGlassKey }, '--trust-unpinned-signer'),
    cliArgs('verify', { from: bucket, run: 'r1' }, '--trust-unpinned-signer'),
    cliArgs(
      'extract',
      { from: bucket, run: 'r1', key: f.breakGlassKey, to: join(f.dir, 'out-version') },
      '--trust-unpinned-signer',
    ),
    cliArgs('inspect', { from: bucket, run: 'r1' }),
  ]) {
    const r = await runCli(cmd);
    t.equal(r.code, 6, `${cmd[0]} exits 6: ${r.stderr}`);
    t.match(r.stderr, /ERR_RECOVER_UNSUPPORTED_VERSION/);
  }
  const list = await runCli(cliArgs('inspect', { from: bucket }, '--json'));
  t.equal(list.code, 0, 'listing still works');
  const r1 = JSON.parse(list.stdout).runs.find((x: { runId: string }) => x.runId === 'r1');
  t.equal(r1.formatVersion, '0.3.0', 'inspect shows the version it found');
  t.equal(r1.check.exitCode, 6);
});

t.test('usage errors exit 2; help and version exit 0', async (t) => {
  t.equal((await runCli([])).code, 0);
  t.equal((await runCli(['help', 'extract'])).code, 0);
  t.equal((await runCli(['version'])).code, 0);
  t.equal((await runCli(['frobnicate'])).code, 2);
  t.equal(
    (await runCli(cliArgs('verify', { from: f.bucket }, '--trust-unpinned-signer'))).code,
    2,
    'missing --run',
  );
  t.equal((await runCli(cliArgs('extract', runR1(), '--trust-unpinned-signer'))).code, 2, 'missing --to');
  t.equal(
    (
      await runCli(
        cliArgs(
          'verify',
          { from: f.bucket, run: 'r1' },
          '--trust-unpinned-signer',
          '--endpoint',
          'http://127.0.0.1:1',
        ),
      )
    ).code,
    2,
  );
  t.ok(lstatSync(f.bucket).isDirectory());
});

t.test('a terminal gets a progress bar on stderr (through a real pty via script(1))', async (t) => {
  const probe = spawnSync('script', ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    // Without util-linux's script(1) there is no pty to test with; the bar's own unit test
    // (cli-units.test.ts) still covers drawing, and the non-TTY case is asserted above.
    t.pass('script(1) not available; pty check not possible here');
    return;
  }
  const cmd = [process.execPath, CLI_SRC, ...cliArgs('verify', runR1(), '--pin-signer', f.signerFingerprint)]
    .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
    .join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], {
    encoding: 'utf8',
    env: { ...process.env, COLUMNS: '100' },
  });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /\rverify \[/, 'bar drawn on the terminal');
  t.match(r.stdout, /run r1 \(job nightly\): ok/);
  const quiet = spawnSync('script', ['-qec', `${cmd} --no-progress`, '/dev/null'], { encoding: 'utf8' });
  t.notMatch(quiet.stdout, /\rverify \[/, '--no-progress turns it off');
});
