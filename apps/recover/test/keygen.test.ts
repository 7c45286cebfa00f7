// `coffer-recover keygen --out FILE`: file modes, refusals, the fingerprint on stdout.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeKeyFile, fingerprint, recipientPublicKeyFromSecret } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { CLI_SRC, runCli } from './helpers.ts';

const FP = /^sha384:[0-9a-f]{96}$/;

t.test('writes FILE (0600) and FILE.pub, prints only the fingerprint on stdout', async (t) => {
  const dir = tempDir(t, 'coffer-recover-keygen-');
  const file = join(dir, 'break-glass.key');
  const r = await runCli(['keygen', '--out', file]);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  t.equal(lines.length, 1, 'one line on stdout');
  t.match(lines[0], FP);
  t.equal(statSync(file).mode & 0o777, 0o600, 'secret key file mode 0600');
  t.equal(statSync(`${file}.pub`).mode & 0o777, 0o644, 'public key file mode 0644');
  const secret = decodeKeyFile(readFileSync(file, 'utf8'), 'recipient-secret');
  const pub = decodeKeyFile(readFileSync(`${file}.pub`, 'utf8'), 'recipient-public');
  t.equal(fingerprint(pub.key), lines[0], 'printed fingerprint is the public key file fingerprint');
  t.equal(fingerprint(recipientPublicKeyFromSecret(secret.key)), lines[0], 'the two files are one pair');
  t.notMatch(r.stderr, readFileSync(file, 'utf8').split('\n')[4] ?? 'x', 'secret key text never printed');
});

t.test('a umask cannot loosen the secret file mode', async (t) => {
  const dir = tempDir(t, 'coffer-recover-keygen-');
  const file = join(dir, 'k');
  // A permissive umask in the child: the mode must still be exactly 0600.
  const r = spawnSync(
    'sh',
    ['-c', 'umask 000 && exec "$0" "$1" keygen --out "$2"', process.execPath, CLI_SRC, file],
    {
      encoding: 'utf8',
    },
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(statSync(file).mode & 0o777, 0o600);
  t.equal(statSync(`${file}.pub`).mode & 0o777, 0o644);
});

t.test('refuses to overwrite FILE or FILE.pub (exit 7), even a dangling symlink', async (t) => {
  const dir = tempDir(t, 'coffer-recover-keygen-');
  const file = join(dir, 'k');
  writeFileSync(file, 'precious');
  let r = await runCli(['keygen', '--out', file]);
  t.equal(r.code, 7);
  t.match(r.stderr, /already exists; refusing to overwrite/);
  t.match(r.stderr, /\[ERR_RECOVER_EXISTS\]/);
  t.equal(readFileSync(file, 'utf8'), 'precious');
  t.notOk(existsSync(`${file}.pub`), 'nothing written');

  const file2 = join(dir, 'k2');
  writeFileSync(`${file2}.pub`, 'old pub');
  r = await runCli(['keygen', '--out', file2]);
  t.equal(r.code, 7);
  t.notOk(existsSync(file2), 'secret not written when FILE.pub exists');
  t.equal(readFileSync(`${file2}.pub`, 'utf8'), 'old pub');

  const file3 = join(dir, 'k3');
  symlinkSync(join(dir, 'elsewhere'), file3);
  r = await runCli(['keygen', '--out', file3]);
  t.equal(r.code, 7);
  t.notOk(existsSync(join(dir, 'elsewhere')), 'dangling symlink not followed');
  t.equal(r.stdout, '');
});

t.test('--json, usage errors and a missing directory', async (t) => {
  const dir = tempDir(t, 'coffer-recover-keygen-');
  const r = await runCli(['keygen', '--out', join(dir, 'j.key'), '--json']);
  t.equal(r.code, 0);
  const doc = JSON.parse(r.stdout);
  t.equal(doc.ok, true);
  t.match(doc.fingerprint, FP);
  t.equal(doc.secretKeyFile, join(dir, 'j.key'));

  const u = await runCli(['keygen', '--json']);
  t.equal(u.code, 2);
  t.equal(JSON.parse(u.stdout).error.code, 'ERR_RECOVER_USAGE');

  const m = await runCli(['keygen', '--out', join(dir, 'no', 'such', 'dir', 'k')]);
  t.equal(m.code, 1);
  t.match(m.stderr, /no such file or directory \(ENOENT\)/);
});
