/**
 * @coffer/objectstore: the object-store interface of Coffer and its two drivers, the local
 * filesystem (embedded default; atomic, durable writes; keys can never escape the root) and
 * S3-compatible storage (@aws-sdk/client-s3). Every failure is an ObjectStoreError with a stable
 * `code`; messages never carry credentials or object bytes.
 */

export {
  isObjectStoreError,
  OBJECTSTORE_ERROR_CODES,
  ObjectStoreError,
  type ObjectStoreErrorCode,
  type ObjectStoreErrorOptions,
} from './errors.ts';
export { createFsStore, type FsStoreOptions } from './fs-store.ts';
export { keyProblem, validateKey } from './internal/keys.ts';
export { type OpenStoreOptions, openStore } from './open-store.ts';
export { createS3Store, type S3StoreOptions } from './s3-store.ts';
export type {
  Body,
  ByteRange,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  ObjectStore,
  PutOptions,
} from './types.ts';
