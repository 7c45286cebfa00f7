/**
 * The one interface every source connector implements (files, sqlite, redis, s3): enumerate
 * records page by page, read a record whole (streaming) or by byte range, and, for restore, check
 * whether a record exists in the target and write it. A connector never reads or writes outside
 * the resource it was opened on (directory root, database file, Redis database and key prefix,
 * bucket and prefix).
 */

export type SourceType = 'files' | 'sqlite' | 'redis' | 's3';

/** The source types this package can open. */
export const SOURCE_TYPES: readonly SourceType[] = ['files', 'sqlite', 'redis', 's3'];

/** One record as the listing saw it. */
export interface SourceRecordInfo {
  /** Unique within the source; '/'-separated; what restore selectors (include/exclude/recordName) match. */
  name: string;
  /**
   * Byte length at listing time. `read` is authoritative: a record that changed between listing
   * and reading is read whole as it is then.
   */
  size: number;
  sourceType: SourceType;
  /** The configured connection name of the source. */
  binding: string;
  /** The key space: directory root, database file, Redis database, bucket. */
  namespace: string;
  /** Per-type metadata (JSON-serialisable); `write` takes it back on restore. See the README. */
  metadata: Record<string, unknown>;
  /**
   * A change token, when the source can tell a record changed without reading it: equal tokens at
   * two listings mean the bytes are the same (files: inode, size, modification and change times;
   * s3: ETag, size, last-modified). An incremental run references such a record unread. Absent when
   * the source cannot say (redis, sqlite): the record is then always read.
   */
  change?: string;
}

/** A name the listing saw but will not back up (symlink, special file, unreadable directory, ...). */
export interface SkippedRecord {
  skipped: true;
  name: string;
  reason: string;
}

/** One page of a listing. `cursor` is absent on the last page. */
export interface SourcePage {
  records: SourceRecordInfo[];
  skipped: SkippedRecord[];
  cursor?: string;
}

export interface ListOptions {
  /** Opaque cursor from the previous page (a checkpoint may carry it across processes). */
  cursor?: string;
  /** Most entries (records plus skipped) on one page; default 1000. A hint for redis (SCAN COUNT). */
  pageSize?: number;
}

export interface EnumerateOptions extends ListOptions {
  /**
   * Most pages to read before giving up with ERR_SOURCE_LISTING_OVER_CAP (default 10,000).
   * Counted from `cursor` (a resumed enumeration gets a fresh budget).
   */
  maxPages?: number;
  /**
   * Most entries (records plus skipped names) to list before giving up with
   * ERR_SOURCE_LISTING_OVER_CAP (default: no count, only `maxPages`). Counted from `cursor`.
   */
  maxEntries?: number;
}

/** Options of `read`. */
export interface ReadOptions {
  /**
   * Scratch memory the connector may read into instead of allocating a buffer per piece
   * (connectors that do not use it ignore it). When it is used, each piece is a view of `buffer`
   * and stays valid only until the next piece is asked for (or the stream is returned): consume
   * or copy it first. The connector writes into it only while `read` runs and while the stream is
   * iterated. Give each stream open at the same time its own buffer.
   */
  buffer?: Uint8Array;
}

/** A record body for `write`: bytes in memory or a stream of chunks (consumed once). */
export type RecordBody = Uint8Array | AsyncIterable<Uint8Array>;

/** What `write` did: `written: false` with a reason when the record was deliberately not written. */
export type WriteResult = { written: true } | { written: false; reason: string };

export interface SourceConnector {
  readonly type: SourceType;
  readonly binding: string;
  readonly namespace: string;
  /** Where the connector points, for logs and messages; never credentials. */
  readonly description: string;
  /** Whether `readRange` works (all four connectors here: true). */
  readonly rangeRead: boolean;

  /**
   * One page of the listing. Records come in a stable order within one enumeration.
   * Throws SourceError: RESOURCE_MISSING, BINDING, READ, THROTTLED, INVALID_CURSOR.
   */
  list(options?: ListOptions): Promise<SourcePage>;

  /**
   * Every record and skipped entry, page by page (a convenience over `list`).
   * Throws what `list` throws and LISTING_OVER_CAP after `maxPages` pages.
   */
  enumerate(options?: EnumerateOptions): AsyncIterable<SourceRecordInfo | SkippedRecord>;

  /**
   * The whole record as a stream of chunks. The promise rejects with RECORD_VANISHED when the
   * record is gone, RECORD_SKIPPED when it is no longer something the connector backs up,
   * RECORD_TOO_LARGE over the configured `maxRecordBytes`, READ, THROTTLED; the stream itself
   * throws READ (or VANISHED) on a fault mid-way. With `options.buffer` the connector MAY read
   * into that memory instead of allocating (see ReadOptions for how long each piece stays valid).
   */
  read(name: string, options?: ReadOptions): Promise<AsyncIterable<Uint8Array>>;

  /**
   * Optional: the whole record in one piece, read into `buffer` when it fits (the result is then
   * a view of `buffer`, valid until the caller reuses it), otherwise into fresh memory. For
   * callers that read many small records and hand each one on before the next (a backup run):
   * no allocation, no garbage per record. Throws what `read` throws.
   */
  readInto?(name: string, buffer: Uint8Array): Promise<Uint8Array>;

  /**
   * Bytes `start..endInclusive` of the record (clamped to its end; empty past the end).
   * Throws what `read` throws, and RANGE_UNSUPPORTED for connectors without range reads.
   */
  readRange(name: string, start: number, endInclusive: number): Promise<Uint8Array>;

  /** Whether the record exists in the connector's resource (restore's `onExisting: skip`). */
  exists(name: string): Promise<boolean>;

  /**
   * Writes a record back (restore), with the metadata the listing reported. Never writes outside
   * the connector's resource. Throws UNSAFE_NAME, TARGET_EXISTS, INVALID_RECORD, WRITE, BINDING,
   * RESOURCE_MISSING, THROTTLED.
   */
  write(name: string, body: RecordBody, metadata?: Record<string, unknown>): Promise<WriteResult>;

  /** Releases connections, temporary files and captures. Idempotent. */
  close(): Promise<void>;
}

/** True when an `enumerate` entry is a skipped name rather than a record. */
export function isSkipped(entry: SourceRecordInfo | SkippedRecord): entry is SkippedRecord {
  return (entry as SkippedRecord).skipped === true;
}
