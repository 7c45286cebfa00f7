/**
 * Object-store calls with errors translated to ArchiveError ERR_ARCHIVE_DESTINATION (keeping the
 * store's error code and its own code, e.g. S3 `NoSuchBucket`, for the engine's failure reason and
 * throttle handling). Not-found reads return null so callers can name the missing object precisely.
 */
import type { Body, ObjectInfo, ObjectStore, PutOptions } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';

function codeOf(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

export function destinationError(e: unknown, key: string): ArchiveError {
  if (e instanceof ArchiveError) return e;
  const code = codeOf(e);
  const storeCode = (e as { storeCode?: unknown } | null)?.storeCode;
  return new ArchiveError('ERR_ARCHIVE_DESTINATION', {
    object: key,
    ...(code !== undefined ? { storeErrorCode: code, detail: code } : {}),
    ...(typeof storeCode === 'string' ? { storeCode } : {}),
    cause: e,
  });
}

function isNotFound(e: unknown): boolean {
  return codeOf(e) === 'ERR_OBJECTSTORE_NOT_FOUND';
}

export async function putObject(
  store: ObjectStore,
  key: string,
  body: Body,
  options?: PutOptions,
): Promise<void> {
  try {
    await store.put(key, body, options);
  } catch (e) {
    throw destinationError(e, key);
  }
}

/** A read's bound: the most bytes accepted, and the error to throw for a larger object. */
export interface ReadBound {
  maxBytes: number;
  tooLarge: () => ArchiveError;
}

/**
 * The whole object, or null when it does not exist. With `into`, a view of it when the object fits
 * (else a fresh buffer: use the returned view). Every archive object is read with a bound (taken
 * from the signed manifest, or a fixed ceiling before the signature is checked): a larger object is
 * refused by the store before its body is read, so a hostile bucket cannot exhaust memory.
 */
export async function getObject(
  store: ObjectStore,
  key: string,
  bound: ReadBound,
  into?: Uint8Array,
): Promise<Uint8Array | null> {
  try {
    return await store.get(key, undefined, {
      maxBytes: bound.maxBytes,
      ...(into === undefined ? {} : { into }),
    });
  } catch (e) {
    if (isNotFound(e)) return null;
    if (codeOf(e) === 'ERR_OBJECTSTORE_TOO_LARGE') throw bound.tooLarge();
    throw destinationError(e, key);
  }
}

export async function deleteObject(store: ObjectStore, key: string): Promise<void> {
  try {
    await store.delete(key);
  } catch (e) {
    throw destinationError(e, key);
  }
}

export async function headObject(store: ObjectStore, key: string): Promise<ObjectInfo | null> {
  try {
    return await store.head(key);
  } catch (e) {
    if (isNotFound(e)) return null;
    throw destinationError(e, key);
  }
}

export async function listObjects(store: ObjectStore, prefix: string): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  try {
    for await (const o of store.listAll(prefix)) out.push(o);
  } catch (e) {
    throw destinationError(e, prefix);
  }
  return out;
}
