/**
 * The loopback Redis server for tests. Settings come from `.test-services/redis.env`, written by
 * `scripts/services/redis.sh start` (redis-server on 127.0.0.1:63790 with a password). When the file
 * is absent or the server does not answer, the helper runs `redis.sh install` and `redis.sh start`
 * itself once per process; with CI=true it never starts anything (CI's `scripts/test.sh` starts the
 * servers) and a missing server is a thrown error: a test failure, never a skip.
 * REDIS_URL set in the environment takes precedence over the file.
 * The URL carries the password: never print it.
 */
import { spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { join } from 'node:path';
import { readServiceEnv, repoRoot } from './tmp.ts';

function answers(url: string): Promise<boolean> {
  let host: string;
  let port: number;
  try {
    const u = new URL(url);
    host = u.hostname || '127.0.0.1';
    port = Number(u.port || 6379);
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(3000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

function fromFile(): string | null {
  return readServiceEnv('redis')?.REDIS_URL || null;
}

let pending: Promise<string> | undefined;

async function locate(): Promise<string> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) return fromEnv;
  const found = fromFile();
  if (found !== null && (await answers(found))) return found;
  if (process.env.CI === 'true') {
    throw new Error(
      'testkit: no Redis test server in CI (.test-services/redis.env missing or not answering); ' +
        'scripts/services/redis.sh start must run first',
    );
  }
  const script = join(repoRoot(), 'scripts', 'services', 'redis.sh');
  let why = '';
  for (const step of ['install', 'start']) {
    const run = spawnSync('bash', [script, step], { encoding: 'utf8', timeout: 240_000 });
    if (run.status !== 0) {
      why = `${step}: ${(run.stderr || run.error?.message || '').trim().split('\n').slice(-3).join(' | ')}`;
      break;
    }
  }
  const started = fromFile();
  if (why === '' && started !== null && (await answers(started))) return started;
  throw new Error(`testkit: no Redis test server; \`bash scripts/services/redis.sh start\` failed: ${why}`);
}

/**
 * The loopback Redis server's URL (`redis://:password@127.0.0.1:63790`). Starts the server when
 * needed outside CI; throws when no server can be had. Tests share the server: give each test its
 * own key prefix (and SCAN only under it) or its own database number (the server has 32).
 */
export function redisUrl(): Promise<string> {
  pending ??= locate().catch((err: unknown) => {
    pending = undefined;
    throw err;
  });
  return pending;
}
