/**
 * Pieces every connector shares: the page loop behind `enumerate` (with the page cap), body
 * collection for `write`, range clamping, and option checks.
 */
import { SourceError } from '../errors.ts';
import type {
  EnumerateOptions,
  ListOptions,
  RecordBody,
  SkippedRecord,
  SourcePage,
  SourceRecordInfo,
} from '../types.ts';

export const DEFAULT_PAGE_SIZE = 1000;
export const MAX_PAGE_SIZE = 100_000;
export const DEFAULT_MAX_PAGES = 10_000;

/** The page size of `options`, checked (1..100,000; default 1000). */
export function pageSizeOf(options: ListOptions | undefined): number {
  const n = options?.pageSize ?? DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE_SIZE) {
    throw new SourceError('ERR_SOURCE_INVALID_CONFIG', `pageSize must be an integer in 1..${MAX_PAGE_SIZE}`);
  }
  return n;
}

/**
 * Walks `list` page by page; throws LISTING_OVER_CAP when more than `maxPages` pages exist or the
 * listing holds more than `maxEntries` entries (records plus skipped names).
 */
export async function* enumeratePages(
  list: (options: ListOptions) => Promise<SourcePage>,
  description: string,
  options: EnumerateOptions = {},
): AsyncIterable<SourceRecordInfo | SkippedRecord> {
  const maxPages = options.maxPages ?? DEFAULT_MAX_PAGES;
  if (!Number.isInteger(maxPages) || maxPages < 1) {
    throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'maxPages must be a positive integer');
  }
  const maxEntries = options.maxEntries ?? Number.POSITIVE_INFINITY;
  if (options.maxEntries !== undefined && (!Number.isInteger(maxEntries) || maxEntries < 1)) {
    throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'maxEntries must be a positive integer');
  }
  let entries = 0;
  let cursor = options.cursor;
  for (let pages = 0; ; pages++) {
    if (pages === maxPages) {
      throw new SourceError(
        'ERR_SOURCE_LISTING_OVER_CAP',
        `${description}: listing has more than ${maxPages} pages of ${pageSizeOf(options)} entries`,
      );
    }
    const page = await list({ pageSize: pageSizeOf(options), ...(cursor === undefined ? {} : { cursor }) });
    // Checked before the page is handed out: a run never starts on a listing it cannot finish.
    entries += page.records.length + page.skipped.length;
    if (entries > maxEntries) {
      throw new SourceError(
        'ERR_SOURCE_LISTING_OVER_CAP',
        `${description}: listing has more than ${maxEntries} entries (the job's maxEntries)`,
      );
    }
    // A page's records in listing order, then its skipped names.
    yield* page.records;
    yield* page.skipped;
    if (page.cursor === undefined) return;
    cursor = page.cursor;
  }
}

/**
 * Collects a body into one buffer, refusing more than `limit` bytes (connectors whose target takes
 * a value whole: Redis RESTORE).
 */
export async function collectBody(body: RecordBody, limit: number, name: string): Promise<Buffer> {
  if (body instanceof Uint8Array) {
    if (body.byteLength > limit) throw tooBig(name, limit);
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  }
  const parts: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > limit) throw tooBig(name, limit);
    parts.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(parts, total);
}

function tooBig(name: string, limit: number): SourceError {
  return new SourceError('ERR_SOURCE_INVALID_RECORD', `record body is larger than ${limit} bytes`, {
    record: name,
  });
}

/** Turns a body into an async stream of chunks. */
export async function* chunksOf(body: RecordBody): AsyncIterable<Uint8Array> {
  if (body instanceof Uint8Array) {
    yield body;
    return;
  }
  yield* body;
}

/** Checks a byte range request; returns [start, endInclusive] clamped to `size` (null: empty). */
export function clampRange(start: number, endInclusive: number, size: number): [number, number] | null {
  if (
    !Number.isSafeInteger(start) ||
    !Number.isSafeInteger(endInclusive) ||
    start < 0 ||
    endInclusive < start
  ) {
    throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'byte range must be integers with 0 <= start <= end');
  }
  if (start >= size) return null;
  return [start, Math.min(endInclusive, size - 1)];
}

/** Checks the `maxRecordBytes` option (a positive safe integer, or undefined for no ceiling). */
export function maxRecordBytesOf(value: unknown): number {
  if (value === undefined) return Number.POSITIVE_INFINITY;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'maxRecordBytes must be a positive integer');
  }
  return value;
}

/** The RECORD_TOO_LARGE error for a record of `size` bytes over `ceiling`. */
export function overCeiling(name: string, size: number, ceiling: number): SourceError {
  return new SourceError(
    'ERR_SOURCE_RECORD_TOO_LARGE',
    `record of ${size} bytes is over the in-band size ceiling of ${ceiling} bytes`,
    { record: name },
  );
}

/** A binding name: the configured one, else the source type. */
export function bindingOf(value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.length === 0 || value.length > 200) {
    throw new SourceError(
      'ERR_SOURCE_INVALID_CONFIG',
      'binding must be a non-empty string of at most 200 characters',
    );
  }
  return value;
}

/** Encodes a cursor as opaque base64url text with a kind tag, so a foreign cursor is recognised. */
export function encodeCursor(kind: string, value: string): string {
  return Buffer.from(`${kind}:${value}`, 'utf8').toString('base64url');
}

/** Decodes a cursor made by `encodeCursor` with the same kind; throws INVALID_CURSOR otherwise. */
export function decodeCursor(kind: string, cursor: string): string {
  if (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]*$/.test(cursor)) throw badCursor();
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!text.startsWith(`${kind}:`)) throw badCursor();
  return text.slice(kind.length + 1);
}

function badCursor(): SourceError {
  return new SourceError('ERR_SOURCE_INVALID_CURSOR', 'listing cursor was not issued by this kind of source');
}
