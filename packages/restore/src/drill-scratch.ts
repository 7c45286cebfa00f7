/**
 * Removal of a drill's scratch namespace after the fact: the engine records a drill's namespace
 * before the drill writes, and removes it at the end or, when the process died mid-drill, at its
 * next start. Each function removes only what lies under the namespace it is given.
 */
import { rm } from 'node:fs/promises';
import { createS3Store } from '@coffer/objectstore';
import type { S3SourceConfig } from '@coffer/sources';

/** Glob-escapes `s` for a Redis MATCH pattern (so a prefix matches itself only). */
function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Deletes every key starting with `prefix` (non-empty) in database `db` of the server at `url`. */
export async function removeRedisScratch(url: string, db: number, prefix: string): Promise<number> {
  if (prefix === '') throw new Error('refusing to remove a redis scratch namespace without a prefix');
  // Loaded here, not with this package: only a redis drill target needs it.
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { db, lazyConnect: true, maxRetriesPerRequest: 2 });
  let removed = 0;
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scanBuffer(cursor, 'MATCH', `${globEscape(prefix)}*`, 'COUNT', 500);
      cursor = String(next);
      if (keys.length > 0) removed += await client.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
  return removed;
}

/** Deletes every object under `config.prefix` (non-empty) of `config.bucket`. */
export async function removeS3Scratch(config: Omit<S3SourceConfig, 'type' | 'binding'>): Promise<number> {
  const prefix = (config.prefix ?? '').replace(/\/+$/, '');
  if (prefix === '') throw new Error('refusing to remove an s3 scratch namespace without a prefix');
  const store = createS3Store({
    bucket: config.bucket,
    prefix,
    ...(config.endpoint === undefined ? {} : { endpoint: config.endpoint }),
    ...(config.region === undefined ? {} : { region: config.region }),
    ...(config.forcePathStyle === undefined ? {} : { forcePathStyle: config.forcePathStyle }),
    ...(config.credentials === undefined ? {} : { credentials: config.credentials }),
  });
  const keys: string[] = [];
  for await (const o of store.listAll('')) keys.push(o.key);
  for (const k of keys) await store.delete(k);
  return keys.length;
}

/** Removes a drill's scratch directory and everything in it. */
export async function removeFilesScratch(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
