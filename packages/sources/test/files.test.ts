import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { createFilesSource } from '../src/files-source.ts';
import { isSkipped, type SkippedRecord, type SourceRecordInfo } from '../src/types.ts';

async function all(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

async function collect(src: ReturnType<typeof createFilesSource>, pageSize?: number) {
  const out: (SourceRecordInfo | SkippedRecord)[] = [];
  for await (const e of src.enumerate(pageSize === undefined ? {} : { pageSize })) out.push(e);
  return out;
}

function makeTree(root: string, outside: string): void {
  mkdirSync(join(root, 'a/b'), { recursive: true });
  mkdirSync(join(root, 'a-c'), { recursive: true });
  mkdirSync(join(root, 'empty'), { recursive: true });
  writeFileSync(join(root, 'a/b/deep.txt'), 'deep');
  writeFileSync(join(root, 'a/x.bin'), Buffer.alloc(70_000, 7));
  writeFileSync(join(root, 'a-c/file'), 'dash');
  writeFileSync(join(root, 'a0'), 'zero');
  writeFileSync(join(root, 'top.txt'), 'top');
  writeFileSync(join(root, 'exec.sh'), '#!/bin/sh\n');
  chmodSync(join(root, 'exec.sh'), 0o751);
  utimesSync(join(root, 'top.txt'), new Date(1_600_000_000_000), new Date(1_600_000_000_000));
  writeFileSync(join(outside, 'secret'), 'outside the tree');
  symlinkSync(join(outside, 'secret'), join(root, 'link-to-file'));
  symlinkSync(outside, join(root, 'link-to-dir'));
  execFileSync('mkfifo', [join(root, 'pipe')]);
}

t.test('lists regular files in byte order, skips links and special files, keeps metadata', async (t) => {
  const root = tempDir(t);
  const outside = tempDir(t);
  makeTree(root, outside);
  const src = createFilesSource({ type: 'files', root, binding: 'home' });
  t.teardown(() => src.close());
  const entries = await collect(src);
  t.same(
    entries.filter((e) => !isSkipped(e)).map((e) => e.name),
    ['a-c/file', 'a/b/deep.txt', 'a/x.bin', 'a0', 'exec.sh', 'top.txt'],
    'records in UTF-8 byte order',
  );
  t.same(entries.map((e) => e.name).sort(), [
    'a-c/file',
    'a/b/deep.txt',
    'a/x.bin',
    'a0',
    'exec.sh',
    'link-to-dir',
    'link-to-file',
    'pipe',
    'top.txt',
  ]);
  const skipped = entries.filter(isSkipped);
  t.same(
    skipped.map((s) => [s.name, s.reason]),
    [
      ['link-to-dir', 'symbolic link (not followed)'],
      ['link-to-file', 'symbolic link (not followed)'],
      ['pipe', 'special file (named pipe)'],
    ],
  );
  const top = entries.find((e) => e.name === 'top.txt') as SourceRecordInfo;
  t.equal(top.size, 3);
  t.equal(top.sourceType, 'files');
  t.equal(top.binding, 'home');
  t.equal(top.metadata.mtimeMs, 1_600_000_000_000);
  const exec = entries.find((e) => e.name === 'exec.sh') as SourceRecordInfo;
  t.equal(exec.metadata.mode, 0o751);

  // Paginated listings give the same sequence at every page size, and resume from a bare cursor.
  const names = (list: { name: string }[]) => list.map((e) => e.name).sort();
  for (const size of [1, 2, 3, 100])
    t.same(names(await collect(src, size)), names(entries), `page size ${size}`);
  const p1 = await src.list({ pageSize: 4 });
  t.equal(p1.records.length + p1.skipped.length, 4);
  const fresh = createFilesSource({ type: 'files', root });
  const p2 = await fresh.list({ pageSize: 100, cursor: p1.cursor! });
  t.same([...p2.records, ...p2.skipped].map((e) => e.name).sort(), [
    'exec.sh',
    'link-to-dir',
    'link-to-file',
    'pipe',
    'top.txt',
  ]);
  t.equal(p2.cursor, undefined);
  await fresh.close();
});

t.test('reads whole and by range; vanished and replaced files are typed', async (t) => {
  const root = tempDir(t);
  const outside = tempDir(t);
  makeTree(root, outside);
  const src = createFilesSource({ type: 'files', root, maxRecordBytes: 65_536 });
  t.teardown(() => src.close());
  t.equal((await all(await src.read('a/b/deep.txt'))).toString(), 'deep');
  t.same(Buffer.from(await src.readRange('top.txt', 1, 1)), Buffer.from('o'));
  t.same(Buffer.from(await src.readRange('top.txt', 1, 99)), Buffer.from('op'));
  t.equal((await src.readRange('top.txt', 5, 9)).byteLength, 0);
  await t.rejects(src.read('a/x.bin'), {
    code: 'ERR_SOURCE_RECORD_TOO_LARGE',
    reason: 'record over the in-band size ceiling (recover it out of band)',
  });
  await t.rejects(src.read('gone.txt'), { code: 'ERR_SOURCE_RECORD_VANISHED', disposition: 'warn' });
  await t.rejects(src.read('link-to-file'), { code: 'ERR_SOURCE_RECORD_SKIPPED' });
  await t.rejects(src.read('link-to-dir/secret'), { code: 'ERR_SOURCE_RECORD_SKIPPED' });
  await t.rejects(src.read('pipe'), { code: 'ERR_SOURCE_RECORD_SKIPPED' });
  await t.rejects(src.read('../etc/passwd'), { code: 'ERR_SOURCE_UNSAFE_NAME' });
  // A file listed, then removed before the read.
  const listed = (await src.list()).records.map((r) => r.name);
  t.ok(listed.includes('a0'));
  rmSync(join(root, 'a0'));
  await t.rejects(src.read('a0'), { code: 'ERR_SOURCE_RECORD_VANISHED' });
});

t.test('reads into caller memory: readInto and read with a scratch buffer', async (t) => {
  const root = tempDir(t);
  const small = Buffer.from('a small record');
  const mid = Buffer.alloc(100_000);
  const big = Buffer.alloc(1_000_003);
  for (let i = 0; i < mid.length; i++) mid[i] = (i * 7) & 0xff;
  for (let i = 0; i < big.length; i++) big[i] = (i * 13 + 5) & 0xff;
  writeFileSync(join(root, 'small'), small);
  writeFileSync(join(root, 'mid'), mid);
  writeFileSync(join(root, 'big'), big);
  writeFileSync(join(root, 'empty'), '');
  mkdirSync(join(root, 'dir'));
  const src = createFilesSource({ type: 'files', root, maxRecordBytes: 2_000_000 });
  t.teardown(() => src.close());
  const slot = Buffer.alloc(200_000);
  // readInto: a view of the caller's buffer when the record fits, fresh memory when it does not.
  const a = await src.readInto!('small', slot);
  t.same(Buffer.from(a), small);
  t.equal(a.buffer, slot.buffer, 'small record read into the given buffer');
  const b = await src.readInto!('mid', slot);
  t.same(Buffer.from(b), mid);
  t.equal(b.buffer, slot.buffer, 'a record over the synchronous size still lands in the buffer');
  const c = await src.readInto!('big', slot);
  t.same(Buffer.from(c), big);
  t.not(c.buffer, slot.buffer, 'a record bigger than the buffer gets its own memory');
  t.equal((await src.readInto!('empty', slot)).byteLength, 0);
  await t.rejects(src.readInto!('gone', slot), { code: 'ERR_SOURCE_RECORD_VANISHED' });
  await t.rejects(src.readInto!('dir', slot), { code: 'ERR_SOURCE_RECORD_SKIPPED' });
  await t.rejects(src.readInto!('../x', slot), { code: 'ERR_SOURCE_UNSAFE_NAME' });

  // read with a scratch buffer: every piece is a view of it, valid until the next is asked for.
  const scratch = Buffer.alloc(256 * 1024);
  const pieces = async (name: string) => {
    const out: Buffer[] = [];
    let views = 0;
    for await (const piece of await src.read(name, { buffer: scratch })) {
      if (piece.buffer === scratch.buffer) views++;
      out.push(Buffer.from(piece)); // copied before the next piece is asked for
    }
    return { bytes: Buffer.concat(out), count: out.length, views };
  };
  const whole = await pieces('mid');
  t.same(whole.bytes, mid);
  t.same([whole.count, whole.views], [1, 1], 'a record that fits is one piece in the buffer');
  const streamed = await pieces('big');
  t.same(streamed.bytes, big);
  t.equal(streamed.count, Math.ceil(big.length / (128 * 1024)), 'pieces of half the buffer');
  t.equal(streamed.views, streamed.count, 'every piece is a view of the buffer');
  t.same((await pieces('small')).bytes, small);
  // A stream abandoned half-way closes its file (after the read in flight).
  const it = (await src.read('big', { buffer: scratch }))[Symbol.asyncIterator]();
  t.equal((await it.next()).value?.byteLength, 128 * 1024);
  await it.return?.(undefined);
  t.same((await pieces('big')).bytes, big, 'the buffer is usable again');
});

t.test('missing root and a root that is a file', async (t) => {
  const dir = tempDir(t);
  await t.rejects(createFilesSource({ type: 'files', root: join(dir, 'nope') }).list(), {
    code: 'ERR_SOURCE_RESOURCE_MISSING',
    reason: 'source resource missing',
  });
  writeFileSync(join(dir, 'f'), 'x');
  await t.rejects(createFilesSource({ type: 'files', root: join(dir, 'f') }).list(), {
    code: 'ERR_SOURCE_BINDING',
    reason: 'source binding error',
  });
});

t.test('write restores content, mode and mtime, and never leaves the root', async (t) => {
  const root = tempDir(t);
  const outside = tempDir(t);
  makeTree(root, outside);
  const target = join(tempDir(t), 'restore-here');
  const src = createFilesSource({ type: 'files', root });
  const dst = createFilesSource({ type: 'files', root: target });
  t.teardown(() => Promise.all([src.close(), dst.close()]));
  let n = 0;
  for await (const e of src.enumerate()) {
    if (isSkipped(e)) continue;
    t.equal(await dst.exists(e.name), false);
    t.same(await dst.write(e.name, await src.read(e.name), e.metadata), { written: true });
    t.equal(await dst.exists(e.name), true);
    n++;
  }
  t.equal(n, 6);
  t.equal(readFileSync(join(target, 'a/b/deep.txt'), 'utf8'), 'deep');
  t.equal(statSync(join(target, 'exec.sh')).mode & 0o7777, 0o751);
  t.equal(statSync(join(target, 'top.txt')).mtimeMs, 1_600_000_000_000);
  t.same(readFileSync(join(target, 'a/x.bin')), Buffer.alloc(70_000, 7));

  // Overwrite replaces content atomically; a bytes body works too.
  await dst.write('top.txt', new TextEncoder().encode('new'), {});
  t.equal(readFileSync(join(target, 'top.txt'), 'utf8'), 'new');

  // Names that escape: '..', absolute, through an existing symlink (to a dir outside).
  symlinkSync(outside, join(target, 'evil'));
  for (const bad of ['../x', 'a/../../x', '/etc/x', 'evil/planted', '', 'a//b', './a']) {
    await t.rejects(dst.write(bad, new Uint8Array([1]), {}), { code: 'ERR_SOURCE_UNSAFE_NAME' }, bad);
  }
  t.throws(() => statSync(join(outside, 'planted')));
  // A symlink as the final component is replaced, never written through.
  symlinkSync(join(outside, 'secret'), join(target, 'final-link'));
  await dst.write('final-link', new Uint8Array([65]), {});
  t.equal(readFileSync(join(outside, 'secret'), 'utf8'), 'outside the tree');
  t.equal(readFileSync(join(target, 'final-link'), 'utf8'), 'A');
  // A file where a directory is needed.
  await t.rejects(dst.write('top.txt/child', new Uint8Array([1]), {}), { code: 'ERR_SOURCE_WRITE' });
  // A failing body stream: its own error comes back and no temp file is left.
  const boom = new Error('body broke');
  await t.rejects(
    dst.write(
      'c/partial',
      (async function* () {
        yield new Uint8Array([1]);
        throw boom;
      })(),
      {},
    ),
    boom,
  );
  t.same(
    (await collect(dst)).map((e) => e.name).filter((n) => n.startsWith('c/')),
    [],
  );
});

t.test('names that are not UTF-8 are skipped; a dropped listing resumes', async (t) => {
  const root = tempDir(t);
  writeFileSync(Buffer.concat([Buffer.from(`${root}/bad-`), Buffer.from([0xff, 0xfe])]), 'x');
  mkdirSync(Buffer.concat([Buffer.from(`${root}/dir-`), Buffer.from([0xc3])]));
  writeFileSync(join(root, 'good'), 'x');
  const src = createFilesSource({ type: 'files', root });
  t.teardown(() => src.close());
  const entries = await collect(src);
  t.same(
    entries.filter((e) => !isSkipped(e)).map((e) => e.name),
    ['good'],
  );
  t.same(
    entries.filter(isSkipped).map((e) => e.reason),
    ['name is not valid UTF-8', 'name is not valid UTF-8'],
  );
  // A listing abandoned half-way (close) and resumed elsewhere from its cursor.
  const first = await src.list({ pageSize: 1 });
  await src.close();
  const again = createFilesSource({ type: 'files', root });
  t.teardown(() => again.close());
  const rest = await again.list({ cursor: first.cursor! });
  t.equal(first.records.length + first.skipped.length + rest.records.length + rest.skipped.length, 3);
  await t.rejects(again.list({ cursor: 'bogus!' }), { code: 'ERR_SOURCE_INVALID_CURSOR' });
});
