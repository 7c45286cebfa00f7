/**
 * The ObjectStore contract: one suite every driver must pass (run by fs.test.ts against the
 * filesystem driver and by s3.test.ts against the S3 driver on the loopback server).
 */
import { createHash, randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Test } from 'tap';
import type { ObjectStore } from '../src/index.ts';
import { ObjectStoreError } from '../src/index.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

export interface ContractFeatures {
  /** The store refuses `ifNoneMatch: '*'` when the key exists (s3rver does not). */
  conditionalWrites: boolean;
  /** `bytes=0-0` returns one byte (s3rver returns the whole object). */
  oneByteRange: boolean;
  /** Listings come in UTF-8 byte order and paginate (s3rver lists in its own order, and its
   * continuation tokens need DES, which Node 24's OpenSSL lacks). */
  faithfulListing: boolean;
  /** Most bytes (beyond the baseline) the store may hold while streaming a 20 MiB body. */
  streamMemoryBound: number;
}

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

export async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(c);
  return Buffer.concat(parts);
}

export async function expectCode(
  t: Test,
  p: Promise<unknown>,
  code: string,
  what: string,
): Promise<ObjectStoreError> {
  try {
    await p;
  } catch (err) {
    t.ok(err instanceof ObjectStoreError, `${what}: ObjectStoreError`);
    t.equal((err as ObjectStoreError).code, code, `${what}: ${code}`);
    return err as ObjectStoreError;
  }
  t.fail(`${what}: expected ${code}, got success`);
  return new ObjectStoreError('ERR_OBJECTSTORE_FAULT', 'unreachable');
}

const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

export const INVALID_KEYS = [
  '',
  '/abs',
  '/etc/passwd',
  '..',
  '../x',
  'a/../../x',
  'a/./b',
  '.',
  'a//b',
  'a/',
  'nul\0byte',
  'back\\slash',
  'ctrl\u0001x',
  'x'.repeat(1025),
  'lone\uD800surrogate',
];

export function storeContract(
  t: Test,
  name: string,
  open: (t: Test) => Promise<ObjectStore>,
  features: ContractFeatures,
): void {
  t.test(`${name}: put, get, ranges, head, overwrite`, async (t) => {
    const store = await open(t);
    t.match(store.description, /\S/, 'has a description');
    await store.put('docs/hello.txt', enc('hello, world'), { contentType: 'text/plain' });
    t.equal(dec(await store.get('docs/hello.txt')), 'hello, world', 'whole get');
    t.equal(dec(await store.get('docs/hello.txt', { start: 7, end: 11 })), 'world', 'range, end inclusive');
    t.equal(dec(await store.get('docs/hello.txt', { start: 7 })), 'world', 'open-ended range');
    if (features.oneByteRange) {
      t.equal(dec(await store.get('docs/hello.txt', { start: 0, end: 0 })), 'h', 'one-byte range');
    }
    t.equal(
      dec(await store.get('docs/hello.txt', { start: 10, end: 999 })),
      'ld',
      'end past the object is clamped',
    );
    const err = await expectCode(
      t,
      store.get('docs/hello.txt', { start: 12 }),
      'ERR_OBJECTSTORE_REJECTED',
      'range past end',
    );
    t.equal(err.storeCode, 'InvalidRange', 'InvalidRange');
    await expectCode(
      t,
      store.get('docs/hello.txt', { start: 5, end: 2 }),
      'ERR_OBJECTSTORE_REJECTED',
      'end < start',
    );
    await expectCode(
      t,
      store.get('docs/hello.txt', { start: -1 }),
      'ERR_OBJECTSTORE_REJECTED',
      'negative start',
    );
    t.equal(dec(await collect(await store.getStream('docs/hello.txt'))), 'hello, world', 'getStream whole');
    t.equal(
      dec(await collect(await store.getStream('docs/hello.txt', { start: 2, end: 4 }))),
      'llo',
      'getStream range',
    );
    const info = await store.head('docs/hello.txt');
    t.equal(info?.key, 'docs/hello.txt', 'head key');
    t.equal(info?.size, 12, 'head size');
    t.ok(info?.lastModified instanceof Date, 'head lastModified');
    await store.put('docs/hello.txt', enc('replaced'));
    t.equal(dec(await store.get('docs/hello.txt')), 'replaced', 'overwrite replaces');
    await store.put('empty', new Uint8Array(0));
    t.equal((await store.get('empty')).byteLength, 0, 'empty object');
    t.equal((await store.head('empty'))?.size, 0, 'empty head size');
    t.equal((await collect(await store.getStream('empty'))).byteLength, 0, 'empty stream');
    const odd = 'unicode/dé jà vu ✓/ключ.bin';
    await store.put(odd, enc('u'));
    t.equal(dec(await store.get(odd)), 'u', 'unicode and space key');
    t.equal((await store.list('unicode/')).objects[0]?.key, odd, 'unicode key listed as written');
  });

  t.test(`${name}: get into a caller's buffer`, async (t) => {
    const store = await open(t);
    await store.put('into/a', enc('hello, world'));
    const into = new Uint8Array(64).fill(7);
    const whole = await store.get('into/a', undefined, { into });
    t.equal(whole.buffer, into.buffer, 'a view of the caller buffer when it fits');
    t.equal(whole.byteOffset, into.byteOffset, 'from its start');
    t.equal(dec(whole), 'hello, world', 'the bytes');
    t.equal(into[12], 7, 'nothing written past the object');
    const inner = into.subarray(8, 16);
    const ranged = await store.get('into/a', { start: 7 }, { into: inner });
    t.equal(ranged.buffer, into.buffer, 'a range into a view');
    t.equal(ranged.byteOffset, 8, 'at the view offset');
    t.equal(dec(ranged), 'world', 'range bytes');
    const small = new Uint8Array(4).fill(9);
    const fresh = await store.get('into/a', undefined, { into: small });
    t.not(fresh.buffer, small.buffer, 'a fresh buffer when it does not fit');
    t.equal(dec(fresh), 'hello, world', 'whole bytes then');
    t.same([...small], [9, 9, 9, 9], 'the small buffer untouched');
    await expectCode(
      t,
      store.get('into/absent', undefined, { into }),
      'ERR_OBJECTSTORE_NOT_FOUND',
      'absent with into',
    );
  });

  t.test(`${name}: get with maxBytes refuses a larger object before reading it`, async (t) => {
    const store = await open(t);
    await store.put('bound/a', enc('0123456789'));
    t.equal(dec(await store.get('bound/a', undefined, { maxBytes: 10 })), '0123456789', 'exactly the bound');
    t.equal(
      dec(await store.get('bound/a', { start: 2, end: 4 }, { maxBytes: 3 })),
      '234',
      'a range within it',
    );
    const into = new Uint8Array(64).fill(7);
    await expectCode(
      t,
      store.get('bound/a', undefined, { maxBytes: 9, into }),
      'ERR_OBJECTSTORE_TOO_LARGE',
      'over',
    );
    t.same([...into.subarray(0, 4)], [7, 7, 7, 7], 'nothing read into the caller buffer');
    await expectCode(
      t,
      store.get('bound/a', { start: 1 }, { maxBytes: 8 }),
      'ERR_OBJECTSTORE_TOO_LARGE',
      'a range over the bound',
    );
    await expectCode(
      t,
      store.get('bound/a', undefined, { maxBytes: -1 }),
      'ERR_OBJECTSTORE_INVALID_CONFIG',
      'bad bound',
    );
    await expectCode(
      t,
      store.get('bound/absent', undefined, { maxBytes: 1 }),
      'ERR_OBJECTSTORE_NOT_FOUND',
      'absent with a bound',
    );
  });

  t.test(`${name}: list order, prefixes and pagination`, async (t) => {
    const store = await open(t);
    const keys: string[] = [];
    for (let i = 0; i < 23; i++) keys.push(`p/item-${String(i).padStart(3, '0')}`);
    // (No key is both an object and a prefix of others: a filesystem cannot hold that.)
    keys.push('p/a/b', 'p/a-c', 'p/a0', 'p/B', 'p/a/bc', 'q/other', 'p2/x');
    // Sequential puts with a small pool keep servers happy and the test deterministic.
    await Promise.all(
      [0, 1, 2, 3].map(async (w) => {
        for (let i = w; i < keys.length; i += 4) await store.put(keys[i]!, enc(keys[i]!));
      }),
    );
    const expected = keys.filter((k) => k.startsWith('p/')).sort(byBytes);
    // s3rver lists in its own order: compare sets there, order everywhere else.
    const inOrder = (ks: string[]) => (features.faithfulListing ? ks : [...ks].sort(byBytes));
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    const limit = features.faithfulListing ? 10 : 1000;
    do {
      const page = await store.list('p/', cursor === undefined ? { limit } : { limit, cursor });
      pages++;
      t.ok(page.objects.length <= limit, 'page respects limit');
      for (const o of page.objects) {
        seen.push(o.key);
        t.equal(o.size, Buffer.byteLength(o.key), `size of ${o.key}`);
      }
      cursor = page.cursor;
    } while (cursor !== undefined && pages < 10);
    t.equal(pages, features.faithfulListing ? 3 : 1, 'three pages of 10');
    t.same(inOrder(seen), expected, 'every key once, in UTF-8 byte order (p/B < p/a-c < p/a/b < p/a0)');
    const all: string[] = [];
    for await (const o of store.listAll('p/')) all.push(o.key);
    t.same(inOrder(all), expected, 'listAll matches');
    t.same(
      inOrder((await store.list('p/a')).objects.map((o) => o.key)),
      ['p/a-c', 'p/a/b', 'p/a/bc', 'p/a0'],
      'partial last segment prefix',
    );
    t.same(
      inOrder((await store.list('p/a/')).objects.map((o) => o.key)),
      ['p/a/b', 'p/a/bc'],
      'directory prefix',
    );
    t.same((await store.list('nothing/')).objects, [], 'empty listing');
    t.equal((await store.list('nothing/')).cursor, undefined, 'no cursor on an empty listing');
    const everything = (await store.list('')).objects.map((o) => o.key);
    t.ok(everything.includes('q/other') && everything.includes('p2/x'), 'empty prefix lists everything');
    const exact = await store.list('p/', { limit: expected.length });
    t.equal(exact.objects.length, expected.length, 'one page holds them all');
    t.equal(exact.cursor, undefined, 'no cursor when the page holds the rest');
    await expectCode(
      t,
      store.list('p/', { cursor: 'not a cursor!' }),
      'ERR_OBJECTSTORE_INVALID_KEY',
      'bad cursor',
    );
    await expectCode(t, store.list('../'), 'ERR_OBJECTSTORE_INVALID_KEY', 'bad prefix');
    await expectCode(t, store.list('/abs'), 'ERR_OBJECTSTORE_INVALID_KEY', 'absolute prefix');
  });

  t.test(`${name}: delete and not-found`, async (t) => {
    const store = await open(t);
    await store.put('gone/soon', enc('x'));
    await store.delete('gone/soon');
    t.equal(await store.head('gone/soon'), null, 'head null after delete');
    await expectCode(t, store.get('gone/soon'), 'ERR_OBJECTSTORE_NOT_FOUND', 'get after delete');
    await expectCode(t, store.getStream('gone/soon'), 'ERR_OBJECTSTORE_NOT_FOUND', 'getStream after delete');
    await expectCode(
      t,
      store.get('never/was', { start: 0, end: 3 }),
      'ERR_OBJECTSTORE_NOT_FOUND',
      'range get absent',
    );
    await store.delete('never/was');
    await store.delete('never');
    t.pass('deleting an absent key is not an error');
    t.same((await store.list('gone/')).objects, [], 'nothing listed');
    const err = await expectCode(t, store.get('missing/key'), 'ERR_OBJECTSTORE_NOT_FOUND', 'message check');
    t.equal(err.key, 'missing/key', 'error carries the key');
    t.match(err.message, 'missing/key', 'message names the key');
    t.match(err.message, store.description, 'message names the store');
  });

  t.test(`${name}: deletes at once in one prefix, and a put beside them`, async (t) => {
    // Each delete of the filesystem driver prunes the directories it empties: concurrent deletes
    // of one directory's last objects each find it gone under them (a commit replaces a run's
    // index and signature together), and that is success, not a missing object.
    const store = await open(t);
    for (let round = 0; round < 20; round++) {
      const keys = ['a', 'b', 'c', 'd'].map((k) => `deep/run-${round}/${k}`);
      await Promise.all(keys.map((k) => store.put(k, enc(k))));
      await Promise.all([...keys.map((k) => store.delete(k)), store.put(`deep/run-${round}/e`, enc('e'))]);
      for (const k of keys) t.equal(await store.head(k), null, `${k} deleted`);
      t.equal(dec(await store.get(`deep/run-${round}/e`)), 'e', 'the put beside them stands');
      await Promise.all([store.delete(`deep/run-${round}/e`), store.delete(`deep/run-${round}/e`)]);
    }
    t.same((await store.list('deep/')).objects, [], 'nothing left');
  });

  t.test(`${name}: ifNoneMatch`, async (t) => {
    const store = await open(t);
    await store.put('once', enc('first'), { ifNoneMatch: '*' });
    t.equal(dec(await store.get('once')), 'first', 'created');
    if (features.conditionalWrites) {
      await expectCode(
        t,
        store.put('once', enc('second'), { ifNoneMatch: '*' }),
        'ERR_OBJECTSTORE_PRECONDITION_FAILED',
        'second create',
      );
      await expectCode(
        t,
        store.put('once', chunks(enc('streamed')), { ifNoneMatch: '*' }),
        'ERR_OBJECTSTORE_PRECONDITION_FAILED',
        'second create, streamed',
      );
      t.equal(dec(await store.get('once')), 'first', 'object unchanged');
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, (_, i) => store.put('race', enc(`writer ${i}`), { ifNoneMatch: '*' })),
      );
      const won = results.filter((r) => r.status === 'fulfilled').length;
      const lost = results.filter(
        (r) =>
          r.status === 'rejected' &&
          r.reason instanceof ObjectStoreError &&
          r.reason.code === 'ERR_OBJECTSTORE_PRECONDITION_FAILED',
      ).length;
      t.equal(won, 1, 'exactly one concurrent create wins');
      t.equal(lost, 7, 'the others get PRECONDITION_FAILED');
    } else {
      t.comment('this server ignores If-None-Match; only the happy path is checked');
    }
    await store.put('once', enc('third'));
    t.equal(dec(await store.get('once')), 'third', 'unconditional put still overwrites');
  });

  t.test(`${name}: streamed put of 20 MiB with bounded memory`, async (t) => {
    const store = await open(t);
    const chunkSize = 256 * 1024 + 7; // deliberately not a power of two
    const total = 20 * 1024 * 1024;
    const hash = createHash('sha256');
    gc();
    const baseline = process.memoryUsage().arrayBuffers;
    let peak = 0;
    let sent = 0;
    async function* body(): AsyncGenerator<Uint8Array> {
      while (sent < total) {
        const chunk = randomBytes(Math.min(chunkSize, total - sent));
        hash.update(chunk);
        sent += chunk.byteLength;
        if ((sent / chunkSize) % 8 < 1) {
          gc();
          peak = Math.max(peak, process.memoryUsage().arrayBuffers - baseline);
        }
        yield chunk;
      }
    }
    await store.put('big/stream.bin', body());
    gc();
    peak = Math.max(peak, process.memoryUsage().arrayBuffers - baseline);
    t.equal(sent, total, 'whole body consumed');
    t.ok(
      peak < features.streamMemoryBound,
      `memory held while streaming stays bounded (${(peak / 2 ** 20).toFixed(1)} MiB < ${features.streamMemoryBound / 2 ** 20} MiB)`,
    );
    t.equal((await store.head('big/stream.bin'))?.size, total, 'size');
    const back = createHash('sha256');
    let got = 0;
    for await (const c of await store.getStream('big/stream.bin')) {
      back.update(c);
      got += c.byteLength;
    }
    t.equal(got, total, 'read back size');
    t.equal(back.digest('hex'), hash.digest('hex'), 'read back bytes');
    const mid = await store.get('big/stream.bin', { start: 9 * 1024 * 1024 - 3, end: 9 * 1024 * 1024 + 4 });
    t.equal(mid.byteLength, 8, 'range across a part boundary');
    await store.delete('big/stream.bin');
  });

  t.test(`${name}: body length checks and failing bodies`, async (t) => {
    const store = await open(t);
    const e1 = await expectCode(
      t,
      store.put('len/short', chunks(enc('abc')), { contentLength: 5 }),
      'ERR_OBJECTSTORE_REJECTED',
      'short body',
    );
    t.equal(e1.storeCode, 'IncompleteBody', 'IncompleteBody');
    await expectCode(
      t,
      store.put('len/long', chunks(enc('abcdef')), { contentLength: 2 }),
      'ERR_OBJECTSTORE_REJECTED',
      'long body',
    );
    t.equal(await store.head('len/short'), null, 'nothing stored for a short body');
    t.equal(await store.head('len/long'), null, 'nothing stored for a long body');
    await store.put('len/exact', chunks(enc('abc')), { contentLength: 3 });
    t.equal(dec(await store.get('len/exact')), 'abc', 'exact length accepted');
    const boom = new Error('source exploded');
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield enc('partial');
      throw boom;
    }
    try {
      await store.put('len/failed', failing());
      t.fail('failing body should fail the put');
    } catch (err) {
      t.equal(err, boom, "the caller's own error comes back unchanged");
    }
    t.equal(await store.head('len/failed'), null, 'nothing stored for a failing body');
    const leftovers = (await store.list('len/')).objects.map((o) => o.key);
    t.same(leftovers, ['len/exact'], 'no partial or temporary objects listed');
  });

  t.test(`${name}: invalid keys are refused everywhere`, async (t) => {
    const store = await open(t);
    for (const key of INVALID_KEYS) {
      const label = JSON.stringify(key.slice(0, 20));
      await expectCode(t, store.put(key, enc('x')), 'ERR_OBJECTSTORE_INVALID_KEY', `put ${label}`);
      await expectCode(t, store.get(key), 'ERR_OBJECTSTORE_INVALID_KEY', `get ${label}`);
      await expectCode(t, store.getStream(key), 'ERR_OBJECTSTORE_INVALID_KEY', `getStream ${label}`);
      await expectCode(t, store.head(key), 'ERR_OBJECTSTORE_INVALID_KEY', `head ${label}`);
      await expectCode(t, store.delete(key), 'ERR_OBJECTSTORE_INVALID_KEY', `delete ${label}`);
    }
    await expectCode(t, store.list('', { limit: 0 }), 'ERR_OBJECTSTORE_INVALID_CONFIG', 'limit 0');
    await expectCode(t, store.list('', { limit: 1001 }), 'ERR_OBJECTSTORE_INVALID_CONFIG', 'limit 1001');
    await store.put('.hidden/..dots/...', enc('ok'));
    t.equal(
      dec(await store.get('.hidden/..dots/...')),
      'ok',
      'dot-leading segments that are not . or .. are fine',
    );
  });
}

export async function* chunks(bytes: Uint8Array, size = 2): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.byteLength; i += size) yield bytes.slice(i, i + size);
}
