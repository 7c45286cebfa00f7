/**
 * Typed errors of @coffer/objectstore. Every failure a driver reports is an ObjectStoreError with a
 * stable `code`; callers switch on `code` (never on messages). `storeCode` carries the store's own
 * code (an S3 error Code such as "NoSuchBucket", or an errno such as "ENOSPC" on the filesystem) so
 * the engine can say `destination rejected the write (<storeCode>)`.
 *
 * Security: messages name the operation, the key and the store description only. They never carry
 * credentials, request signatures, object bytes or the raw text of a dependency's exception, and the
 * dependency's exception is not attached as `cause` (it can hold request details).
 */

export type ObjectStoreErrorCode =
  | 'ERR_OBJECTSTORE_NOT_FOUND'
  | 'ERR_OBJECTSTORE_ACCESS_DENIED'
  | 'ERR_OBJECTSTORE_THROTTLED'
  | 'ERR_OBJECTSTORE_PRECONDITION_FAILED'
  | 'ERR_OBJECTSTORE_INVALID_KEY'
  | 'ERR_OBJECTSTORE_REJECTED'
  | 'ERR_OBJECTSTORE_TOO_LARGE'
  | 'ERR_OBJECTSTORE_FAULT'
  | 'ERR_OBJECTSTORE_INVALID_CONFIG';

/** Every code this package can throw, in documentation order. */
export const OBJECTSTORE_ERROR_CODES: readonly ObjectStoreErrorCode[] = [
  'ERR_OBJECTSTORE_NOT_FOUND',
  'ERR_OBJECTSTORE_ACCESS_DENIED',
  'ERR_OBJECTSTORE_THROTTLED',
  'ERR_OBJECTSTORE_PRECONDITION_FAILED',
  'ERR_OBJECTSTORE_INVALID_KEY',
  'ERR_OBJECTSTORE_REJECTED',
  'ERR_OBJECTSTORE_TOO_LARGE',
  'ERR_OBJECTSTORE_FAULT',
  'ERR_OBJECTSTORE_INVALID_CONFIG',
];

export interface ObjectStoreErrorOptions {
  /** The store's own error code (S3 Code or errno name). */
  storeCode?: string;
  /** The object key (relative to the store, never including the S3 prefix). */
  key?: string;
  /** The HTTP status the store answered with, when there was one. */
  status?: number;
}

/** The one error class thrown by every public function of @coffer/objectstore. */
export class ObjectStoreError extends Error {
  readonly code: ObjectStoreErrorCode;
  readonly storeCode?: string;
  readonly key?: string;
  readonly status?: number;

  constructor(code: ObjectStoreErrorCode, message: string, options: ObjectStoreErrorOptions = {}) {
    super(message);
    this.name = 'ObjectStoreError';
    this.code = code;
    if (options.storeCode !== undefined) this.storeCode = options.storeCode;
    if (options.key !== undefined) this.key = options.key;
    if (options.status !== undefined) this.status = options.status;
  }
}

/** True when `err` is an ObjectStoreError (optionally with the given code). */
export function isObjectStoreError(err: unknown, code?: ObjectStoreErrorCode): err is ObjectStoreError {
  return err instanceof ObjectStoreError && (code === undefined || err.code === code);
}
