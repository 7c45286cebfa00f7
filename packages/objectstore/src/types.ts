/**
 * The ObjectStore interface every driver implements: put (streaming), get (whole or a byte range),
 * head, list by prefix with pagination, delete. Keys are '/'-separated relative names (see
 * `validateKey`); a driver never reads or writes outside its root (fs) or prefix (S3).
 */

/** What a store knows about one object. */
export interface ObjectInfo {
  key: string;
  size: number;
  etag?: string;
  lastModified?: Date;
  /** The stored Content-Type: from `head` of the S3 driver only (listings do not carry it). */
  contentType?: string;
}

/** One page of a listing; `cursor` is absent on the last page. */
export interface ListPage {
  objects: ObjectInfo[];
  cursor?: string;
}

/** An object body: bytes in memory, or a stream of chunks (consumed once, memory stays bounded). */
export type Body = Uint8Array | AsyncIterable<Uint8Array>;

export interface PutOptions {
  /** Exact byte length of the body when known; a body of another length is refused. */
  contentLength?: number;
  /** `'*'`: create only; fails with ERR_OBJECTSTORE_PRECONDITION_FAILED when the key exists. */
  ifNoneMatch?: '*';
  contentType?: string;
  /**
   * Called at most once, before `put` settles, when the store no longer reads the body's bytes, so
   * the caller may reuse its buffer while the store finishes (the fs driver: once every byte is
   * written to the temp file, before the fsync). A driver that keeps the body to the end (S3, which
   * may resend it) never calls it: the body is then the store's until `put` settles.
   */
  onBodyWritten?: () => void;
}

/** A byte range, `end` inclusive as in HTTP Range; `end` past the object's end is clamped. */
export interface ByteRange {
  start: number;
  end?: number;
}

/** Options of `get`. */
export interface GetOptions {
  /**
   * A buffer to read the bytes into, so a caller reading many large objects (the archive reader's
   * shards) reuses its own buffers instead of receiving a fresh allocation per object. When the
   * object (or range) fits, `get` returns a view of `into` starting at offset 0; when it does not,
   * `into` is left untouched and a fresh buffer is returned, so callers must use the returned view,
   * never assume the bytes are in `into`. The fs driver reads straight into it; the S3 driver copies
   * the received body into it (the SDK has already buffered the body, so S3 saves no allocation).
   * `into` must not be read or written by anyone else until `get` settles; on failure its contents
   * are unspecified.
   */
  into?: Uint8Array;
  /**
   * The most bytes the caller accepts. When the object (or range) is larger, `get` fails with
   * ERR_OBJECTSTORE_TOO_LARGE before reading its body (fs: the file's size; S3: the response's
   * Content-Length, and the bytes counted as they arrive, should a server send more than it
   * announced), so a hostile or broken object cannot make the caller allocate its whole size.
   */
  maxBytes?: number;
}

export interface ListOptions {
  /** Opaque cursor from the previous page. */
  cursor?: string;
  /** Most objects on one page (1..1000, default 1000). */
  limit?: number;
}

export interface ObjectStore {
  /** Where the store points, e.g. "fs:/data/dest" or "s3://bucket/prefix"; never credentials. */
  readonly description: string;
  /** Stores `body` under `key`; atomic on fs (readers see the old or the new object, never a part). */
  put(key: string, body: Body, options?: PutOptions): Promise<{ etag?: string }>;
  /**
   * Reads the whole object or a range; ERR_OBJECTSTORE_NOT_FOUND when absent. With `options.into`,
   * returns a view of that buffer when the bytes fit (see GetOptions).
   */
  get(key: string, range?: ByteRange, options?: GetOptions): Promise<Uint8Array>;
  /** Streams the object or a range; ERR_OBJECTSTORE_NOT_FOUND (thrown by the returned promise) when absent. */
  getStream(key: string, range?: ByteRange): Promise<AsyncIterable<Uint8Array>>;
  /** The object's metadata, or null when absent. */
  head(key: string): Promise<ObjectInfo | null>;
  /** One page of objects whose key starts with `prefix`, in lexicographic (UTF-8 byte) key order. */
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  /** Every object whose key starts with `prefix`, page by page, in key order. */
  listAll(prefix: string): AsyncIterable<ObjectInfo>;
  /** Removes the object; an absent key is not an error. */
  delete(key: string): Promise<void>;
}
