/**
 * `coffer-engine keys init` (src/keys-init.ts), run as the built bin (`dist/main.js`, what the
 * image and the `coffer-engine` bin run): both key files 0600 with only public fingerprints
 * printed, refusal to replace anything (exit 7, the existing file untouched), usage errors (exit
 * 2) and a write failure (exit 1) that leave nothing behind, no engine started and no data dir
 * touched; then two engine processes on one PostgreSQL given the same files report the printed
 * fingerprints (docs/operations.md "Running several replicas").
 */
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import {
  decodeKeyFile,
  fingerprint,
  recipientPublicKeyFromSecret,
  signerPublicKeyFromSecret,
} from '@coffer/crypto';
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { BUILT_MAIN as MAIN, startBuiltEngine } from './helpers/built-engine.ts';
import { ADMIN_TOKEN, bearer, http } from './helpers/engine.ts';

const FP = /^sha384:[0-9a-f]{96}$/;

function keys(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [MAIN, 'keys', ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The armoured body lines of a key file (everything but its BEGIN / END lines). */
function bodyLines(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('-----'));
}

function snapshot(file: string) {
  const s = lstatSync(file);
  return {
    ino: s.ino,
    mtimeMs: s.mtimeMs,
    mode: s.mode,
    text: s.isSymbolicLink() ? null : readFileSync(file, 'utf8'),
  };
}

t.test('the built bin exists (pnpm --filter @coffer/engine build)', async (t) => {
  t.ok(existsSync(MAIN), MAIN);
});

t.test('keys init writes both key files 0600 and prints only their public fingerprints', async (t) => {
  const dir = tempDir(t);
  const signer = join(dir, 'signer.key');
  const operational = join(dir, 'operational.key');
  const r = keys(['init', '--signer', signer, '--operational', operational]);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  t.equal(lines.length, 2, 'two lines on stdout');
  const [sLine, oLine] = lines.map((l) => l.split(' '));
  t.equal(sLine?.[0], 'signer');
  t.equal(oLine?.[0], 'operational');
  t.match(sLine?.[1], FP);
  t.match(oLine?.[1], FP);

  t.same(readdirSync(dir).sort(), ['operational.key', 'signer.key'], 'no temporary file left');
  for (const f of [signer, operational]) t.equal(statSync(f).mode & 0o777, 0o600, `${f} is 0600`);

  const s = decodeKeyFile(readFileSync(signer, 'utf8'));
  const o = decodeKeyFile(readFileSync(operational, 'utf8'));
  t.equal(s.kind, 'signer-secret');
  t.equal(o.kind, 'recipient-secret');
  t.equal(
    sLine?.[1],
    fingerprint(signerPublicKeyFromSecret(s.key)),
    'the signer fingerprint is its public key',
  );
  t.equal(oLine?.[1], fingerprint(recipientPublicKeyFromSecret(o.key)), 'the operational one too');

  const printed = r.stdout + r.stderr;
  const secretLines = [...bodyLines(signer), ...bodyLines(operational)].filter((l) => l.length >= 16);
  t.ok(secretLines.length > 0, 'the key files have armoured bodies to look for');
  t.notOk(
    secretLines.some((l) => printed.includes(l) || printed.includes(l.slice(0, 16))),
    'no piece of either secret key is printed',
  );
  t.match(r.stderr, /mode 0600/);

  const json = keys([
    'init',
    '--signer',
    join(dir, 's2.key'),
    '--operational',
    join(dir, 'o2.key'),
    '--json',
  ]);
  t.equal(json.code, 0, json.stderr);
  const doc = JSON.parse(json.stdout);
  t.same(Object.keys(doc).sort(), ['operational', 'signer']);
  t.equal(doc.signer.file, join(dir, 's2.key'));
  t.match(doc.signer.fingerprint, FP);
  t.match(doc.operational.fingerprint, FP);
  t.not(doc.signer.fingerprint, sLine?.[1], 'a new pair each time');
});

t.test('an existing file is never replaced: exit 7, nothing written, the file unchanged', async (t) => {
  const dir = tempDir(t);
  const signer = join(dir, 'signer.key');
  const operational = join(dir, 'operational.key');
  t.equal(keys(['init', '--signer', signer, '--operational', operational]).code, 0);
  const before = { s: snapshot(signer), o: snapshot(operational) };

  const again = keys(['init', '--signer', signer, '--operational', operational]);
  t.equal(again.code, 7, 'both exist');
  t.match(again.stderr, /already exists; refusing to replace a key file/);
  t.equal(again.stdout, '', 'no fingerprint printed for a refusal');

  const fresh = join(dir, 'fresh.key');
  const half = keys(['init', '--signer', fresh, '--operational', operational]);
  t.equal(half.code, 7, 'one of the two exists');
  t.notOk(existsSync(fresh), 'the other was not written either');
  const json = keys(['init', '--signer', signer, '--operational', fresh, '--json']);
  t.equal(json.code, 7);
  t.equal(JSON.parse(json.stdout).error.code, 'ERR_ENGINE_KEYS_EXIST');
  t.notOk(existsSync(fresh));

  const link = join(dir, 'dangling.key');
  symlinkSync(join(dir, 'nowhere'), link);
  t.equal(
    keys(['init', '--signer', join(dir, 'x.key'), '--operational', link]).code,
    7,
    'a dangling symlink',
  );
  t.notOk(existsSync(join(dir, 'nowhere')), 'nothing written through the symlink');
  t.notOk(existsSync(join(dir, 'x.key')));

  t.same({ s: snapshot(signer), o: snapshot(operational) }, before, 'the existing files are untouched');
  t.same(readdirSync(dir).sort(), ['dangling.key', 'operational.key', 'signer.key'], 'nothing else left');
});

t.test('bad arguments: exit 2 and nothing written; a write failure: exit 1 and no half pair', async (t) => {
  const dir = tempDir(t);
  const s = join(dir, 's.key');
  const o = join(dir, 'o.key');
  const cases: [string, string[]][] = [
    ['no subcommand', []],
    ['unknown subcommand', ['rotate', '--signer', s, '--operational', o]],
    ['missing --operational', ['init', '--signer', s]],
    ['missing --signer', ['init', '--operational', o]],
    ['an option without its value', ['init', '--signer', s, '--operational']],
    ['unknown option', ['init', '--signer', s, '--operational', o, '--force']],
    ['one file for both', ['init', '--signer', s, '--operational', join(dir, '.', 's.key')]],
    ['a stray argument', ['init', 'extra', '--signer', s, '--operational', o]],
  ];
  for (const [what, args] of cases) {
    const r = keys(args);
    t.equal(r.code, 2, `${what}: exit 2`);
    t.match(r.stderr, /coffer-engine keys init --signer FILE --operational FILE/, `${what}: usage shown`);
  }
  t.same(readdirSync(dir), [], 'nothing written by any of them');

  const help = keys(['--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /Exit codes: 0 written, 1 could not write, 2 usage, 7 a key file exists/);

  const failed = keys(['init', '--signer', s, '--operational', join(dir, 'missing', 'o.key')]);
  t.equal(failed.code, 1, 'the operational key cannot be written');
  t.match(failed.stderr, /cannot create .*missing\/o\.key \(ENOENT\)/);
  t.same(readdirSync(dir), [], 'the signer written first was removed again: no half pair');
});

t.test('keys init is a command: it starts no engine and never touches the data dir', async (t) => {
  const dir = tempDir(t);
  const dataDir = join(dir, 'data');
  mkdirSync(dataDir);
  const r = keys(['init', '--signer', join(dir, 's.key'), '--operational', join(dir, 'o.key')], {
    ENGINE_DATA_DIR: dataDir,
    ADMIN_TOKEN,
    PORT: '1',
  });
  t.equal(r.code, 0, r.stderr);
  t.same(readdirSync(dataDir), [], 'no instance id, no keys, no state in the data dir');
  t.notMatch(r.stdout, /"event"/, 'no engine log line');
});

t.test('two engines on one PostgreSQL given the same files report the printed fingerprints', async (t) => {
  const dir = tempDir(t);
  const signer = join(dir, 'signer.key');
  const operational = join(dir, 'operational.key');
  const made = keys(['init', '--signer', signer, '--operational', operational, '--json']);
  t.equal(made.code, 0, made.stderr);
  const printed = JSON.parse(made.stdout);
  const db = await postgresUrl();
  const dataDirs = [join(dir, 'replica-a'), join(dir, 'replica-b')];
  const env = (dataDir: string) => ({
    ENGINE_DATA_DIR: dataDir,
    ENGINE_DATABASE_URL: db,
    ENGINE_SIGNER_KEY_FILE: signer,
    ENGINE_OPERATIONAL_KEY_FILE: operational,
  });
  const engines = await Promise.all(dataDirs.map((d) => startBuiltEngine(t, env(d))));
  for (const [i, e] of engines.entries()) {
    const r = await http(`${e.url}/admin/setup-state`, { headers: bearer() });
    t.equal(r.status, 200, r.text);
    const fp = r.json().fingerprints;
    t.equal(fp.signer, printed.signer.fingerprint, `replica ${i}: the printed signer fingerprint`);
    t.equal(fp.operational, printed.operational.fingerprint, `replica ${i}: the printed operational one`);
    t.notOk(existsSync(join(dataDirs[i]!, 'keys', 'signer.key')), `replica ${i}: made no key of its own`);
    t.notOk(
      e.logs.some((l) => l.includes('readable by group or others')),
      `replica ${i}: no warning about the files' mode`,
    );
  }
  const ids = dataDirs.map((d) => readFileSync(join(d, 'instance-id'), 'utf8').trim());
  t.not(ids[0], ids[1], 'each replica keeps its own instance id');
});
