// The files writer (files-writer.ts, also the files connector's write path): the synchronous path for small
// in-memory bodies, the thread-pool path for big or streamed ones, and the cache of checked parent
// directories, each against the containment attacks (a symbolic link already in the target, a
// parent swapped for a link after an earlier write cached it, a link at the final name).
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { createFilesSource } from '../src/files-source.ts';
import { FilesWriter, fileNameProblem, removeCutWrites, SYNC_MAX } from '../src/files-writer.ts';
import type { RecordBody } from '../src/types.ts';

const small = () => new Uint8Array([1, 2, 3]);
const big = () => new Uint8Array(SYNC_MAX + 5).fill(9);
const streamed = (): RecordBody =>
  (async function* () {
    yield new Uint8Array([4, 5]);
    yield new Uint8Array([6]);
  })();
const bodies: [string, () => RecordBody][] = [
  ['small in memory (synchronous)', small],
  ['big in memory (thread pool)', big],
  ['streamed', streamed],
];

/** Every entry under `dir`, recursively, as relative names (links not followed). */
function tree(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix + e.name;
    out.push(rel);
    if (e.isDirectory()) out.push(...tree(join(dir, e.name), `${rel}/`));
  }
  return out.sort();
}

for (const [label, body] of bodies) {
  t.test(`${label}: content, mode, mtime; nested parents created once`, async (t) => {
    const target = join(tempDir(t), 'target');
    const dst = createFilesSource({ type: 'files', root: target });
    t.teardown(() => dst.close());
    const want = Buffer.from(await collectBody(body()));
    for (const name of ['x/y/z/one', 'x/y/z/two', 'x/y/three', 'top']) {
      t.same(await dst.write(name, body(), { mode: 0o640, mtimeMs: 1_600_000_000_000 }), { written: true });
      t.same(readFileSync(join(target, name)), want, name);
      t.equal(statSync(join(target, name)).mode & 0o7777, 0o640);
      t.equal(statSync(join(target, name)).mtimeMs, 1_600_000_000_000);
    }
    t.same(tree(target), ['top', 'x', 'x/y', 'x/y/three', 'x/y/z', 'x/y/z/one', 'x/y/z/two']);
    t.equal(await dst.exists('x/y/z/one'), true);
    t.equal(await dst.exists('x/y/nope'), false);
    t.equal(await dst.exists('nope/at/all'), false);
  });

  t.test(`${label}: a symbolic link already in the target is never written through`, async (t) => {
    const target = tempDir(t);
    const outside = tempDir(t);
    symlinkSync(outside, join(target, 'out'));
    mkdirSync(join(target, 'real'));
    symlinkSync(join(target, 'real'), join(target, 'in'));
    const dst = createFilesSource({ type: 'files', root: target });
    t.teardown(() => dst.close());
    for (const name of ['out/planted', 'out/deep/planted', 'in/planted']) {
      await t.rejects(dst.write(name, body(), {}), { code: 'ERR_SOURCE_UNSAFE_NAME' }, name);
      await t.rejects(dst.exists(name), { code: 'ERR_SOURCE_UNSAFE_NAME' }, `exists ${name}`);
    }
    t.same(readdirSync(outside), []);
    t.same(readdirSync(join(target, 'real')), []);
    // A link at the final name is replaced by the file, its destination untouched.
    symlinkSync(join(outside, 'victim'), join(target, 'final'));
    t.same(await dst.write('final', body(), {}), { written: true });
    t.ok(lstatSync(join(target, 'final')).isFile());
    t.same(readdirSync(outside), []);
  });

  t.test(`${label}: a parent swapped for a link after an earlier write is caught`, async (t) => {
    const target = tempDir(t);
    const outside = tempDir(t);
    const dst = createFilesSource({ type: 'files', root: target });
    t.teardown(() => dst.close());
    // The first writes check and remember d and d/e.
    t.same(await dst.write('d/e/first', body(), {}), { written: true });
    t.same(await dst.write('d/first', body(), {}), { written: true });
    // d is moved away and replaced by a link leading out of the target.
    renameSync(join(target, 'd'), join(target, 'moved'));
    symlinkSync(outside, join(target, 'd'));
    mkdirSync(join(outside, 'e'));
    for (const name of ['d/second', 'd/e/second']) {
      await t.rejects(dst.write(name, body(), {}), { code: 'ERR_SOURCE_UNSAFE_NAME' }, name);
    }
    t.same(tree(outside), ['e'], 'nothing written outside, no temporary file left there');
    // A link to a directory inside the target is refused too (as without the cache).
    symlinkSync(join(target, 'moved'), join(target, 'inner'));
    t.same(await dst.write('inner-real/x', body(), {}), { written: true });
    renameSync(join(target, 'inner-real'), join(target, 'gone'));
    symlinkSync(join(target, 'moved'), join(target, 'inner-real'));
    await t.rejects(dst.write('inner-real/y', body(), {}), { code: 'ERR_SOURCE_UNSAFE_NAME' });
    t.same(readdirSync(join(target, 'moved')).sort(), ['e', 'first']);
    // Once the link is gone and a real directory is back, writes go on.
    renameSync(join(target, 'd'), join(target, 'old-link'));
    renameSync(join(target, 'moved'), join(target, 'd'));
    t.same(await dst.write('d/e/third', body(), {}), { written: true });
    t.ok(lstatSync(join(target, 'd/e/third')).isFile());
  });

  t.test(`${label}: a parent replaced by a file is a write error, no temporary left`, async (t) => {
    const target = tempDir(t);
    const dst = createFilesSource({ type: 'files', root: target });
    t.teardown(() => dst.close());
    t.same(await dst.write('p/first', body(), {}), { written: true });
    renameSync(join(target, 'p'), join(target, 'q'));
    await dst.write('p', small(), {});
    await t.rejects(dst.write('p/second', body(), {}), { code: 'ERR_SOURCE_WRITE' });
    t.same(tree(target), ['p', 'q', 'q/first']);
  });
}

t.test('a body stream that fails mid-way: its own error, no temporary file left', async (t) => {
  const target = tempDir(t);
  const dst = createFilesSource({ type: 'files', root: target });
  t.teardown(() => dst.close());
  const boom = new Error('body broke');
  await t.rejects(
    dst.write(
      'c/partial',
      (async function* () {
        yield big();
        throw boom;
      })(),
      {},
    ),
    boom,
  );
  t.same(tree(target), ['c']);
});

for (const [label, body] of bodies) {
  t.test(
    `${label}: replace: false refuses every existing name atomically, nothing left behind`,
    async (t) => {
      const target = tempDir(t);
      const outside = tempDir(t);
      const dst = createFilesSource({ type: 'files', root: target, replace: false });
      t.teardown(() => dst.close());
      writeFileSync(join(target, 'file'), 'original');
      symlinkSync(join(outside, 'secret'), join(target, 'link'));
      symlinkSync(join(outside, 'missing'), join(target, 'dangling'));
      mkdirSync(join(target, 'dir'));
      writeFileSync(join(outside, 'secret'), 'outside');
      for (const name of ['file', 'link', 'dangling', 'dir'])
        await t.rejects(
          dst.write(name, body(), {}),
          { code: 'ERR_SOURCE_TARGET_EXISTS', record: name },
          name,
        );
      t.equal(readFileSync(join(target, 'file'), 'utf8'), 'original', 'the file is unchanged');
      t.equal(readFileSync(join(outside, 'secret'), 'utf8'), 'outside', 'no write through the link');
      t.notOk(existsSync(join(outside, 'missing')), 'no write through the dangling link');
      t.same(tree(target), ['dangling', 'dir', 'file', 'link'], 'no temporary file left');
      t.same(await dst.write('new', body(), { mode: 0o600 }), { written: true });
      t.equal(statSync(join(target, 'new')).mode & 0o777, 0o600);
      t.equal(statSync(join(target, 'new')).nlink, 1, 'the temporary name is gone');
    },
  );
}

t.test(
  'the writer on its own: entryAt, parentProblem, name checks, a directory is never replaced',
  async (t) => {
    const root = tempDir(t);
    const outside = tempDir(t);
    const w = new FilesWriter('files:test');
    mkdirSync(join(root, 'd'));
    writeFileSync(join(root, 'f'), 'x');
    symlinkSync(outside, join(root, 'out'));
    t.equal(w.entryAt(root, 'nope'), 'absent');
    t.equal(w.entryAt(root, 'nope/deeper'), 'absent');
    t.equal(w.entryAt(root, 'd'), 'directory');
    t.equal(w.entryAt(root, 'f'), 'file');
    t.equal(w.entryAt(root, 'out'), 'link');
    t.throws(() => w.entryAt(root, 'out/x'), { code: 'ERR_SOURCE_UNSAFE_NAME' }, 'through a link');
    t.throws(() => w.entryAt(root, 'f/x'), { code: 'ERR_SOURCE_WRITE', sourceCode: 'ENOTDIR' });
    t.same(w.parentProblem(root, 'out/x'), { kind: 'symlink', at: 'out' });
    t.same(w.parentProblem(root, 'f/x'), { kind: 'not-directory', at: 'f' });
    t.equal(w.parentProblem(root, 'missing/x'), null, 'a missing parent is created by the write');
    for (const [name, problem] of [
      ['', 'empty'],
      ['/abs', 'absolute'],
      ['a/../b', 'dot-dot-segment'],
      ['a/./b', 'dot-segment'],
      ['a//b', 'empty-segment'],
      ['a\u0000b', 'nul'],
      [`${'\u00e9'.repeat(128)}`, 'long-segment'],
    ] as const) {
      t.equal(fileNameProblem(name), problem, JSON.stringify(name));
      await t.rejects(w.write(root, name, small()), { code: 'ERR_SOURCE_UNSAFE_NAME' });
      t.throws(() => w.entryAt(root, name), { code: 'ERR_SOURCE_UNSAFE_NAME' });
    }
    t.equal(fileNameProblem('\u00e9'.repeat(127)), null, '254 bytes is fine');
    await t.rejects(w.write(root, 'd', small()), { code: 'ERR_SOURCE_WRITE', sourceCode: 'EISDIR' });
    t.ok(lstatSync(join(root, 'd')).isDirectory(), 'the directory stays');
    t.same(readdirSync(outside), [], 'nothing written outside');
    t.same(tree(root), ['d', 'f', 'out'], 'no temporary file left');
  },
);

t.test('removeCutWrites removes only the temporary files of the named records', async (t) => {
  const root = tempDir(t);
  mkdirSync(join(root, 'a'));
  const cut = ['.x.txt.coffer-0123456789ab.tmp', 'a/.y.bin.coffer-abcdefabcdef.tmp'];
  const kept = [
    '.other.coffer-0123456789ab.tmp', // not a planned record
    'a/.x.txt.coffer-0123456789ab.tmp', // x.txt is planned at the top, not in a/
    '.x.txt.coffer-0123.tmp', // not the writer's naming
    'x.txt',
  ];
  for (const f of [...cut, ...kept]) writeFileSync(join(root, f), 'partial');
  mkdirSync(join(root, '.y2.coffer-000000000000.tmp'));
  await removeCutWrites(root, ['x.txt', 'a/y.bin', 'y2', 'missing/dir/z']);
  t.same(tree(root), [...kept, '.y2.coffer-000000000000.tmp', 'a'].sort(), 'only the cut writes went');
  // The writer's own temporary name is what removeCutWrites recognises (one naming, one owner).
  const w = new FilesWriter('files:test');
  const temporaries = () => readdirSync(join(root, 'a')).filter((n) => n.startsWith('.long.'));
  await t.rejects(
    w.write(
      root,
      'a/long',
      (async function* () {
        yield small();
        t.equal(temporaries().length, 1, 'one temporary file while writing');
        await removeCutWrites(root, ['a/long']);
        t.same(temporaries(), [], 'recognised and removed');
        throw new Error('cut');
      })(),
    ),
    /cut/,
  );
});

t.test('a body in memory to a free name is created there: mode 000 until its bytes are in', async (t) => {
  const root = tempDir(t);
  const outside = tempDir(t);
  const w = new FilesWriter('files:test');
  const body = big();
  // The create happens before the write's first await; the bytes (over SYNC_MAX) go through the pool.
  const writing = w.write(root, 'f.bin', body, { mode: 0o640, mtimeMs: 1_700_000_000_000 });
  t.same(tree(root), ['f.bin'], 'no temporary name: the file is created at its own name');
  t.equal(lstatSync(join(root, 'f.bin')).mode & 0o7777, 0, 'no permission bits while it is written');
  t.same(await writing, { written: true });
  const st = statSync(join(root, 'f.bin'));
  t.equal(st.mode & 0o7777, 0o640, 'its own mode, set last');
  t.equal(st.mtimeMs, 1_700_000_000_000);
  t.equal(st.nlink, 1);
  t.ok(readFileSync(join(root, 'f.bin')).equals(body));
  // An existing name is refused without a byte written (replace: false) or replaced through a
  // temporary file (replace: true), as before.
  writeFileSync(join(outside, 'victim'), 'outside');
  symlinkSync(join(outside, 'victim'), join(root, 'link'));
  await t.rejects(w.write(root, 'link', small(), {}, { replace: false }), {
    code: 'ERR_SOURCE_TARGET_EXISTS',
  });
  t.same(await w.write(root, 'link', small()), { written: true });
  t.ok(lstatSync(join(root, 'link')).isFile(), 'the link is replaced by the file');
  t.equal(readFileSync(join(outside, 'victim'), 'utf8'), 'outside', 'never written through');
  t.same(tree(root), ['f.bin', 'link']);
});

t.test('a direct write that fails mid-way (EFBIG) leaves nothing under the name', async (t) => {
  // A file-size limit makes write(2) fail after the create (with SIGXFSZ handled, write(2)
  // returns EFBIG instead of the signal killing the process), in a child so the limit stays there.
  const root = tempDir(t);
  const writer = new URL('../src/files-writer.ts', import.meta.url).pathname;
  const script = `
    import { realpathSync } from 'node:fs';
    process.on('SIGXFSZ', () => {});
    import { FilesWriter } from ${JSON.stringify(writer)};
    const w = new FilesWriter('files:test');
    try {
      await w.write(realpathSync(process.argv[1]), 'big.bin', new Uint8Array(4 * 1024 * 1024).fill(7));
      console.log('written');
    } catch (e) {
      console.log(e.code, e.sourceCode);
    }`;
  const out = execFileSync(
    'bash',
    ['-c', 'ulimit -f 64; exec "$0" --input-type=module -e "$1" "$2"', process.execPath, script, root],
    { encoding: 'utf8' },
  );
  t.equal(out.trim(), 'ERR_SOURCE_WRITE EFBIG', 'the write failed with the file system error');
  t.same(tree(root), [], 'nothing left under the name, no temporary file');
});

t.test('removeCutWrites with since removes the named records cut mid-write, nothing else', async (t) => {
  const root = tempDir(t);
  const outside = tempDir(t);
  mkdirSync(join(root, 'a'));
  symlinkSync(outside, join(root, 'via'));
  writeFileSync(join(root, 'cut.bin'), 'par', { mode: 0o000 });
  writeFileSync(join(root, 'a/cut.bin'), 'par', { mode: 0o000 });
  writeFileSync(join(root, 'not-planned'), 'par', { mode: 0o000 }); // not a record of this apply
  writeFileSync(join(root, 'mode-644'), 'whole', { mode: 0o644 }); // the operator's own
  writeFileSync(join(outside, 'x'), 'par', { mode: 0o000 }); // reached through a link
  const names = ['cut.bin', 'a/cut.bin', 'mode-644', 'via/x', 'missing/y'];
  await removeCutWrites(root, names, { since: Date.now() + 60_000 });
  t.same(tree(root), ['a', 'a/cut.bin', 'cut.bin', 'mode-644', 'not-planned', 'via'], 'older: kept');
  await removeCutWrites(root, names);
  t.same(tree(root).length, 6, 'without since: kept');
  await removeCutWrites(root, names, { since: Date.now() - 60_000 });
  t.same(tree(root), ['a', 'mode-644', 'not-planned', 'via'], 'the cut records went');
  t.same(readdirSync(outside), ['x'], 'nothing removed through a link');
});

async function collectBody(body: RecordBody): Promise<Uint8Array> {
  if (body instanceof Uint8Array) return body;
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}
