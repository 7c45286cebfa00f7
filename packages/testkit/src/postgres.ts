/**
 * The loopback PostgreSQL server for tests. Settings come from `.test-services/postgres.env`,
 * written by `scripts/services/postgres.sh start` (our own cluster on 127.0.0.1:54329, role
 * `coffer` with a password and CREATEDB). When the file is absent or the server does not accept
 * the role, the helper runs `postgres.sh start` itself once per process (which installs first when
 * needed); with CI=true it never starts anything (CI's `scripts/test.sh` starts the servers) and
 * a missing server is a thrown error: a test failure, never a skip.
 * POSTGRES_URL set in the environment takes precedence over the file.
 * The URLs carry the password: never print them.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { readServiceEnv, repoRoot } from './tmp.ts';

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    await withClient(url, (c) => c.query('select 1'));
    return true;
  } catch {
    return false;
  }
}

function fromFile(): string | null {
  return readServiceEnv('postgres')?.POSTGRES_URL || null;
}

let pending: Promise<string> | undefined;

async function locate(): Promise<string> {
  const fromEnv = process.env.POSTGRES_URL;
  if (fromEnv) return fromEnv;
  const found = fromFile();
  if (found !== null && (await answers(found))) return found;
  if (process.env.CI === 'true') {
    throw new Error(
      'testkit: no PostgreSQL test server in CI (.test-services/postgres.env missing or not answering); ' +
        'scripts/services/postgres.sh start must run first',
    );
  }
  const script = join(repoRoot(), 'scripts', 'services', 'postgres.sh');
  const run = spawnSync('bash', [script, 'start'], { encoding: 'utf8', timeout: 300_000 });
  const why =
    run.status === 0 ? '' : (run.stderr || run.error?.message || '').trim().split('\n').slice(-3).join(' | ');
  const started = fromFile();
  if (why === '' && started !== null && (await answers(started))) return started;
  throw new Error(
    `testkit: no PostgreSQL test server; \`bash scripts/services/postgres.sh start\` failed: ${why}`,
  );
}

/** Databases left by runs more than an hour ago are dropped once per process (best effort). */
const STALE_SECONDS = 3600;

async function dropStale(base: string): Promise<void> {
  try {
    await withClient(base, async (c) => {
      const { rows } = await c.query<{ datname: string }>(
        "select datname from pg_database where datname ~ '^test_[0-9]+_[0-9a-f]+$'",
      );
      const cutoff = Math.floor(Date.now() / 1000) - STALE_SECONDS;
      for (const { datname } of rows) {
        if (Number(datname.split('_')[1]) < cutoff)
          await c.query(`drop database if exists ${datname} with (force)`);
      }
    });
  } catch {
    // Housekeeping only: a failure here must never fail a test.
  }
}

function serverUrl(): Promise<string> {
  pending ??= locate()
    .then(async (url) => {
      await dropStale(url);
      return url;
    })
    .catch((err: unknown) => {
      pending = undefined;
      throw err;
    });
  return pending;
}

/**
 * A fresh, empty database `test_<random>` on the loopback server, created for this call; returns
 * its URL (`postgres://coffer:<pw>@127.0.0.1:54329/test_<unix seconds>_<random>`). Starts the
 * server when needed outside CI; throws when no server can be had. Each call's name is unique, so
 * tests never see each other's rows; databases older than an hour are dropped by the next process
 * that asks for one.
 */
export async function postgresUrl(): Promise<string> {
  const base = await serverUrl();
  // test_<unix seconds>_<random>: the time lets a later process drop what an old run left.
  const name = `test_${Math.floor(Date.now() / 1000)}_${randomBytes(6).toString('hex')}`;
  await withClient(base, (c) => c.query(`create database ${name}`));
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
}
