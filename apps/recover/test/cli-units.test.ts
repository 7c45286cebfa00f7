// Argument parsing, the error-code tables and the progress bar, in process.
import { ARCHIVE_ERROR_CODES } from '@coffer/archive';
import { CRYPTO_ERROR_CODES } from '@coffer/crypto';
import { OBJECTSTORE_ERROR_CODES } from '@coffer/objectstore';
import t from 'tap';
import { RECOVER_ERROR_CODES } from '../src/errors.ts';
import { EXIT } from '../src/exit-codes.ts';
import { parseCommandLine } from '../src/internal/args.ts';
import { oneLine } from '../src/internal/output.ts';
import { Progress } from '../src/internal/progress.ts';
import { CODE_MAP, mapCode, toRecoverError } from '../src/internal/translate.ts';

function usageCode(argv: string[]): string {
  try {
    parseCommandLine(argv);
    return 'parsed';
  } catch (e) {
    return (e as { code: string }).code;
  }
}

t.test('parses commands, repeated options and global flags anywhere', async (t) => {
  const c = parseCommandLine([
    '--json',
    'extract',
    '--from',
    '/b',
    '--run',
    'r1',
    '--key',
    'k',
    '--to',
    'out',
    '--include',
    'a/',
    '--include',
    'b/',
    '--exclude',
    'a/x',
    '--no-progress',
  ]);
  t.equal(c.name, 'extract');
  t.equal(c.json, true);
  t.equal(c.progress, false);
  if (c.name === 'extract') {
    t.same(c.include, ['a/', 'b/']);
    t.same(c.exclude, ['a/x']);
    t.equal(c.force, false);
  }
  const v = parseCommandLine([
    'verify',
    '--from',
    's3://bkt/pre',
    '--run',
    'r',
    '--endpoint',
    'http://127.0.0.1:9000',
    '--path-style',
    '--pin-signer',
    `SHA384:${'AB'.repeat(48)}`,
  ]);
  if (v.name === 'verify') {
    t.equal(v.store.pathStyle, true);
    t.equal(v.pinSigner, `sha384:${'ab'.repeat(48)}`, 'fingerprint normalised to lower case');
  }
  t.equal(parseCommandLine(['help']).name, 'help');
  t.equal(parseCommandLine(['verify', '--help']).name, 'help');
  t.equal(parseCommandLine(['--version']).name, 'version');
});

t.test('usage errors', async (t) => {
  for (const argv of [
    ['nope'],
    ['--from', 'x'],
    ['toString'],
    ['verify', '--trust-unpinned-signer', '--from', 'x'],
    ['verify', '--trust-unpinned-signer', '--from', 'x', '--run', 'r', 'extra'],
    ['verify', '--trust-unpinned-signer', '--from', 'x', '--run', 'r', '--unknown'],
    ['verify', '--trust-unpinned-signer', '--from', 'x', '--run', 'r', '--region', 'eu'],
    ['verify', '--trust-unpinned-signer', '--from', 'x', '--run', ''],
    ['verify', '--from', 'x', '--run', 'r', '--pin-signer', 'sha256:abc'],
    [
      'extract',
      '--trust-unpinned-signer',
      '--from',
      'x',
      '--run',
      'r',
      '--key',
      'k',
      '--to',
      'o',
      '--record',
      'a',
      '--exclude',
      'b',
    ],
    ['keygen'],
    ['inspect', '--from', 'x', '--key', 'k'],
    ['help', 'nope'],
  ]) {
    t.equal(usageCode(argv), 'ERR_RECOVER_USAGE', argv.join(' '));
  }
});

t.test('credentials on the command line are refused without echoing them', async (t) => {
  for (const opt of [
    '--secret-access-key=MARKER-1',
    '--access-key-id',
    '--aws-secret',
    '--password=MARKER-1',
    '--token',
  ]) {
    try {
      parseCommandLine(['verify', '--trust-unpinned-signer', '--from', 's3://b', '--run', 'r', opt]);
      t.fail('parsed');
    } catch (e) {
      const msg = (e as Error).message;
      t.match(msg, /AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
      t.notMatch(msg, /MARKER/);
    }
  }
  try {
    parseCommandLine([
      'verify',
      '--trust-unpinned-signer',
      '--from',
      'x',
      '--run',
      'r',
      'MARKER-pasted-secret',
    ]);
  } catch (e) {
    t.notMatch((e as Error).message, /MARKER/, 'stray argument not echoed');
  }
});

t.test('every dependency error code maps to one of ours', async (t) => {
  for (const code of [...ARCHIVE_ERROR_CODES, ...CRYPTO_ERROR_CODES, ...OBJECTSTORE_ERROR_CODES]) {
    t.ok(CODE_MAP[code] !== undefined, `${code} mapped`);
  }
  for (const target of Object.values(CODE_MAP)) t.ok(target in RECOVER_ERROR_CODES);
  t.equal(mapCode('ERR_ARCHIVE_UNSUPPORTED_VERSION'), 'ERR_RECOVER_UNSUPPORTED_VERSION');
  t.equal(RECOVER_ERROR_CODES.ERR_RECOVER_UNSUPPORTED_VERSION, 6, 'exit 6 as the specification requires');
  t.equal(mapCode('ERR_ARCHIVE_SOMETHING_NEW'), 'ERR_RECOVER_VERIFY_FAILED', 'unknown archive faults refuse');
  t.equal(mapCode('ERR_ARCHIVE_DESTINATION', 'ERR_OBJECTSTORE_NOT_FOUND'), 'ERR_RECOVER_NOT_FOUND');
  const e = toRecoverError(
    Object.assign(new Error('shard tampered: object jobs/j/runs/r/shards/000001.bin'), {
      code: 'ERR_ARCHIVE_SHARD_TAMPERED',
      object: 'jobs/j/runs/r/shards/000001.bin',
    }),
    'run r',
  );
  t.equal(e.exitCode, EXIT.VERIFY_FAILED);
  t.equal(e.object, 'jobs/j/runs/r/shards/000001.bin');
  t.equal(e.message, 'run r: shard tampered: object jobs/j/runs/r/shards/000001.bin');
  const amb = toRecoverError(
    Object.assign(new Error('run id exists under several jobs: run r'), {
      code: 'ERR_ARCHIVE_AMBIGUOUS_RUN',
    }),
  );
  t.equal(amb.exitCode, EXIT.USAGE);
  t.match(amb.message, /--job JOB/);
});

t.test('errors without a Coffer code never echo their message', async (t) => {
  let parseError: unknown;
  try {
    JSON.parse('{"secret": MARKER-BYTES');
  } catch (e) {
    parseError = e;
  }
  const e = toRecoverError(parseError, 'run r');
  t.equal(e.code, 'ERR_RECOVER_FAILED');
  t.notMatch(e.message, /MARKER/);
  const fsErr = toRecoverError(
    Object.assign(new Error('ENOSPC: no space, write'), { code: 'ENOSPC', path: '/x/y' }),
  );
  t.match(fsErr.message, /\/x\/y: no space left on the device \(ENOSPC\)/);
});

t.test('oneLine neutralises terminal escapes and line breaks', async (t) => {
  t.equal(oneLine('a\nb\u001b[2Jc\u202Ed'), 'a\\u{a}b\\u{1b}[2Jc\\u{202e}d');
  t.ok(oneLine('x'.repeat(5000)).length <= 2000);
});

t.test('progress bar: drawn on a TTY, silent otherwise', async (t) => {
  const sink = (isTTY: boolean) => {
    const chunks: string[] = [];
    return { chunks, stream: { isTTY, columns: 80, write: (s: string) => chunks.push(s) } };
  };
  const tty = sink(true);
  const p = new Progress(tty.stream, 'verify', true);
  p.update(50, 100, 'shard 1/2');
  p.update(100, 100);
  p.done();
  t.ok(tty.chunks.length >= 2, 'drawn');
  t.match(tty.chunks[0]!, /^\rverify \[=+>? *\] +50%/);
  t.match(tty.chunks.at(-1)!, /^\r +\r$/, 'cleared at the end');
  const pipe = sink(false);
  const q = new Progress(pipe.stream, 'verify', false);
  q.update(1, 2);
  q.done();
  t.same(pipe.chunks, [], 'nothing when disabled');
});
