import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createRedisSource } from '@coffer/sources';
import { redisUrl, tempDir } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t from 'tap';
import {
  type ApplyOptions,
  applyRestore,
  planRestore,
  runDrill,
  validateRestoreRequest,
} from '../src/index.ts';
import { backup, fsStore, keys, resolverOf } from './helpers.ts';

const url = await redisUrl();
const admin = new Redis(url);
const target = new Redis(url, { db: 3 });
t.teardown(async () => {
  await admin.quit();
  await target.quit();
});
const prefix = `coffer-restore-test:${randomBytes(5).toString('hex')}:`;
t.teardown(async () => {
  for (const c of [admin, target]) {
    const ks = await c.keys(`${prefix}*`);
    if (ks.length > 0) await c.del(...ks);
  }
});
await admin.set(`${prefix}plain`, 'hello');
await admin.set(`${prefix}hour`, 'lives an hour', 'PX', 3_600_000);
await admin.set(`${prefix}week`, 'lives a week', 'PX', 7 * 86_400_000);
await admin.hset(`${prefix}hash`, { a: '1', b: '2' });
await admin.rpush(`${prefix}list`, 'x', 'y');
await admin.zadd(`${prefix}zset`, 1, 'one', 2, 'two');
await admin.set(`${prefix}soon`, 'short', 'PX', 4000);

const base = tempDir(t, 'restore-redis-');
const store = fsStore(join(base, 'dest'));
await backup(store, createRedisSource({ type: 'redis', url, prefix, binding: 'job-kv' }), {
  job: 'job-kv',
  runId: 'run-1',
});
// Let `soon` expire so the archive holds a key whose expiry has passed.
while ((await admin.exists(`${prefix}soon`)) === 1) await new Promise((r) => setTimeout(r, 100));
await new Promise((r) => setTimeout(r, 50));

function opts(body: Record<string, unknown>, extra: Partial<ApplyOptions> = {}): ApplyOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request: validateRestoreRequest({ runId: 'run-1', target: { namespaceId: '3' }, ...body }),
    targetResolver: resolverOf({ 'job-kv': { type: 'redis', url, prefix } }),
    restoreRoots: [],
    ...extra,
  };
}

t.test('dry run: fidelity warning, targetExists, then apply with TTLs', async (t) => {
  await target.set(`${prefix}plain`, 'already here');
  const plan = await planRestore(opts({}));
  t.equal(plan.ok, true);
  t.equal(plan.plannedWrites, 7);
  t.equal(plan.target?.namespace, `db3 prefix ${JSON.stringify(prefix)}`);
  const fw = plan.fidelityWarnings.find((w) => w.name === '(kv expirations)');
  t.ok(fw, 'a (kv expirations) row');
  t.equal(fw?.expired, 1, 'the expired key');
  t.equal(fw?.expiringBeforeDeadline, 1, 'the key that lives an hour');
  const plainRow = plan.sample.find((r) => r.name === `${prefix}plain`);
  t.equal(plainRow?.targetExists, true);
  t.equal(plan.sample.find((r) => r.name === `${prefix}hash`)?.targetExists, false);
  t.match(plan.overwriteCheck, { existing: 1, absent: 6, complete: true });

  const skip = await applyRestore(opts({ onExisting: 'skip', confirm: true }));
  t.equal(skip.status, 'succeeded');
  t.equal(skip.written, 5);
  t.same(skip.skipped.map((s) => s.reason).sort(), [
    'exists in the target (onExisting: skip)',
    'expired before the apply (not written)',
  ]);
  t.equal(await target.get(`${prefix}plain`), 'already here', 'skip kept the existing key');

  const r = await applyRestore(opts({ confirm: true }));
  t.equal(r.written, 6);
  t.equal(await target.get(`${prefix}plain`), 'hello');
  t.same(await target.hgetall(`${prefix}hash`), { a: '1', b: '2' });
  t.same(await target.lrange(`${prefix}list`, 0, -1), ['x', 'y']);
  t.same(await target.zrange(`${prefix}zset`, '0', '-1', 'WITHSCORES'), ['one', '1', 'two', '2']);
  t.equal(await target.exists(`${prefix}soon`), 0, 'the expired key is not written');
  t.equal(await target.pttl(`${prefix}plain`), -1, 'no TTL stays none');
  for (const k of ['hour', 'week']) {
    const src = await admin.pexpiretime(`${prefix}${k}`);
    const dst = await target.pexpiretime(`${prefix}${k}`);
    // The source records expiresAt as its clock plus PTTL, so the instant is kept to within the listing's latency.
    t.ok(Math.abs(Number(dst) - Number(src)) <= 1000, `${k}: the same expiry instant (${dst} vs ${src})`);
  }
});

t.test('keys outside the target prefix are never planned', async (t) => {
  const other = `${prefix}other:`;
  const p = await planRestore({
    ...opts({}),
    targetResolver: resolverOf({ 'job-kv': { type: 'redis', url, prefix: other } }),
  });
  t.equal(p.plannedWrites, 0);
  t.equal(p.skipped[0]?.reason, 'key outside the target key prefix');
});

t.test('drill into a scratch prefix: pass, and scratch keys removed', async (t) => {
  const ev = await runDrill({
    store,
    runId: 'run-1',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: base, redis: { url, db: 4 } },
  });
  t.equal(ev.verdict, 'pass', JSON.stringify(ev));
  t.equal(ev.records, 7);
  t.equal(ev.notRestorable, 1, 'the expired key');
  t.equal(ev.matched, 6);
  const c = new Redis(url, { db: 4 });
  t.same(await c.keys('coffer-drill:*'), []);
  await c.quit();
});

t.test('drill: a set or hash kept as a hash table (DUMP not canonical) still matches by value', async (t) => {
  const p2 = `${prefix}tables:`;
  // A member over 64 bytes keeps the set a hash table on every Redis version (7.2 has listpack sets).
  await admin.sadd(`${p2}set`, 'm1', 'm2', 'm3', 'm4', 'm5', 'y'.repeat(100));
  await admin.hset(`${p2}hash`, { a: 'x'.repeat(100), b: Buffer.from([0, 255]), c: '3' });
  t.equal(await admin.object('ENCODING', `${p2}set`), 'hashtable', 'set kept as a hash table');
  await backup(store, createRedisSource({ type: 'redis', url, prefix: p2, binding: 'job-kv' }), {
    job: 'job-kv',
    runId: 'run-tables',
  });
  const ev = await runDrill({
    store,
    runId: 'run-tables',
    operationalSecretKey: keys().operational.secretKey,
    scratch: { dir: base, redis: { url, db: 4 } },
  });
  t.equal(ev.verdict, 'pass', JSON.stringify(ev));
  t.equal(ev.matched, 2);
  const c = new Redis(url, { db: 4 });
  t.same(await c.keys('coffer-drill:*'), [], 'scratch and comparison keys removed');
  await c.quit();
});
