/**
 * Test helpers: an engine built from an environment map over a temporary data dir (real SQLite,
 * real keys), listening on a free loopback port, closed on teardown; and a small HTTP client
 * over the global fetch that returns status, headers and text.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { tempDir } from '@coffer/testkit';
import type { FastifyInstance } from 'fastify';
import { type BuildAppOptions, buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';

/** The engine's entry point, for tests that start it as a process. */
export const ENGINE_MAIN = join(import.meta.dirname, '..', '..', 'src', 'main.ts');

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

type T = { teardown(fn: () => void | Promise<void>): void };

export interface Started {
  app: FastifyInstance;
  url: string;
  dataDir: string;
  /** Every log line the engine wrote (JSON text). */
  logs: string[];
}

export function baseEnv(dataDir: string, extra: Record<string, string | undefined> = {}) {
  return { ENGINE_DATA_DIR: dataDir, ADMIN_TOKEN, ...extra };
}

/** Builds and starts an engine on 127.0.0.1:0. `env` overrides the base environment. */
export async function startEngine(
  t: T,
  env: Record<string, string | undefined> = {},
  options: Omit<BuildAppOptions, 'config'> = {},
): Promise<Started> {
  const dataDir = env.ENGINE_DATA_DIR ?? tempDir(t, 'coffer-engine-');
  const config = loadConfig(baseEnv(dataDir, { ...env, HOST: '127.0.0.1', PORT: '0' }));
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const app = await buildApp({ config, logger: { level: 'debug', stream }, ...options });
  t.teardown(() => app.close());
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url, dataDir, logs };
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read reply bodies of many shapes
  json: () => any;
}

export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown; raw?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  let body: string | undefined;
  if (init.raw !== undefined) body = init.raw;
  else if (init.body !== undefined) {
    body = JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(url, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

export const bearer = (token = ADMIN_TOKEN) => ({ authorization: `Bearer ${token}` });

/** A loopback TCP port free right now (for engines started as separate processes). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

/**
 * Starts the engine as its own process (src/main.ts) on a free loopback port with `env` added to
 * the test's environment; resolves with its URL once it logs `listening`, and stops it (SIGTERM)
 * at the test's teardown. For tests that need two engines, or a process they can signal.
 */
export function startEngineProcess(
  t: { teardown(fn: () => Promise<void>): void },
  env: Record<string, string>,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [ENGINE_MAIN], {
    env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: '0', ADMIN_TOKEN, ENGINE_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  );
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`engine exited early (${code})`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const l = JSON.parse(line) as { event?: string; url?: string };
        if (l.event === 'listening' && l.url) resolve({ url: l.url, child });
      } catch {
        // not a log line
      }
    });
  });
}
