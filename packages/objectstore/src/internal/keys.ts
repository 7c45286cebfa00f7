/**
 * Key rules shared by every driver. A key is a '/'-separated relative name: not empty, at most
 * 1024 UTF-8 bytes (the S3 limit), no leading '/', no empty, '.' or '..' segment, and no NUL,
 * backslash or other control character. These rules alone keep a key from naming anything outside
 * a filesystem root; the fs driver still checks resolved paths (symlinks) on top.
 */
import { ObjectStoreError } from '../errors.ts';

const MAX_KEY_BYTES = 1024;
// C0 controls (NUL included), DEL, and backslash (a path separator on Windows).
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what is refused
const FORBIDDEN = /[\u0000-\u001f\u007f\\]/;
// With the u flag this matches only unpaired surrogates (which have no UTF-8 encoding).
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function describe(key: string): string {
  // JSON.stringify escapes control characters so a hostile key cannot forge message text.
  return JSON.stringify(key.length > 200 ? `${key.slice(0, 200)}...` : key);
}

/** Why `key` is not a valid key, or null when it is. */
export function keyProblem(key: unknown): string | null {
  if (typeof key !== 'string') return 'not a string';
  if (key.length === 0) return 'empty';
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) return `longer than ${MAX_KEY_BYTES} bytes`;
  if (FORBIDDEN.test(key)) return 'contains NUL, backslash or a control character';
  if (key.startsWith('/')) return 'starts with /';
  for (const seg of key.split('/')) {
    if (seg === '') return 'has an empty segment';
    if (seg === '.' || seg === '..') return `has a "${seg}" segment`;
  }
  if (LONE_SURROGATE.test(key)) return 'is not well-formed Unicode';
  return null;
}

/** Returns `key` when valid; throws ObjectStoreError ERR_OBJECTSTORE_INVALID_KEY otherwise. */
export function validateKey(key: string, where: string): string {
  const problem = keyProblem(key);
  if (problem !== null) {
    throw new ObjectStoreError(
      'ERR_OBJECTSTORE_INVALID_KEY',
      `invalid key ${typeof key === 'string' ? describe(key) : ''} on ${where}: ${problem}`,
    );
  }
  return key;
}

/**
 * Validates a list prefix: '' (everything), a key, or a key followed by '/'. Partial last segments
 * are allowed ("runs/ab" matches "runs/abc/x").
 */
export function validatePrefix(prefix: string, where: string): string {
  if (prefix === '') return prefix;
  const body = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix;
  const problem = keyProblem(body);
  if (problem !== null) {
    throw new ObjectStoreError(
      'ERR_OBJECTSTORE_INVALID_KEY',
      `invalid prefix ${describe(String(prefix))} on ${where}: ${problem}`,
    );
  }
  return prefix;
}

/** Quoted key for messages (control characters escaped). */
export function quoteKey(key: string): string {
  return describe(key);
}

/** Compares two keys in UTF-8 byte order (the order S3 lists in). */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** A decoded list cursor: resume after a key ('k') or with a store's continuation token ('t'). */
export interface Cursor {
  kind: 'k' | 't';
  value: string;
}

/** Encodes a listing position as an opaque cursor. */
export function encodeCursor(kind: 'k' | 't', value: string): string {
  return Buffer.from(`${kind}:${value}`, 'utf8').toString('base64url');
}

/** Decodes a cursor from `encodeCursor`; throws ERR_OBJECTSTORE_INVALID_KEY for a foreign cursor. */
export function decodeCursor(cursor: string, where: string): Cursor {
  const text = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const kind = text.slice(0, 2);
  if ((kind !== 'k:' && kind !== 't:') || text.length === 2 || text.includes('\0')) {
    throw new ObjectStoreError('ERR_OBJECTSTORE_INVALID_KEY', `malformed list cursor on ${where}`);
  }
  return { kind: kind === 'k:' ? 'k' : 't', value: text.slice(2) };
}

/** Validates `limit` for list (1..1000, default 1000). */
export function listLimit(limit: number | undefined, where: string): number {
  if (limit === undefined) return 1000;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new ObjectStoreError('ERR_OBJECTSTORE_INVALID_CONFIG', `list limit must be 1..1000 on ${where}`);
  }
  return limit;
}

/** Validates a byte range; throws ERR_OBJECTSTORE_REJECTED (InvalidRange) for a malformed one. */
export function checkRange(
  range: { start: number; end?: number } | undefined,
  key: string,
  where: string,
): void {
  if (range === undefined) return;
  const { start, end } = range;
  const ok =
    Number.isSafeInteger(start) &&
    start >= 0 &&
    (end === undefined || (Number.isSafeInteger(end) && end >= start));
  if (!ok) {
    throw new ObjectStoreError(
      'ERR_OBJECTSTORE_REJECTED',
      `invalid byte range for ${describe(key)} on ${where}`,
      { storeCode: 'InvalidRange', key },
    );
  }
}

/** Checks `GetOptions.maxBytes` (absent, or a non-negative safe integer). */
export function checkMaxBytes(maxBytes: number | undefined, key: string): void {
  if (maxBytes === undefined || (Number.isSafeInteger(maxBytes) && maxBytes >= 0)) return;
  throw new ObjectStoreError('ERR_OBJECTSTORE_INVALID_CONFIG', `get ${describe(key)}: bad maxBytes`, { key });
}

/** The error of a `get` whose object (or range) is larger than the caller's `maxBytes`. */
export function tooLarge(
  key: string,
  where: string,
  size: number | null,
  maxBytes: number,
): ObjectStoreError {
  return new ObjectStoreError(
    'ERR_OBJECTSTORE_TOO_LARGE',
    `get ${describe(key)} on ${where}: ${size === null ? 'more than' : `${size} bytes, over`} the ${maxBytes}-byte bound`,
    { key, storeCode: 'TooLarge' },
  );
}
