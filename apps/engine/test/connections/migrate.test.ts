/**
 * Start-up migration of jobs stored with the old inline redis/s3 shape: a job that exactly one
 * configured connection matches is rewritten to reference it and keeps working (a real run against
 * the loopback Redis); a job that no connection, or more than one, matches stays stored, gets one
 * clear log line naming what to configure (no secret), and its runs fail with `source binding
 * error` (code ERR_RUN_CONNECTION_UNCONFIGURED).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { redisUrl, tempDir } from '@coffer/testkit';
import { Redis } from 'ioredis';
import t from 'tap';
import { startEngine } from '../helpers/engine.ts';

const real = new URL(await redisUrl());
const PASSWORD = decodeURIComponent(real.password);
process.env.COFFER_TEST_MIGRATE_PASSWORD = PASSWORD;
process.env.COFFER_TEST_MIGRATE_KEY = 'migrate-key-id';
process.env.COFFER_TEST_MIGRATE_SECRET = 'migrate-secret-value-0123456789';
const hostPort = `${real.hostname}:${real.port}`;

const job = (id: string, source: Record<string, unknown>) => ({
  id,
  cadenceSeconds: 3600,
  enabled: true,
  destinations: ['default'],
  restoreTestCadenceSeconds: null,
  source,
});

t.test(
  'stored inline jobs: migrated when exactly one connection matches, else flagged and failing',
  async (t) => {
    const dir = tempDir(t, 'coffer-migrate-');
    writeFileSync(join(dir, 'bg.pub'), encodeKeyFile('recipient-public', generateRecipient().publicKey));
    const dataDir = join(dir, 'data');
    const prefix = `coffer-migrate-${randomBytes(4).toString('hex')}:`;
    const src = new Redis(real.toString(), { db: 8, maxRetriesPerRequest: 2 });
    t.teardown(async () => {
      const k = await src.keys(`${prefix}*`);
      if (k.length > 0) await src.del(...k);
      src.disconnect();
    });
    await src.set(`${prefix}k1`, 'v1');
    await src.set(`${prefix}k2`, 'v2');

    // The state as an engine before this change left it.
    const before = await startEngine(t, { ENGINE_DATA_DIR: dataDir });
    const jobs = before.app.state.jobs;
    await jobs.upsert(
      job('cache', {
        type: 'redis',
        url: `redis://${hostPort}/8`,
        passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD',
        keyPrefix: prefix,
      }),
    );
    await jobs.upsert(
      job('twice', {
        type: 'redis',
        url: `redis://${hostPort}`,
        passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD',
      }),
    );
    await jobs.upsert(
      job('nobody', {
        type: 'redis',
        url: 'redis://10.9.9.9:6379',
        passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD',
      }),
    );
    await jobs.upsert(
      job('assets', {
        type: 's3',
        bucket: 'assets-prod',
        endpoint: 'http://127.0.0.1:9',
        forcePathStyle: true,
        accessKeyIdEnv: 'COFFER_TEST_MIGRATE_KEY',
        secretAccessKeyEnv: 'COFFER_TEST_MIGRATE_SECRET',
      }),
    );
    await jobs.upsert(
      job('other-bucket', {
        type: 's3',
        bucket: 'not-listed',
        endpoint: 'http://127.0.0.1:9',
        accessKeyIdEnv: 'COFFER_TEST_MIGRATE_KEY',
        secretAccessKeyEnv: 'COFFER_TEST_MIGRATE_SECRET',
      }),
    );
    await before.app.close();

    writeFileSync(
      join(dir, 'connections.json'),
      JSON.stringify({
        connections: {
          cache: { type: 'redis', url: `redis://${hostPort}`, passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD' },
          // Same endpoint, but no password variable: does not match `cache` (credential names differ).
          'cache-open': { type: 'redis', url: `redis://${hostPort}` },
          assets: {
            type: 's3',
            endpoint: 'http://127.0.0.1:9/',
            forcePathStyle: true,
            accessKeyIdEnv: 'COFFER_TEST_MIGRATE_KEY',
            secretAccessKeyEnv: 'COFFER_TEST_MIGRATE_SECRET',
            buckets: ['assets-prod'],
          },
        },
      }),
    );
    const after = await startEngine(t, {
      ENGINE_DATA_DIR: dataDir,
      ENGINE_CONNECTIONS_FILE: join(dir, 'connections.json'),
      ENGINE_BREAK_GLASS_PUBLIC_KEY: join(dir, 'bg.pub'),
    });
    const st = after.app.state;
    const cache = await st.jobs.get('cache');
    t.same(
      cache?.config.source,
      { type: 'redis', connection: 'cache', keyPrefix: prefix, db: 8 },
      'rewritten, db kept from the url',
    );
    t.equal(cache?.configRev, 2, 'the rewrite is a new revision');
    t.same((await st.jobs.get('assets'))?.config.source, {
      type: 's3',
      connection: 'assets',
      bucket: 'assets-prod',
    });
    // `cache-open` has the same endpoint but another credential reference: only `cache` matches.
    t.match((await st.jobs.get('twice'))?.config.source, { type: 'redis', connection: 'cache' });
    for (const id of ['nobody', 'other-bucket']) {
      t.notOk(
        'connection' in (((await st.jobs.get(id))?.config.source ?? {}) as object),
        `${id} stays stored unmigrated`,
      );
    }
    const logs = after.logs.join('');
    t.match(
      logs,
      /job nobody is not migrated and its runs fail until fixed: no configured connection matches: configure exactly one, a redis connection with url redis:\/\/10\.9\.9\.9:6379 and passwordEnv COFFER_TEST_MIGRATE_PASSWORD/,
    );
    t.match(logs, /job other-bucket is not migrated.*an s3 connection with endpoint http:\/\/127\.0\.0\.1:9/);
    t.match(logs, /job cache: inline redis source now references connection cache/);
    t.equal(logs.match(/"event":"job-unmigrated"/g)?.length, 2, 'one line per unmigrated job');
    for (const secret of [PASSWORD, 'migrate-secret-value-0123456789'])
      t.notMatch(logs, secret, 'no secret logged');

    // The migrated job backs up through its connection; the unmigrated one fails, clearly.
    const ok = await after.app.runs.trigger('cache');
    const bad = await after.app.runs.trigger('nobody');
    await after.app.runs.idle();
    t.match(ok, { kind: 'started' });
    t.match(await st.runs.get((ok as { runId: string }).runId), { status: 'ok', records: 2 });
    t.match(await st.runs.get((bad as { runId: string }).runId), {
      status: 'failed',
      reason: 'source binding error',
      detail: { code: 'ERR_RUN_CONNECTION_UNCONFIGURED' },
    });
  },
);

t.test('a job that two connections match is not migrated', async (t) => {
  const dir = tempDir(t, 'coffer-migrate-2-');
  const dataDir = join(dir, 'data');
  const before = await startEngine(t, { ENGINE_DATA_DIR: dataDir });
  await before.app.state.jobs.upsert(
    job('twice', { type: 'redis', url: `redis://${hostPort}`, passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD' }),
  );
  await before.app.close();
  const conn = { type: 'redis', url: `redis://${hostPort}`, passwordEnv: 'COFFER_TEST_MIGRATE_PASSWORD' };
  writeFileSync(
    join(dir, 'connections.json'),
    JSON.stringify({ connections: { a: conn, b: { ...conn, restore: true } } }),
  );
  const after = await startEngine(t, {
    ENGINE_DATA_DIR: dataDir,
    ENGINE_CONNECTIONS_FILE: join(dir, 'connections.json'),
  });
  t.notOk('connection' in (((await after.app.state.jobs.get('twice'))?.config.source ?? {}) as object));
  t.match(
    after.logs.join(''),
    /job twice is not migrated.*2 configured connections match: configure exactly one/,
  );
});
