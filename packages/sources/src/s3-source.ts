/**
 * The `s3` connector: the objects of a bucket, or of a key prefix in it, on any S3-compatible store,
 * through @coffer/objectstore's S3 driver.
 *
 * - Records are objects, named by their key relative to the prefix, listed in the store's key
 *   order (UTF-8 bytes) with ListObjectsV2 pagination; the listing cursor is the store's own
 *   continuation, so a listing resumes in another process. Metadata: `etag`, `lastModified`,
 *   `contentType` (ListObjectsV2 does not carry it: one HEAD per listed object, 16 in flight, so a
 *   restore puts each object back with its type).
 *   Objects whose keys cannot be addressed as relative names (empty segments, `..`, control
 *   characters) are not listed by the driver.
 * - Reads stream the object (GetObject); range reads use HTTP Range.
 * - Restore (`write`) puts the object under the same name (streaming, multipart when large) with
 *   the recorded `contentType`.
 * - Faults: a missing bucket is ERR_SOURCE_RESOURCE_MISSING; access denied or an unreachable
 *   endpoint is ERR_SOURCE_BINDING; 429 / 503 SlowDown is ERR_SOURCE_THROTTLED (the run parks);
 *   an object gone since the listing is ERR_SOURCE_RECORD_VANISHED.
 *
 * Security: the secret access key is handed to the driver and never appears in a message (the
 * driver's messages carry the operation, key, S3 error code and HTTP status only, and this
 * connector writes its own messages from those codes).
 */
import {
  createS3Store,
  isObjectStoreError,
  type ObjectStore,
  type ObjectStoreError,
  type S3StoreOptions,
} from '@coffer/objectstore';
import { quoteName, SourceError } from './errors.ts';
import {
  bindingOf,
  chunksOf,
  clampRange,
  decodeCursor,
  encodeCursor,
  enumeratePages,
  maxRecordBytesOf,
  overCeiling,
  pageSizeOf,
} from './internal/common.ts';
import type {
  EnumerateOptions,
  ListOptions,
  RecordBody,
  SkippedRecord,
  SourceConnector,
  SourcePage,
  SourceRecordInfo,
  WriteResult,
} from './types.ts';

export interface S3SourceConfig {
  type: 's3';
  bucket: string;
  /** Only objects under this key prefix (names are relative to it). */
  prefix?: string;
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  /** Static credentials; without them the AWS SDK's default provider chain is used. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  binding?: string;
  maxRecordBytes?: number;
}

const MAX_LIST = 1000; // the S3 API's own page ceiling
const HEAD_CONCURRENCY = 16; // HEADs in flight while a listing page collects content types
const NETWORK = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'TimeoutError',
]);

/** Opens an `s3` connector. No request is made until the first call. Throws INVALID_CONFIG. */
export function createS3Source(config: S3SourceConfig): SourceConnector {
  return new S3Source(config);
}

/** Carries an error thrown by the caller's body stream through the driver untouched. */
class BodyError extends Error {
  readonly inner: unknown;
  constructor(inner: unknown) {
    super('body stream failed');
    this.inner = inner;
  }
}

class S3Source implements SourceConnector {
  readonly type = 's3' as const;
  readonly binding: string;
  readonly namespace: string;
  readonly description: string;
  readonly rangeRead = true;
  readonly #store: ObjectStore;
  readonly #ceiling: number;
  #bucketCheck: Promise<void> | undefined;

  constructor(config: S3SourceConfig) {
    const options: S3StoreOptions = { bucket: config?.bucket };
    if (config?.prefix !== undefined) options.prefix = config.prefix;
    if (config?.endpoint !== undefined) options.endpoint = config.endpoint;
    if (config?.region !== undefined) options.region = config.region;
    if (config?.forcePathStyle !== undefined) options.forcePathStyle = config.forcePathStyle;
    if (config?.credentials !== undefined) options.credentials = config.credentials;
    try {
      this.#store = createS3Store(options);
    } catch (err) {
      const why = isObjectStoreError(err)
        ? 'bucket, prefix or endpoint is malformed'
        : 'invalid configuration';
      throw new SourceError('ERR_SOURCE_INVALID_CONFIG', `s3 source: ${why}`);
    }
    this.#ceiling = maxRecordBytesOf(config.maxRecordBytes);
    this.binding = bindingOf(config.binding, 's3');
    this.namespace = config.bucket;
    this.description = this.#store.description;
  }

  #error(err: unknown, op: 'list' | 'read' | 'check' | 'write', name?: string): SourceError {
    if (err instanceof SourceError) return err;
    const what = `${this.description}: ${op}${name === undefined ? '' : ` ${quoteName(name)}`}`;
    const record = name === undefined ? {} : { record: name };
    if (!isObjectStoreError(err)) {
      return new SourceError(
        op === 'write' ? 'ERR_SOURCE_WRITE' : 'ERR_SOURCE_READ',
        `${what} failed`,
        record,
      );
    }
    const e = err as ObjectStoreError;
    const storeCode = e.storeCode;
    const opts = { ...record, ...(storeCode === undefined ? {} : { sourceCode: storeCode }) };
    const detail = storeCode === undefined ? '' : ` (${storeCode})`;
    if (storeCode === 'NoSuchBucket') {
      return new SourceError(
        'ERR_SOURCE_RESOURCE_MISSING',
        `${what}: the bucket does not exist${detail}`,
        opts,
      );
    }
    switch (e.code) {
      case 'ERR_OBJECTSTORE_NOT_FOUND':
        if (op === 'read')
          return new SourceError('ERR_SOURCE_RECORD_VANISHED', `${what}: vanished since the listing`, opts);
        return new SourceError('ERR_SOURCE_RESOURCE_MISSING', `${what}: not found${detail}`, opts);
      case 'ERR_OBJECTSTORE_ACCESS_DENIED':
        return new SourceError('ERR_SOURCE_BINDING', `${what}: access denied${detail}`, opts);
      case 'ERR_OBJECTSTORE_THROTTLED':
        return new SourceError('ERR_SOURCE_THROTTLED', `${what}: throttled by the store${detail}`, opts);
      case 'ERR_OBJECTSTORE_INVALID_KEY':
        return new SourceError('ERR_SOURCE_UNSAFE_NAME', `${what}: not a valid object key`, opts);
      case 'ERR_OBJECTSTORE_INVALID_CONFIG':
        return new SourceError('ERR_SOURCE_INVALID_CONFIG', `${what}: invalid store configuration`, opts);
      case 'ERR_OBJECTSTORE_PRECONDITION_FAILED':
        return new SourceError('ERR_SOURCE_TARGET_EXISTS', `${what}: the object already exists`, opts);
      default:
        if (storeCode !== undefined && NETWORK.has(storeCode)) {
          return new SourceError('ERR_SOURCE_BINDING', `${what}: the store is not reachable${detail}`, opts);
        }
        return new SourceError(
          op === 'write' ? 'ERR_SOURCE_WRITE' : 'ERR_SOURCE_READ',
          `${what} failed${detail}`,
          opts,
        );
    }
  }

  async list(options: ListOptions = {}): Promise<SourcePage> {
    const limit = Math.min(pageSizeOf(options), MAX_LIST);
    const storeCursor = options.cursor === undefined ? undefined : decodeCursor('s3', options.cursor);
    let page: Awaited<ReturnType<ObjectStore['list']>>;
    try {
      page = await this.#store.list('', {
        limit,
        ...(storeCursor === undefined ? {} : { cursor: storeCursor }),
      });
    } catch (err) {
      if (isObjectStoreError(err, 'ERR_OBJECTSTORE_INVALID_KEY')) {
        throw new SourceError('ERR_SOURCE_INVALID_CURSOR', `${this.description}: malformed listing cursor`);
      }
      throw this.#error(err, 'list');
    }
    const contentTypes = await this.#contentTypes(page.objects.map((o) => o.key));
    const records: SourceRecordInfo[] = page.objects.map((o, i) => ({
      name: o.key,
      size: o.size,
      sourceType: 's3',
      binding: this.binding,
      namespace: this.namespace,
      metadata: {
        ...(o.etag === undefined ? {} : { etag: o.etag }),
        ...(o.lastModified === undefined ? {} : { lastModified: o.lastModified.toISOString() }),
        ...(contentTypes[i] === undefined ? {} : { contentType: contentTypes[i] }),
      },
      // An object's bytes change only with its ETag (a rewrite with the same bytes keeps it, which
      // is still the same content); size and time are belt and braces.
      ...(o.etag === undefined
        ? {}
        : { change: `${o.etag}:${o.size}:${o.lastModified?.toISOString() ?? ''}` }),
    }));
    return {
      records,
      skipped: [],
      ...(page.cursor === undefined ? {} : { cursor: encodeCursor('s3', page.cursor) }),
    };
  }

  /**
   * The Content-Type of each listed object (undefined when none is stored, or the object vanished
   * since the listing: its read reports that). ListObjectsV2 does not carry it, so each object is
   * HEADed, HEAD_CONCURRENCY at a time: a restore puts the object back with the same type.
   */
  async #contentTypes(keys: string[]): Promise<Array<string | undefined>> {
    const out = new Array<string | undefined>(keys.length);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < keys.length; i = next++) {
        try {
          out[i] = (await this.#store.head(keys[i]!))?.contentType;
        } catch (err) {
          throw this.#error(err, 'list', keys[i]);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(HEAD_CONCURRENCY, keys.length) }, worker));
    return out;
  }

  enumerate(options?: EnumerateOptions): AsyncIterable<SourceRecordInfo | SkippedRecord> {
    return enumeratePages((o) => this.list(o), this.description, options);
  }

  /** With a size ceiling configured, HEAD first so an oversized object is refused before any bytes move. */
  async #checkCeiling(name: string): Promise<number | undefined> {
    if (this.#ceiling === Number.POSITIVE_INFINITY) return undefined;
    const info = await this.#store.head(name);
    if (info === null)
      throw new SourceError(
        'ERR_SOURCE_RECORD_VANISHED',
        `${this.description}: ${quoteName(name)} vanished`,
        { record: name },
      );
    if (info.size > this.#ceiling) throw overCeiling(name, info.size, this.#ceiling);
    return info.size;
  }

  async read(name: string): Promise<AsyncIterable<Uint8Array>> {
    let stream: AsyncIterable<Uint8Array>;
    try {
      await this.#checkCeiling(name);
      stream = await this.#store.getStream(name);
    } catch (err) {
      throw this.#error(err, 'read', name);
    }
    const self = this;
    return (async function* () {
      try {
        yield* stream;
      } catch (err) {
        throw self.#error(err, 'read', name);
      }
    })();
  }

  async readRange(name: string, start: number, endInclusive: number): Promise<Uint8Array> {
    clampRange(start, endInclusive, Number.MAX_SAFE_INTEGER);
    try {
      const size = await this.#checkCeiling(name);
      if (size !== undefined && start >= size) return new Uint8Array(0);
      return await this.#store.get(name, { start, end: endInclusive });
    } catch (err) {
      // A range starting past the end: S3 answers 416 InvalidRange; our contract is an empty result.
      if (isObjectStoreError(err) && (err.storeCode === 'InvalidRange' || err.status === 416))
        return new Uint8Array(0);
      throw this.#error(err, 'read', name);
    }
  }

  async exists(name: string): Promise<boolean> {
    try {
      // HEAD answers a bodiless 404 for a missing bucket as for a missing object: list once, so a
      // missing bucket is RESOURCE_MISSING here (a dry run counts it unknown), never "absent".
      this.#bucketCheck ??= this.#store.list('', { limit: 1 }).then(() => undefined);
      await this.#bucketCheck;
      return (await this.#store.head(name)) !== null;
    } catch (err) {
      throw this.#error(err, 'check', name);
    }
  }

  async write(name: string, body: RecordBody, metadata: Record<string, unknown> = {}): Promise<WriteResult> {
    const contentType = typeof metadata.contentType === 'string' ? metadata.contentType : undefined;
    async function* guarded(): AsyncIterable<Uint8Array> {
      const it = chunksOf(body)[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<Uint8Array>;
        try {
          next = await it.next();
        } catch (err) {
          throw new BodyError(err);
        }
        if (next.done === true) return;
        yield next.value;
      }
    }
    try {
      await this.#store.put(name, body instanceof Uint8Array ? body : guarded(), {
        ...(body instanceof Uint8Array ? { contentLength: body.byteLength } : {}),
        ...(contentType === undefined ? {} : { contentType }),
      });
      return { written: true };
    } catch (err) {
      const inner = findBodyError(err);
      if (inner !== undefined) throw inner.inner;
      throw this.#error(err, 'write', name);
    }
  }

  async close(): Promise<void> {}
}

/** The driver may wrap a body failure; find ours in the cause chain. */
function findBodyError(err: unknown): BodyError | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (e instanceof BodyError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
