import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { createFsStore, openStore } from '../src/index.ts';
import { expectCode, storeContract } from './contract.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

storeContract(t, 'fs', async (t) => createFsStore({ root: join(tempDir(t), 'store') }), {
  conditionalWrites: true,
  oneByteRange: true,
  faithfulListing: true,
  streamMemoryBound: 8 * 1024 * 1024,
});

t.test('fs: keys never escape the root', async (t) => {
  const base = tempDir(t);
  const root = join(base, 'root');
  const outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret.txt'), 'outside data');
  const store = createFsStore({ root });
  for (const key of ['../outside/secret.txt', '/etc/passwd', `/${outside}/secret.txt`, 'a/../../outside/x']) {
    await expectCode(t, store.get(key), 'ERR_OBJECTSTORE_INVALID_KEY', `get ${key}`);
    await expectCode(t, store.put(key, enc('x')), 'ERR_OBJECTSTORE_INVALID_KEY', `put ${key}`);
    await expectCode(t, store.delete(key), 'ERR_OBJECTSTORE_INVALID_KEY', `delete ${key}`);
  }
  // A directory symlink leading out of the root.
  symlinkSync(outside, join(root, 'link'));
  await expectCode(
    t,
    store.get('link/secret.txt'),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'read through a symlink dir',
  );
  await expectCode(
    t,
    store.get('link/absent'),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'absent file through symlink dir',
  );
  await expectCode(
    t,
    store.head('link/secret.txt'),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'head through symlink dir',
  );
  await expectCode(
    t,
    store.put('link/new.txt', enc('x')),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'write through symlink',
  );
  await expectCode(
    t,
    store.put('link/deep/new.txt', enc('x')),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'mkdir through it',
  );
  await expectCode(
    t,
    store.delete('link/secret.txt'),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'delete through symlink',
  );
  t.notOk(existsSync(join(outside, 'new.txt')), 'nothing written outside');
  t.notOk(existsSync(join(outside, 'deep')), 'no directory created outside');
  t.equal(readFileSync(join(outside, 'secret.txt'), 'utf8'), 'outside data', 'outside file untouched');
  // A file symlink leading out of the root.
  symlinkSync(join(outside, 'secret.txt'), join(root, 'file-link'));
  await expectCode(t, store.get('file-link'), 'ERR_OBJECTSTORE_ACCESS_DENIED', 'read a symlinked file');
  await expectCode(
    t,
    store.getStream('file-link'),
    'ERR_OBJECTSTORE_ACCESS_DENIED',
    'stream a symlinked file',
  );
  // Listings never follow symlinks.
  await store.put('real/one', enc('1'));
  const listed = (await store.list('')).objects.map((o) => o.key);
  t.same(listed, ['real/one'], 'symlinks are not listed');
  await expectCode(t, store.list('link/'), 'ERR_OBJECTSTORE_ACCESS_DENIED', 'listing through a symlink dir');
  // A symlink inside the root pointing inside the root is followed for reads.
  symlinkSync(join(root, 'real'), join(root, 'alias'));
  t.equal(dec(await store.get('alias/one')), '1', 'in-root symlink is allowed');
});

t.test('fs: atomic writes leave no temp files and temp files are never listed', async (t) => {
  const root = join(tempDir(t), 'store');
  const store = createFsStore({ root });
  await store.put('a/b/c', enc('one'));
  await store.put('a/b/c', enc('two'));
  t.same(readdirSync(join(root, 'a', 'b')), ['c'], 'only the object remains after overwrite');
  // A temp file left by a crash (same naming scheme) stays invisible.
  writeFileSync(join(root, 'a', 'b', '.coffer-tmp\\deadbeef'), 'partial');
  writeFileSync(join(root, 'a', 'b', 'bad\\name'), 'not a key');
  t.same(
    (await store.list('a/')).objects.map((o) => o.key),
    ['a/b/c'],
    'temp files and names no key can have are not listed',
  );
  await store.delete('a/b/c');
  t.ok(existsSync(join(root, 'a', 'b')), 'directory with a stray file is kept');
  await store.put('x/y/z', enc('z'));
  await store.delete('x/y/z');
  t.notOk(existsSync(join(root, 'x')), 'empty parent directories are pruned');
  t.ok(existsSync(root), 'the root itself is kept');
  await store.put('x', enc('file'));
  await expectCode(t, store.put('x/under', enc('y')), 'ERR_OBJECTSTORE_REJECTED', 'key under a file key');
  t.equal(await store.head('a'), null, 'a directory is not an object');
  await expectCode(t, store.get('a'), 'ERR_OBJECTSTORE_NOT_FOUND', 'get of a directory');
  await store.delete('a');
  t.ok(existsSync(join(root, 'a')), 'delete of a directory name is a no-op');
});

t.test('fs: a missing root behaves as an empty store and is created on write', async (t) => {
  const root = join(tempDir(t), 'not', 'yet');
  const store = createFsStore({ root });
  t.same(await store.list(''), { objects: [] }, 'empty list');
  t.equal(await store.head('k'), null, 'head null');
  await expectCode(t, store.get('k'), 'ERR_OBJECTSTORE_NOT_FOUND', 'get');
  await store.delete('k');
  await store.put('k', enc('v'));
  t.equal(dec(await store.get('k')), 'v', 'created on first write');
});

t.test('openStore: file URLs and plain paths', async (t) => {
  const root = tempDir(t);
  const a = openStore(pathToFileURL(root).href);
  t.equal(a.description, `fs:${root}`, 'file URL');
  await a.put('k', enc('v'));
  const b = openStore(root);
  t.equal(dec(await b.get('k')), 'v', 'plain path is the same store');
  await expectCode(
    t,
    Promise.resolve().then(() => openStore('ftp://x/y')),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'scheme',
  );
  await expectCode(
    t,
    Promise.resolve().then(() => openStore('')),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'empty',
  );
  await expectCode(
    t,
    Promise.resolve().then(() => openStore('file://host/share')),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'remote file URL',
  );
  await expectCode(
    t,
    Promise.resolve().then(() => createFsStore({ root: '' })),
    'ERR_OBJECTSTORE_INVALID_CONFIG',
    'empty root',
  );
});

t.test(
  'fs: onBodyWritten frees the body before the put settles, once, and not for a refused body',
  async (t) => {
    const store = createFsStore({ root: join(tempDir(t), 'store') });
    const body = enc('shard bytes');
    let calls = 0;
    let settled = false;
    const put = store
      .put('runs/a.bin', body, {
        contentLength: body.length,
        onBodyWritten: () => {
          calls++;
          t.equal(settled, false, 'called before put settles');
          body.fill(0); // the caller reuses its buffer: the stored object must not change
        },
      })
      .then(() => {
        settled = true;
      });
    await put;
    t.equal(calls, 1, 'called once');
    t.equal(dec(await store.get('runs/a.bin')), 'shard bytes', 'object holds the bytes as written');
    let refused = 0;
    await expectCode(
      t,
      store.put('runs/b.bin', enc('abc'), { contentLength: 4, onBodyWritten: () => refused++ }),
      'ERR_OBJECTSTORE_REJECTED',
      'length mismatch',
    );
    t.equal(refused, 0, 'not called when the body is refused');
  },
);
