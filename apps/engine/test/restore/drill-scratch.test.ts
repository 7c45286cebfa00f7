/**
 * Issue #13 item 2, drills: the original attack was an operator repointing a job at a server of
 * theirs and calling `POST /admin/drill/run`, which restored the decrypted latest run into the
 * job's current source. Now a job cannot name a host at all, and a drill writes only into the
 * owner-configured scratch target: an operator who repoints the job (another database, another key
 * prefix) and drills gets a passing drill whose copy went to the scratch database and was removed;
 * neither the repointed namespace nor the live source receives a key. Without a scratch target a
 * redis drill ends `error` and writes nothing anywhere.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { redisUrl, tempDir } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t, { type Test as Tap } from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

const real = new URL(await redisUrl());
process.env.COFFER_TEST_DRILL_REDIS_PASSWORD = decodeURIComponent(real.password);
const plain = `redis://${real.hostname}:${real.port}`;
const SOURCE_DB = 6;
const REPOINTED_DB = 5;
const SCRATCH_DB = 7;
const P = `coffer-drill-scratch-${randomBytes(4).toString('hex')}:`;
const db = (n: number) => new Redis(real.toString(), { db: n, maxRetriesPerRequest: 2 });
const src = db(SOURCE_DB);
const repointed = db(REPOINTED_DB);
const scratch = db(SCRATCH_DB);
t.teardown(async () => {
  for (const c of [src, repointed, scratch]) {
    const k = await c.keys(`${P}*`);
    if (k.length > 0) await c.del(...k);
    c.disconnect();
  }
});
for (let i = 0; i < 40; i++) await src.set(`${P}k${i}`, `value-${i}-${randomBytes(16).toString('hex')}`);

async function world(t: Tap, withScratch: boolean) {
  const dir = tempDir(t, 'coffer-drill-scratch-');
  writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const conn = { type: 'redis', url: plain, passwordEnv: 'COFFER_TEST_DRILL_REDIS_PASSWORD' };
  writeFileSync(
    join(dir, 'connections.json'),
    JSON.stringify({
      connections: { prod: conn, 'scratch-redis': conn },
      ...(withScratch ? { scratch: { redis: { connection: 'scratch-redis', db: SCRATCH_DB } } } : {}),
    }),
  );
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const e = await startEngine(
    t,
    {
      PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
      PERIMETER_ACCESS_AUD: AUDIENCE,
      ENGINE_CONNECTIONS_FILE: join(dir, 'connections.json'),
      ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.pub'),
    },
    {
      testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert },
      rateLimit: { max: 1000, windowSeconds: 60 },
    },
  );
  await e.app.state.roles.assign({
    subject: `${ISSUER}#op-1`,
    role: 'operator',
    email: 'op-1@example.com',
    grantedBy: null,
  });
  const operator = {
    'perimeter-access-jwt-assertion': await keys.sign({ sub: 'op-1', email: 'op-1@example.com' }),
  };
  const post = (path: string, body: unknown, who: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers: who, body });
  const job = {
    id: 'cache',
    cadenceSeconds: 3600,
    source: { type: 'redis', connection: 'prod', db: SOURCE_DB, keyPrefix: P },
  };
  t.equal((await post('/jobs', job)).status, 200);
  const runId = (await post('/trigger', { id: 'cache' })).json().runId as string;
  await e.app.runs.idle();
  t.match(await e.app.state.runs.get(runId), { status: 'ok', records: 40 });
  // The operator repoints the job at a namespace of theirs, then drills it.
  const moved = await post(
    '/jobs',
    { ...job, source: { type: 'redis', connection: 'prod', db: REPOINTED_DB, keyPrefix: P } },
    operator,
  );
  t.equal(moved.status, 200, moved.text);
  // Every command the server receives during the drill (MONITOR): where the drill's writes went.
  const base = new Redis(real.toString(), { maxRetriesPerRequest: 2 });
  const monitor = await base.monitor();
  base.disconnect();
  const writes: Array<{ db: string; key: string }> = [];
  monitor.on('monitor', (_time: string, args: string[], _source: string, database: string) => {
    const cmd = String(args[0]).toUpperCase();
    if (
      ['RESTORE', 'SET', 'DEL', 'UNLINK', 'HSET', 'RPUSH', 'PEXPIREAT'].includes(cmd) &&
      String(args[1]).includes(P)
    )
      writes.push({ db: database, key: String(args[1]) });
  });
  const drill = await post('/drill/run', { job: 'cache' }, operator);
  t.equal(drill.status, 202, drill.text);
  for (let i = 0; i < 400 && e.app.drills.active; i++) await new Promise((r) => setTimeout(r, 25));
  const ev = (await http(`${e.url}/admin/drill-evidence?job=cache`, { headers: operator })).json()
    .evidence[0];
  await new Promise((r) => setTimeout(r, 100));
  monitor.disconnect();
  return { e, ev, runId, writes };
}

t.test('a repointed job: the drill writes to the scratch database only, and removes it', async (t) => {
  const { e, ev, runId, writes } = await world(t, true);
  t.match(
    ev,
    { job: 'cache', runId, sourceType: 'redis', verdict: 'pass', records: 40, matched: 40 },
    JSON.stringify(ev),
  );
  const restores = writes.filter((w) => w.db === String(SCRATCH_DB) && w.key.startsWith('coffer-scratch:'));
  t.ok(restores.length >= 40, `the drill wrote into the scratch database (${restores.length} writes)`);
  t.same(
    writes.filter((w) => w.db !== String(SCRATCH_DB) || !w.key.startsWith('coffer-scratch:')),
    [],
    'and nowhere else: not the repointed database, not the live source',
  );
  t.same(await repointed.keys(`${P}*`), [], 'nothing in the namespace the job was repointed at');
  t.same(await repointed.keys('coffer-*'), [], 'no drill key there either');
  t.equal((await src.keys(`${P}*`)).length, 40, 'the live source is unchanged');
  t.same(await src.keys('coffer-drill:*'), [], 'no drill key in the live source');
  t.same(await scratch.keys('coffer-scratch:*'), [], 'the scratch copy was removed');
  t.same(await e.app.state.settings.list('drill.scratch.'), [], 'the scratch namespace is forgotten');
});

t.test('no scratch target configured: the drill ends error and writes nothing', async (t) => {
  const { ev, runId, writes } = await world(t, false);
  t.same(writes, [], 'no write reached the server');
  t.match(ev, {
    job: 'cache',
    runId,
    sourceType: 'redis',
    verdict: 'error',
    reason: 'no scratch target for a redis drill',
  });
  t.equal(ev.bytes, 0, 'nothing restored');
  t.same(await repointed.keys(`${P}*`), [], 'nothing in the repointed namespace');
  t.equal((await src.keys(`${P}*`)).length, 40, 'the live source is unchanged');
  t.same(await src.keys('coffer-drill:*'), [], 'no drill key in the live source');
});
