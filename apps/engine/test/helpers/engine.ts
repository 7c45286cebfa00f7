/**
 * Test helpers: an engine built from an environment map over a temporary data dir (real SQLite,
 * real keys), listening on a free loopback port, closed on teardown; and a small HTTP client
 * over the global fetch that returns status, headers and text.
 */

import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { tempDir } from '@coffer/testkit';
import type { FastifyInstance } from 'fastify';
import { type BuildAppOptions, buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';

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
