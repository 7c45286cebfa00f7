// The extraction target (the shared files writer under our error codes) on a real filesystem: never leaves the target, never follows a symlink
// inside it, never overwrites without force, never shows a record that failed its check.
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, relative, sep } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { recordPath } from '../src/internal/safe-name.ts';
import { ExtractTarget } from '../src/internal/target.ts';

async function* bytes(text: string): AsyncIterable<Uint8Array> {
  yield Buffer.from(text);
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (e) {
    return (e as { code?: string }).code ?? 'no code';
  }
}

/** Every path under `dir` (files, dirs, links), relative, sorted. */
function walk(dir: string, base = dir): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    out.push(relative(base, p));
    if (lstatSync(p).isDirectory()) out.push(...walk(p, base));
  }
  return out.sort();
}

function setup(tt: Test) {
  const base = tempDir(tt, 'coffer-recover-writer-');
  const dir = join(base, 'target');
  const outside = join(base, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'outside original');
  return { base, dir, outside };
}

t.test('writes nested files and creates the target with mode 0700', async (tt) => {
  const { dir } = setup(tt);
  const target = await ExtractTarget.open(dir, { force: false });
  const p = await target.write(recordPath('a/b/c.txt'), bytes('hello'), {}, 'record a/b/c.txt');
  tt.equal(p, join(target.root, 'a', 'b', 'c.txt'));
  tt.equal(readFileSync(p, 'utf8'), 'hello');
  tt.equal(lstatSync(dir).mode & 0o777, 0o700);
  tt.same(walk(dir), ['a', join('a', 'b'), join('a', 'b', 'c.txt')], 'no temporary file left');
});

t.test('hostile names all land inside the target', async (tt) => {
  const { base, dir, outside } = setup(tt);
  const target = await ExtractTarget.open(dir, { force: false });
  const names = [
    '../outside/secret.txt',
    '../../etc/passwd',
    '/etc/passwd',
    '..\\outside\\secret.txt',
    'C:\\Windows\\evil.dll',
    'a\u0000b',
    'invoice\u202Etxt.exe',
    '\uFF0E\uFF0E\uFF0Foutside\uFF0Fsecret.txt',
    '..\u2215outside',
    'x'.repeat(400),
    'dir/',
    'CON',
  ];
  for (const n of names) await target.write(recordPath(n), bytes('planted'), {}, 'record');
  tt.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'outside original', 'outside file untouched');
  tt.same(readdirSync(outside), ['secret.txt'], 'nothing new outside');
  const everything = walk(base);
  const stray = everything.filter(
    (p) =>
      p !== 'outside' &&
      p !== join('outside', 'secret.txt') &&
      !p.startsWith(`target${sep}`) &&
      p !== 'target',
  );
  tt.same(stray, [], 'every path created is under the target');
  tt.ok(walk(dir).length >= names.length, 'every record written');
  // The empty name maps to "%", which '/etc/passwd' (["%", "etc", "passwd"]) made a directory:
  // a layout clash is refused, never resolved by writing somewhere else.
  tt.equal(await code(target.write(recordPath(''), bytes('x'), {}, 'record ""')), 'ERR_RECOVER_EXISTS');
});

t.test('refuses to overwrite without force; force replaces', async (tt) => {
  const { dir } = setup(tt);
  const target = await ExtractTarget.open(dir, { force: false });
  await target.write(['f.txt'], bytes('one'), {}, 'record f');
  tt.equal(await code(target.write(['f.txt'], bytes('two'), {}, 'record f')), 'ERR_RECOVER_EXISTS');
  tt.equal(readFileSync(join(dir, 'f.txt'), 'utf8'), 'one', 'unchanged');
  tt.equal(target.precheck(['f.txt'], 'record f')?.code, 'ERR_RECOVER_EXISTS', 'precheck says so too');
  tt.equal(target.precheck(['g.txt'], 'record g') ?? null, null, 'free name passes precheck');
  const forced = await ExtractTarget.open(dir, { force: true });
  await forced.write(['f.txt'], bytes('two'), {}, 'record f');
  tt.equal(readFileSync(join(dir, 'f.txt'), 'utf8'), 'two', 'replaced with --force');
  tt.same(walk(dir), ['f.txt'], 'no temporary file left');
});

t.test('a directory is never replaced, even with force', async (tt) => {
  const { dir } = setup(tt);
  mkdirSync(join(dir, 'd'), { recursive: true });
  const forced = await ExtractTarget.open(dir, { force: true });
  tt.equal(await code(forced.write(['d'], bytes('x'), {}, 'record d')), 'ERR_RECOVER_EXISTS');
  tt.ok(lstatSync(join(dir, 'd')).isDirectory());
});

t.test('a file where a directory is needed is refused', async (tt) => {
  const { dir } = setup(tt);
  mkdirSync(dir);
  writeFileSync(join(dir, 'a'), 'file');
  const target = await ExtractTarget.open(dir, { force: true });
  tt.equal(await code(target.write(['a', 'b'], bytes('x'), {}, 'record a/b')), 'ERR_RECOVER_EXISTS');
  tt.equal(readFileSync(join(dir, 'a'), 'utf8'), 'file');
});

t.test('never follows a symlinked directory inside the target out of it', async (tt) => {
  const { dir, outside } = setup(tt);
  mkdirSync(dir);
  symlinkSync(outside, join(dir, 'escape'));
  for (const force of [false, true]) {
    const target = await ExtractTarget.open(dir, { force });
    tt.equal(
      await code(target.write(['escape', 'secret.txt'], bytes('pwned'), {}, 'record escape/secret.txt')),
      'ERR_RECOVER_UNSAFE_PATH',
      `refused (force=${force})`,
    );
    tt.equal(
      await code(target.write(['escape', 'new.txt'], bytes('pwned'), {}, 'record escape/new.txt')),
      'ERR_RECOVER_UNSAFE_PATH',
    );
    tt.equal(target.precheck(['escape', 'new.txt'], 'r')?.code, 'ERR_RECOVER_UNSAFE_PATH');
  }
  tt.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'outside original');
  tt.same(readdirSync(outside), ['secret.txt']);
});

t.test('a symlink pointing inside the target is refused too', async (tt) => {
  const { dir } = setup(tt);
  mkdirSync(join(dir, 'real'), { recursive: true });
  symlinkSync(join(dir, 'real'), join(dir, 'alias'));
  const target = await ExtractTarget.open(dir, { force: false });
  tt.equal(
    await code(target.write(['alias', 'x'], bytes('x'), {}, 'record alias/x')),
    'ERR_RECOVER_UNSAFE_PATH',
  );
  tt.same(readdirSync(join(dir, 'real')), []);
});

t.test(
  'a symlink as the file name: refused without force, replaced (not followed) with force',
  async (tt) => {
    const { dir, outside } = setup(tt);
    mkdirSync(dir);
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'link.txt'));
    symlinkSync(join(outside, 'missing.txt'), join(dir, 'dangling.txt'));
    const target = await ExtractTarget.open(dir, { force: false });
    tt.equal(
      await code(target.write(['link.txt'], bytes('pwned'), {}, 'record link.txt')),
      'ERR_RECOVER_EXISTS',
    );
    tt.equal(
      await code(target.write(['dangling.txt'], bytes('pwned'), {}, 'record dangling.txt')),
      'ERR_RECOVER_EXISTS',
    );
    tt.notOk(existsSync(join(outside, 'missing.txt')), 'dangling link not followed');
    const forced = await ExtractTarget.open(dir, { force: true });
    await forced.write(['link.txt'], bytes('restored'), {}, 'record link.txt');
    await forced.write(['dangling.txt'], bytes('restored'), {}, 'record dangling.txt');
    tt.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'outside original', 'link target untouched');
    tt.notOk(existsSync(join(outside, 'missing.txt')));
    tt.notOk(lstatSync(join(dir, 'link.txt')).isSymbolicLink(), 'the link itself was replaced');
    tt.equal(readFileSync(join(dir, 'link.txt'), 'utf8'), 'restored');
  },
);

t.test('the target itself may be a symlink the operator chose', async (tt) => {
  const { base } = setup(tt);
  const real = join(base, 'real-target');
  mkdirSync(real);
  symlinkSync(real, join(base, 'chosen'));
  const target = await ExtractTarget.open(join(base, 'chosen'), { force: false });
  await target.write(['ok.txt'], bytes('ok'), {}, 'record ok.txt');
  tt.equal(readFileSync(join(real, 'ok.txt'), 'utf8'), 'ok');
  tt.equal(readlinkSync(join(base, 'chosen')), real);
});

t.test('a record failing its check never appears and leaves no temporary file', async (tt) => {
  const { dir } = setup(tt);
  const target = await ExtractTarget.open(dir, { force: false });
  // The archive reader checks a record's SHA-384 at its end and throws there: so does this body.
  async function* tampered(): AsyncIterable<Uint8Array> {
    yield Buffer.from('tampered');
    throw Object.assign(new Error('hash mismatch'), { code: 'ERR_TEST_CHECK' });
  }
  const err = await code(target.write(['bad.bin'], tampered(), {}, 'record bad.bin'));
  tt.equal(err, 'ERR_TEST_CHECK', "the body's own error, unchanged");
  tt.same(readdirSync(dir), [], 'nothing under the target');
});

t.test('mode and mtime are applied before the file appears', async (tt) => {
  const { dir } = setup(tt);
  const target = await ExtractTarget.open(dir, { force: false });
  const p = await target.write(
    ['m.txt'],
    bytes('m'),
    { mode: 0o4751, mtimeMs: 1_600_000_000_000 },
    'record m',
  );
  tt.equal(lstatSync(p).mode & 0o7777, 0o751, 'permission bits only, never setuid');
  tt.equal(lstatSync(p).mtimeMs, 1_600_000_000_000);
});

t.test('the target path being a file is refused', async (tt) => {
  const { base } = setup(tt);
  writeFileSync(join(base, 'file'), 'x');
  tt.equal(await code(ExtractTarget.open(join(base, 'file'), { force: false })), 'ERR_RECOVER_EXISTS');
});
