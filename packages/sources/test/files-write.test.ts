// The files connector's write path (internal/files-write.ts): the synchronous path for small
// in-memory bodies, the thread-pool path for big or streamed ones, and the cache of checked parent
// directories, each against the containment attacks (a symbolic link already in the target, a
// parent swapped for a link after an earlier write cached it, a link at the final name).
import { lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { createFilesSource } from '../src/files-source.ts';
import { SYNC_MAX } from '../src/internal/files-write.ts';
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

async function collectBody(body: RecordBody): Promise<Uint8Array> {
  if (body instanceof Uint8Array) return body;
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(p);
  return Buffer.concat(parts);
}
