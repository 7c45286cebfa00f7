/**
 * Opens a store from a destination URL: `file:///dir` or a plain path -> filesystem driver;
 * `s3://bucket/prefix` -> S3 driver. S3 connection settings come from `options` or from query
 * parameters (`?endpoint=http://127.0.0.1:7480&region=us-east-1&forcePathStyle=true`); `options`
 * win. Credentials are never accepted in the URL (a URL is logged and shown); pass them in
 * `options.credentials` or let the AWS SDK find them in its usual places.
 */
import { fileURLToPath } from 'node:url';
import { ObjectStoreError } from './errors.ts';
import { createFsStore } from './fs-store.ts';
import { createS3Store, type S3StoreOptions } from './s3-store.ts';
import type { ObjectStore } from './types.ts';

/** Settings for `openStore` (used for s3:// URLs; ignored for filesystem paths). */
export type OpenStoreOptions = Omit<S3StoreOptions, 'bucket' | 'prefix'>;

function bad(why: string): ObjectStoreError {
  return new ObjectStoreError('ERR_OBJECTSTORE_INVALID_CONFIG', `store URL: ${why}`);
}

/**
 * Returns the store named by `url`. Throws ERR_OBJECTSTORE_INVALID_CONFIG for an unknown scheme,
 * credentials in the URL, or malformed settings.
 */
export function openStore(url: string, options: OpenStoreOptions = {}): ObjectStore {
  if (typeof url !== 'string' || url === '') throw bad('empty');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined) return createFsStore({ root: url });
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw bad('not a valid URL');
  }
  if (parsed.username !== '' || parsed.password !== '')
    throw bad('credentials are not accepted in a store URL');
  if (scheme === 'file') {
    if (parsed.search !== '' || parsed.hash !== '') throw bad('file URLs take no query or fragment');
    try {
      return createFsStore({ root: fileURLToPath(parsed) });
    } catch (err) {
      if (err instanceof ObjectStoreError) throw err;
      throw bad('file URL is not a local absolute path');
    }
  }
  if (scheme !== 's3') throw bad(`unsupported scheme "${scheme}" (use file:// or s3://)`);
  const bucket = parsed.hostname;
  const prefix = decodeURIComponent(parsed.pathname).replace(/^\/+|\/+$/g, '');
  const q = parsed.searchParams;
  for (const name of q.keys()) {
    if (!['endpoint', 'region', 'forcePathStyle'].includes(name)) throw bad(`unknown parameter "${name}"`);
  }
  const fromUrl: OpenStoreOptions = {};
  const endpoint = q.get('endpoint');
  if (endpoint !== null) fromUrl.endpoint = endpoint;
  const region = q.get('region');
  if (region !== null) fromUrl.region = region;
  const pathStyle = q.get('forcePathStyle');
  if (pathStyle !== null) {
    if (pathStyle !== 'true' && pathStyle !== 'false') throw bad('forcePathStyle must be true or false');
    fromUrl.forcePathStyle = pathStyle === 'true';
  }
  // A self-hosted endpoint almost always wants path-style addressing.
  if (fromUrl.forcePathStyle === undefined && (options.endpoint ?? fromUrl.endpoint) !== undefined) {
    fromUrl.forcePathStyle = true;
  }
  return createS3Store({ ...fromUrl, ...definedOnly(options), bucket, prefix });
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
