/**
 * Restore of a `redis` source end to end through HTTP against a started engine and the loopback
 * Redis: keys of every common type (string with binary bytes, hash, list, set, sorted set, stream,
 * a binary key name) with and without TTLs, backed up by a real run; a dry run with its
 * expirations fidelity warning (a key that expired since the backup, a key expiring before the
 * apply deadline), `targetExists` on the sample and the overwrite check; an apply into another
 * database compared value by value, byte for byte, TTLs restored to the original instant (never
 * persisted without one), the expired key reported skipped, not written; `onExisting: skip` into a
 * target that already holds some keys (reported skipped, those keys untouched); a drill; a shard
 * tampered between dry run and apply (aborted in phase one, zero keys written).
 *
 * Isolation: the test's keys live under a random prefix in databases 11 (source) and 12 to 14
 * (targets), so files running in parallel on the shared server never meet.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { redisUrl } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t from 'tap';
import { connectionsFile, restoreWorld } from './helpers.ts';

const url = new URL(await redisUrl());
const PASSWORD_ENV = 'COFFER_TEST_RESTORE_REDIS_PASSWORD';
process.env[PASSWORD_ENV] = decodeURIComponent(url.password);
const plainUrl = `redis://${url.hostname}:${url.port}`;
const P = `coffer-restore-e2e-${randomBytes(6).toString('hex')}:`;
const client = (db: number) => new Redis(url.toString(), { db, maxRetriesPerRequest: 2 });
const src = client(11);
const fresh = client(12);
const partial = client(13);
t.teardown(async () => {
  for (const c of [src, fresh, partial]) {
    const keys = await c.keysBuffer(`${P}*`);
    if (keys.length > 0) await c.del(...keys);
    c.disconnect();
  }
});

const HOUR = 3600_000;
const binaryKey = Buffer.concat([Buffer.from(P), Buffer.from([0xff, 0x00, 0x7f, 0x80])]);
const bytes = randomBytes(3000);
async function seed(): Promise<void> {
  await src.set(`${P}str`, bytes);
  await src.set(`${P}str:ttl`, 'lives an hour', 'PX', HOUR);
  await src.set(`${P}str:long`, 'lives two days', 'PX', 48 * HOUR);
  await src.set(`${P}str:short`, 'dies soon', 'PX', 4000);
  await src.hset(`${P}hash`, { a: '1', b: Buffer.from([0, 1, 2, 255]), ünï: 'cödé' });
  await src.pexpire(`${P}hash`, 2 * HOUR);
  await src.rpush(`${P}list`, 'x', 'y', 'z', 'x');
  await src.sadd(`${P}set`, 'm1', 'm2', 'm3');
  await src.zadd(`${P}zset`, 1.5, 'one', -2, 'two', 1e10, 'three');
  await src.xadd(`${P}stream`, '1-1', 'f', 'v1');
  await src.xadd(`${P}stream`, '2-1', 'f', 'v2', 'g', 'w');
  await src.set(binaryKey, 'binary-named');
}

/** A key's value in a comparable form, read by type with Buffer replies (byte for byte). */
async function valueIn(c: Redis, key: string | Buffer): Promise<unknown> {
  const type = await c.type(key);
  const hex = (b: Buffer) => b.toString('hex');
  switch (type) {
    case 'string':
      return [type, hex((await c.getBuffer(key))!)];
    case 'hash': {
      const h = await c.hgetallBuffer(key);
      return [
        type,
        Object.entries(h)
          .map(([k, v]) => [k, hex(v)])
          .sort(),
      ];
    }
    case 'list':
      return [type, (await c.lrangeBuffer(key, 0, -1)).map(hex)];
    case 'set':
      return [type, (await c.smembersBuffer(key)).map(hex).sort()];
    case 'zset':
      return [type, await c.zrange(key, '0', '-1', 'WITHSCORES')];
    case 'stream':
      return [type, await c.xrange(key, '-', '+')];
    default:
      return [type];
  }
}

const SCRATCH_DB = 10;
const scratchDb = client(SCRATCH_DB);
t.teardown(() => scratchDb.disconnect());
const source = { type: 'redis', connection: 'test-redis', db: 11, keyPrefix: P };
const connections = connectionsFile(t, {
  connections: {
    'test-redis': { type: 'redis', url: plainUrl, passwordEnv: PASSWORD_ENV, restore: true },
    // The same server, but the owner did not allow restores through this connection.
    'ro-redis': { type: 'redis', url: plainUrl, passwordEnv: PASSWORD_ENV },
  },
  scratch: { redis: { connection: 'test-redis', db: SCRATCH_DB } },
});
const w = await restoreWorld(t, { ENGINE_CONNECTIONS_FILE: connections });
await seed();
const runId = await w.backUp('cache', source);
// The short-lived key is in the archive; wait until it is gone, so the dry run finds it expired.
for (let i = 0; i < 200 && (await src.exists(`${P}str:short`)) === 1; i++)
  await new Promise((r) => setTimeout(r, 50));
const liveKeys = (await src.keysBuffer(`${P}*`)).map((k) => k.toString('latin1')).sort();

t.test('dry run, apply into a fresh database: values byte for byte, TTLs restored', async (t) => {
  t.equal(liveKeys.length, 9, 'nine live keys in the source');
  const body = { runId, target: { namespaceId: '12' } };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const p = plan.json();
  t.match(p, {
    ok: true,
    mode: 'dry-run',
    job: 'cache',
    isLatest: true,
    recordsVerified: 10,
    plannedWrites: 10,
    target: { type: 'redis', binding: 'cache', namespace: '12' },
    overwriteCheck: {
      onExisting: 'overwrite',
      checked: 10,
      existing: 0,
      absent: 10,
      unknown: 0,
      complete: true,
    },
    dependencyWarnings: [],
  });
  t.ok(p.bytes > bytes.length, 'bytes summed');
  t.notMatch(JSON.stringify(p), url.password, 'no password in the plan');
  t.equal(p.sample.length, 10);
  t.ok(
    p.sample.every(
      (s: { targetExists?: boolean; sourceType: string }) =>
        s.targetExists === false && s.sourceType === 'redis',
    ),
    'every sample row says the key is absent from the target',
  );
  t.ok(
    p.sample.some((s: { name: string }) => s.name.startsWith('!b64:')),
    'the binary key is named in its escaped form',
  );
  t.same(p.fidelityWarnings, [
    {
      name: '(kv expirations)',
      reason:
        '1 key(s) already expired (an apply does not write them); 2 key(s) expire before the apply deadline',
      expired: 1,
      expiringBeforeDeadline: 2,
    },
  ]);
  t.equal((await fresh.keys(`${P}*`)).length, 0, 'a dry run writes nothing');

  const done = await w.apply({ ...body, planHash: p.planHash });
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.match(done.receipt, { written: 9, skippedCount: 1, failedCount: 0 });
  t.same(
    done.receipt.skipped.map((s: { name: string }) => s.name),
    [`${P}str:short`],
  );
  t.equal(done.receipt.skipped[0].reason, 'expired before the apply (not written)');

  const got = (await fresh.keysBuffer(`${P}*`)).map((k) => k.toString('latin1')).sort();
  t.same(got, liveKeys, 'the same keys, the expired one not written');
  for (const k of liveKeys) {
    const key = Buffer.from(k, 'latin1');
    t.same(await valueIn(fresh, key), await valueIn(src, key), `${JSON.stringify(k)} equal`);
    const [a, b] = [await src.pttl(key), await fresh.pttl(key)];
    if (a === -1) t.equal(b, -1, `${JSON.stringify(k)} has no TTL, as in the source`);
    else {
      t.ok(b > 0, `${JSON.stringify(k)} keeps a TTL (${b} ms)`);
      t.ok(Math.abs(a - b) < 60_000, `${JSON.stringify(k)} expires at the original instant (${a} vs ${b})`);
    }
  }
});

t.test('onExisting skip into a target that holds some keys', async (t) => {
  await partial.set(`${P}str`, 'already here');
  await partial.hset(`${P}hash`, { other: 'value' });
  const body = { runId, target: { namespaceId: '13' }, onExisting: 'skip', include: [P] };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  const p = plan.json();
  t.match(p, {
    ok: true,
    onExisting: 'skip',
    plannedWrites: 9,
    overwriteCheck: { onExisting: 'skip', checked: 9, existing: 2, absent: 7, complete: true },
  });
  // Selectors match record names: the binary key's escaped name (`!b64:...`) is not under P.
  t.same(p.skipped, [{ name: p.skipped[0]?.name, reason: 'not included by selector' }]);
  t.match(p.skipped[0]?.name, /^!b64:/);
  const exists = Object.fromEntries(
    p.sample.map((s: { name: string; targetExists: boolean }) => [s.name, s.targetExists]),
  );
  t.equal(exists[`${P}str`], true);
  t.equal(exists[`${P}hash`], true);
  t.equal(exists[`${P}list`], false);
  const overwrite = (await w.dryRun({ ...body, onExisting: 'overwrite' })).json();
  t.not(overwrite.planHash, p.planHash, 'onExisting: skip is part of the plan hash');

  const done = await w.apply(body);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.match(done.receipt, { written: 6, skippedCount: 3, failedCount: 0 });
  t.same(
    done.receipt.skipped.map((s: { name: string; reason: string }) => [s.name, s.reason]).sort(),
    [
      [`${P}hash`, 'exists in the target (onExisting: skip)'],
      [`${P}str`, 'exists in the target (onExisting: skip)'],
      [`${P}str:short`, 'expired before the apply (not written)'],
    ].sort(),
  );
  t.equal(await partial.get(`${P}str`), 'already here', 'an existing key is untouched');
  t.same(await partial.hgetall(`${P}hash`), { other: 'value' });
  t.equal(await partial.pttl(`${P}str`), -1, 'and keeps its (absent) TTL');
  t.same(await valueIn(partial, `${P}list`), await valueIn(src, `${P}list`), 'an absent key is written');
  t.ok((await partial.pttl(`${P}str:ttl`)) > 0, 'with its TTL');
});

t.test('refusals of a redis target', async (t) => {
  for (const [target, error] of [
    [{ namespaceId: 'db12' }, /database number/],
    [{ bucketName: 'b' }, /bucketName applies only to an s3 target/],
    [{ binding: 'no-such-job' }, /.+/],
  ] as const) {
    const r = await w.dryRun({ runId, target });
    t.equal(r.status, 400, r.text);
    t.match(r.json().error, error);
    t.notMatch(r.text, url.password);
  }
});

t.test('a connection without restore: true refuses the apply (the dry run still plans it)', async (t) => {
  const roRun = await w.backUp('cache-ro', { type: 'redis', connection: 'ro-redis', db: 11, keyPrefix: P });
  const body = { runId: roRun, target: { namespaceId: '13' } };
  const plan = await w.dryRun(body);
  t.equal(plan.status, 200, plan.text);
  t.match(plan.json().advisories, [{ code: 'ERR_RESTORE_TARGET_NOT_ALLOWED', message: /"ro-redis"/ }]);
  const before = (await partial.keysBuffer(`${P}*`)).length;
  const r = await w.post('/restore', { ...body, confirm: true, planHash: plan.json().planHash });
  t.equal(r.status, 400, r.text);
  t.match(r.json().error, /restores into connection "ro-redis" are not allowed .*"restore": true/);
  t.equal((await partial.keysBuffer(`${P}*`)).length, before, 'nothing written');
  const audit = (await w.get('/audit?action=restore-apply-denied')).json();
  t.match(JSON.stringify(audit), /target-not-allowed/, 'the refusal is audited');
  // Restoring the same run into a job whose connection allows restores is fine.
  const other = await w.post('/restore', { runId: roRun, target: { binding: 'cache', namespaceId: '13' } });
  t.equal(other.status, 200, other.text);
});

t.test('a drill restores into the scratch database only, compares, removes it', async (t) => {
  const before = (await src.keysBuffer(`${P}*`)).length;
  const ev = await w.drill('cache');
  t.match(ev, { kind: 'coffer-drill-evidence', job: 'cache', runId, sourceType: 'redis', verdict: 'pass' });
  t.same(ev.mismatched, []);
  t.equal((await src.keysBuffer(`${P}*`)).length, before, 'nothing written into the source database');
  t.same(await src.keys('coffer-scratch:*'), [], 'no scratch key in the source database');
  t.same(await src.keys('coffer-drill:*'), [], 'no drill key in the source database');
  t.same(await scratchDb.keys('coffer-scratch:*'), [], 'the scratch copy was removed');
  t.same(await w.e.app.state.settings.list('drill.scratch.'), [], 'the namespace is forgotten');
});

t.test('a shard tampered between dry run and apply: aborted, zero keys written', async (t) => {
  const target = client(14);
  t.teardown(() => target.disconnect());
  const body = { runId, target: { namespaceId: '14' } };
  const plan = (await w.dryRun(body)).json();
  t.equal(plan.ok, true);
  const shard = join(w.e.dataDir, 'destination', 'jobs', 'cache', 'runs', runId, 'shards', '000000.bin');
  const b = readFileSync(shard);
  b.writeUInt8(b.readUInt8(b.length - 40) ^ 1, b.length - 40);
  writeFileSync(shard, b);
  const done = await w.apply({ ...body, planHash: plan.planHash });
  t.equal(done.status, 'aborted', JSON.stringify(done));
  t.match(done.receipt, { written: 0, failure: { phase: 'verify' } });
  t.same(await target.keys(`${P}*`), [], 'nothing written into the target');
  const again = (await w.dryRun(body)).json();
  t.match(again, { ok: false, planHash: null }, 'the dry run now says it cannot read back');
});
