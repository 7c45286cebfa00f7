/**
 * Canary tests' engine: a started engine (SQLite or PostgreSQL) with HARNESS_TEST_FAULTS, a
 * break-glass public key, the default destination and `s3dest`, a fresh bucket on the loopback
 * S3 server under the prefix `dest` (credentials through the AWS SDK's environment variables, as
 * an operator would give them), and a files source for a job.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { createS3Store, type ObjectStore } from '@coffer/objectstore';
import { createTestBucket, postgresUrl, type TestBucket, tempDir } from '@coffer/testkit';
import type { BuildAppOptions } from '../../src/app.ts';
import { bearer, http, type Reply, type Started, startEngine } from '../helpers/engine.ts';

export const BACKENDS = ['sqlite', 'postgres'] as const;
export type Backend = (typeof BACKENDS)[number];
export const CONSOLE = 'https://console.coffer.test';

type T = { teardown(fn: () => void | Promise<void>): void };

export interface World {
  bucket: TestBucket;
  /** The bucket's root (to see every object, the canary's and the runs'). */
  root: ObjectStore;
  /** The destination as the engine sees it (prefix `dest`). */
  dest: ObjectStore;
  env: Record<string, string>;
  source: string;
}

/** A bucket, keys and a source; `env` starts an engine on them (same data dir and database each time). */
export async function world(t: T, backend: Backend): Promise<World> {
  const bucket = await createTestBucket('coffer-canary');
  process.env.AWS_ACCESS_KEY_ID = bucket.credentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = bucket.credentials.secretAccessKey;
  const dir = tempDir(t, 'coffer-canary-');
  const pub = join(dir, 'bg.pub');
  writeFileSync(pub, encodeKeyFile('recipient-public', generateRecipient().publicKey));
  const source = join(dir, 'source');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'a.txt'), 'alpha');
  writeFileSync(join(source, 'b.txt'), 'bravo');
  const s3 = (prefix: string) =>
    createS3Store({
      bucket: bucket.bucket,
      prefix,
      endpoint: bucket.endpoint,
      region: bucket.region,
      forcePathStyle: true,
      credentials: bucket.credentials,
    });
  const url = `s3://${bucket.bucket}/dest?endpoint=${encodeURIComponent(bucket.endpoint)}&region=${bucket.region}&forcePathStyle=true`;
  return {
    bucket,
    root: s3(''),
    dest: s3('dest'),
    source,
    env: {
      ENGINE_DATA_DIR: join(dir, 'data'),
      ENGINE_BREAK_GLASS_PUBLIC_KEY: pub,
      ENGINE_DESTINATIONS: `s3dest=${url}`,
      HARNESS_TEST_FAULTS: '1',
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    },
  };
}

export interface CanaryEngine extends Started {
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  post(path: string, body?: unknown): Promise<Reply>;
  /** Cookie headers of a fresh session for a person holding `role`. */
  session(role: string): Promise<Record<string, string>>;
}

/** Starts an engine of `w`; a short sweep grace so a test's consecutive flights sweep each other. */
export async function engine(
  t: T,
  w: World,
  options: Omit<BuildAppOptions, 'config'> = {},
): Promise<CanaryEngine> {
  const e = await startEngine(t, w.env, { canary: { sweepGraceMs: 0 }, ...options });
  const get = (path: string, headers: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers });
  const post = (path: string, body: unknown = {}) =>
    http(`${e.url}/admin${path}`, { headers: bearer(), body });
  return {
    ...e,
    get,
    post,
    async session(role: string) {
      const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.org`;
      await e.app.state.roles.assign({ subject: passkeySubject(email), email, role, grantedBy: 'test' });
      const s = await e.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return { cookie: `${SESSION_COOKIE}=${s.token}`, origin: CONSOLE };
    },
  };
}

/** Every key in `store` under `prefix`, sorted. */
export async function keysIn(store: ObjectStore, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for await (const o of store.listAll(prefix)) out.push(o.key);
  return out.sort();
}

/** The flight ids with objects under `<dest>/_canary/`. */
export async function canaryFlightIds(root: ObjectStore): Promise<string[]> {
  const ids = new Set<string>();
  for (const k of await keysIn(root, 'dest/_canary/')) {
    const m = /^dest\/_canary\/jobs\/canary\/runs\/([^/]+)\//.exec(k);
    if (m) ids.add(m[1]!);
  }
  return [...ids].sort();
}
