import { randomBytes } from 'node:crypto';
import { redisUrl } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t from 'tap';
import { createRedisSource, redisKeyToName, redisNameToKey } from '../src/redis-source.ts';
import { isSkipped, type SourceConnector, type SourceRecordInfo } from '../src/types.ts';

const url = await redisUrl();
const admin = new Redis(url);
t.teardown(() => admin.quit());

async function bytes(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

async function records(src: SourceConnector, pageSize?: number): Promise<SourceRecordInfo[]> {
  const out: SourceRecordInfo[] = [];
  for await (const e of src.enumerate(pageSize === undefined ? {} : { pageSize })) {
    if (isSkipped(e)) throw new Error('redis never skips');
    out.push(e);
  }
  return out;
}

/** A fresh key prefix, deleted at teardown. */
function prefixFor(t: { teardown(fn: () => Promise<void>): void }): string {
  const prefix = `coffer-test:${randomBytes(6).toString('hex')}:`;
  t.teardown(async () => {
    const keys = await admin.keysBuffer(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
  });
  return prefix;
}

async function fill(p: string): Promise<Buffer[]> {
  await admin.set(`${p}str`, 'hello');
  await admin.set(`${p}ttl`, 'short-lived', 'PX', 3_600_000);
  await admin.hset(`${p}hash`, { a: '1', b: '2' });
  await admin.rpush(`${p}list`, 'x', 'y', 'z');
  await admin.sadd(`${p}set`, 'm', 'n');
  await admin.zadd(`${p}zset`, 1, 'one', 2, 'two');
  await admin.xadd(`${p}stream`, '*', 'field', 'value');
  const odd = [
    Buffer.concat([Buffer.from(p), Buffer.from([0xff, 0xfe, 0x00, 0x01])]), // not UTF-8
    Buffer.from(`${p}line\nbreak`), // control character
    Buffer.from(`${p}!b64:lookalike`),
  ];
  for (const k of odd) await admin.set(k, 'odd');
  for (let i = 0; i < 40; i++) await admin.set(`${p}n:${i}`, `v${i}`);
  return odd;
}

t.test('key names map one-to-one', async (t) => {
  const samples = [
    Buffer.from('plain:key'),
    Buffer.from([0xff, 0x00]),
    Buffer.from('!b64:x'),
    Buffer.from(''),
    Buffer.from('tab\there'),
  ];
  for (const k of samples) {
    const name = redisKeyToName(k);
    t.same(redisNameToKey(name), k, JSON.stringify(name));
  }
  t.equal(redisKeyToName(Buffer.from('plain:key')), 'plain:key');
  t.equal(redisNameToKey('!b64:***'), null);
  t.equal(redisNameToKey('!b64:cGxhaW4'), null, 'a plain key is never named in escaped form');
});

t.test('lists every key once, page by page, with values, types and TTLs', async (t) => {
  const p = prefixFor(t);
  const odd = await fill(p);
  await admin.set('coffer-test:outside-prefix', 'not listed');
  t.teardown(() => admin.del('coffer-test:outside-prefix'));
  const src = createRedisSource({ type: 'redis', url, prefix: p, binding: 'cache' });
  t.teardown(() => src.close());
  const recs = await records(src, 3);
  const names = recs.map((r) => r.name).sort();
  t.equal(names.length, 50, 'every key under the prefix, no repeats');
  t.equal(new Set(names).size, 50);
  for (const k of odd) t.ok(names.includes(redisKeyToName(k)));
  t.ok(names.includes(`${p}!b64:lookalike`), 'the marker only matters at the start of a name');
  const byName = new Map(recs.map((r) => [r.name, r]));
  t.equal(byName.get(`${p}hash`)?.metadata.type, 'hash');
  t.equal(byName.get(`${p}stream`)?.metadata.type, 'stream');
  t.equal(byName.get(`${p}str`)?.metadata.expiresAt, null);
  t.equal(byName.get(`${p}str`)?.metadata.pttl, -1);
  const ttl = byName.get(`${p}ttl`)!;
  t.ok(
    (ttl.metadata.pttl as number) > 3_500_000 && (ttl.metadata.expiresAt as number) > Date.now() + 3_500_000,
  );
  t.equal(ttl.sourceType, 'redis');
  t.equal(ttl.binding, 'cache');
  t.equal(ttl.namespace, 'db0');
  // The bytes are the DUMP payload.
  const dump = await admin.dumpBuffer(`${p}hash`);
  t.same(await bytes(await src.read(`${p}hash`)), dump);
  t.same(Buffer.from(await src.readRange(`${p}hash`, 2, 6)), dump!.subarray(2, 7));
  t.equal(byName.get(`${p}hash`)?.size, dump!.length);

  // A listing resumes from its cursor in another connector (another process after a restart).
  const a = createRedisSource({ type: 'redis', url, prefix: p });
  const b = createRedisSource({ type: 'redis', url, prefix: p });
  t.teardown(() => Promise.all([a.close(), b.close()]));
  const first = await a.list({ pageSize: 5 });
  t.ok(first.cursor !== undefined);
  const rest: string[] = [];
  for await (const e of b.enumerate({ cursor: first.cursor!, pageSize: 5 })) rest.push(e.name);
  t.same([...new Set([...first.records.map((r) => r.name), ...rest])].sort(), names);
});

t.test('restore writes values back with their expiry instant', async (t) => {
  const p = prefixFor(t);
  await fill(p);
  const src = createRedisSource({ type: 'redis', url, prefix: p });
  t.teardown(() => src.close());
  const recs = await records(src);
  const saved = new Map<string, { body: Buffer; meta: Record<string, unknown> }>();
  for (const r of recs) saved.set(r.name, { body: await bytes(await src.read(r.name)), meta: r.metadata });
  const before = {
    hash: await admin.hgetall(`${p}hash`),
    zset: await admin.zrange(`${p}zset`, '0', '-1', 'WITHSCORES'),
    stream: await admin.xrange(`${p}stream`, '-', '+'),
    odd: await admin.getBuffer(Buffer.concat([Buffer.from(p), Buffer.from([0xff, 0xfe, 0x00, 0x01])])),
  };
  const keys = await admin.keysBuffer(`${p}*`);
  await admin.del(...keys);

  const dst = createRedisSource({ type: 'redis', url, prefix: p, replace: false });
  t.teardown(() => dst.close());
  for (const [name, { body, meta }] of saved) {
    t.equal(await dst.exists(name), false);
    t.same(await dst.write(name, body, meta), { written: true });
  }
  t.same(await admin.hgetall(`${p}hash`), before.hash);
  t.same(await admin.zrange(`${p}zset`, '0', '-1', 'WITHSCORES'), before.zset);
  t.same(await admin.xrange(`${p}stream`, '-', '+'), before.stream);
  t.same(
    await admin.getBuffer(Buffer.concat([Buffer.from(p), Buffer.from([0xff, 0xfe, 0x00, 0x01])])),
    before.odd,
  );
  const expireAt = await admin.pexpiretime(`${p}ttl`);
  t.equal(expireAt, saved.get(`${p}ttl`)!.meta.expiresAt, 'same expiry instant (ABSTTL)');
  t.equal(await admin.pttl(`${p}str`), -1);

  // replace: false refuses an existing key; replace: true overwrites it.
  const str = saved.get(`${p}str`)!;
  await t.rejects(dst.write(`${p}str`, str.body, str.meta), { code: 'ERR_SOURCE_TARGET_EXISTS' });
  await admin.set(`${p}str`, 'changed');
  const over = createRedisSource({ type: 'redis', url, prefix: p });
  t.teardown(() => over.close());
  t.same(await over.write(`${p}str`, str.body, str.meta), { written: true });
  t.equal(await admin.get(`${p}str`), 'hello');
  // An expiry already past: not written.
  t.same(await over.write(`${p}gone`, str.body, { expiresAt: Date.now() - 1000 }), {
    written: false,
    reason: 'expired',
  });
  t.equal(await admin.exists(`${p}gone`), 0);
  // Not a payload; a key outside the prefix; a malformed escaped name.
  await t.rejects(over.write(`${p}junk`, Buffer.from('junk'), {}), { code: 'ERR_SOURCE_INVALID_RECORD' });
  await t.rejects(over.write('elsewhere', str.body, {}), { code: 'ERR_SOURCE_UNSAFE_NAME' });
  await t.rejects(over.write('!b64:@@', str.body, {}), { code: 'ERR_SOURCE_UNSAFE_NAME' });
});

t.test('vanished keys, the size ceiling, and binding faults are typed', async (t) => {
  const p = prefixFor(t);
  await admin.set(`${p}a`, randomBytes(100)); // incompressible: DUMP compresses strings
  await admin.set(`${p}b`, 'y');
  const src = createRedisSource({ type: 'redis', url, prefix: p, cacheBytes: 0, maxRecordBytes: 50 });
  t.teardown(() => src.close());
  const recs = await records(src);
  t.equal(recs.length, 2);
  await admin.del(`${p}b`);
  await t.rejects(src.read(`${p}b`), { code: 'ERR_SOURCE_RECORD_VANISHED', disposition: 'warn' });
  await t.rejects(src.read(`${p}a`), { code: 'ERR_SOURCE_RECORD_TOO_LARGE' });

  const wrong = url.replace(/\/\/:[^@]*@/, '//:not-the-password@');
  await t.rejects(createRedisSource({ type: 'redis', url: wrong }).list(), {
    code: 'ERR_SOURCE_BINDING',
    reason: 'source binding error',
  });
  await t.rejects(createRedisSource({ type: 'redis', url: 'redis://127.0.0.1:1' }).list(), {
    code: 'ERR_SOURCE_BINDING',
  });
  await t.rejects(createRedisSource({ type: 'redis', url, db: 999 }).list(), {
    code: 'ERR_SOURCE_RESOURCE_MISSING',
    reason: 'source resource missing',
  });
  t.throws(() => createRedisSource({ type: 'redis', url: 'http://x' }), {
    code: 'ERR_SOURCE_INVALID_CONFIG',
  });
  await t.rejects(src.list({ cursor: 'bogus' }), { code: 'ERR_SOURCE_INVALID_CURSOR' });
});
