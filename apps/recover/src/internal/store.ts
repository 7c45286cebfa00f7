/**
 * Opens the object store named by `--from`: a local directory (a copy of the bucket's contents
 * under the destination prefix, e.g. made with `aws s3 sync`) or `s3://bucket/prefix`, through
 * @coffer/objectstore's openStore.
 *
 * Security: S3 credentials are taken from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and
 * AWS_SESSION_TOKEN is left to the SDK), never from argv; they are never printed. When neither is
 * set, the AWS SDK's own chain (profile files, instance roles) is used.
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { type ObjectStore, type OpenStoreOptions, openStore } from '@coffer/objectstore';
import { RecoverError } from '../errors.ts';
import type { StoreOptions } from './args.ts';
import { toRecoverError } from './translate.ts';

/** Returns the store for `options`; throws RecoverError (usage, not found, store). */
export function openSource(options: StoreOptions, env: Record<string, string | undefined>): ObjectStore {
  if (options.from.startsWith('s3://')) {
    const settings: OpenStoreOptions = {};
    if (options.endpoint !== undefined) settings.endpoint = options.endpoint;
    const region = options.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
    settings.region = region ?? 'us-east-1';
    if (options.pathStyle) settings.forcePathStyle = true;
    const id = env.AWS_ACCESS_KEY_ID;
    const secret = env.AWS_SECRET_ACCESS_KEY;
    if ((id === undefined) !== (secret === undefined)) {
      throw new RecoverError(
        'ERR_RECOVER_USAGE',
        'set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither (to use the AWS SDK default chain)',
      );
    }
    if (id !== undefined && secret !== undefined) {
      settings.credentials = { accessKeyId: id, secretAccessKey: secret };
    }
    try {
      return openStore(options.from, settings);
    } catch (e) {
      throw toRecoverError(e, `--from ${options.from}`);
    }
  }
  const dir = resolve(options.from);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) {
    throw new RecoverError('ERR_RECOVER_NOT_FOUND', `--from ${dir}: no such directory`, { object: dir });
  }
  try {
    return openStore(dir);
  } catch (e) {
    throw toRecoverError(e, `--from ${dir}`);
  }
}
