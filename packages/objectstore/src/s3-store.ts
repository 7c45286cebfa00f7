/**
 * The S3-compatible ObjectStore driver (AWS S3, R2, MinIO, Ceph radosgw, Garage, ...), built on
 * @aws-sdk/client-s3. Every key is stored under the configured prefix (`<prefix>/<key>`).
 *
 * Behaviour worth knowing:
 * - Request and response checksums are computed only when the S3 API requires them
 *   (`WHEN_REQUIRED`): the SDK's default checksum trailers are not understood by many
 *   S3-compatible servers, and streamed bodies would otherwise need to be buffered.
 * - A body of unknown length is read in parts of `partSize` bytes (default 8 MiB): one part or
 *   less becomes a single PutObject, more becomes a multipart upload sent one part at a time, so
 *   memory stays at about one part whatever the object size. All parts but the last have the same
 *   size (R2 requires it). A failed multipart upload is aborted.
 * - `ifNoneMatch: '*'` sends `If-None-Match: *` (PutObject or CompleteMultipartUpload); for a
 *   multipart upload the driver also checks with HEAD first so a doomed upload is not sent.
 * - Errors are mapped to ObjectStoreError codes: NoSuchKey / 404 on HEAD -> NOT_FOUND;
 *   403, AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch, no credentials -> ACCESS_DENIED;
 *   429, SlowDown, 503 -> THROTTLED; 412 / PreconditionFailed / ConditionalRequestConflict ->
 *   PRECONDITION_FAILED; any other 4xx -> REJECTED with `storeCode` = the S3 error Code; anything
 *   else -> FAULT. Messages name the operation, key, store description, S3 Code and HTTP status;
 *   never credentials, signatures or the server's own message text.
 */
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { ObjectStoreError } from './errors.ts';
import { chunksOf, SourceError } from './internal/body.ts';
import {
  checkMaxBytes,
  checkRange,
  decodeCursor,
  encodeCursor,
  keyProblem,
  listLimit,
  quoteKey,
  tooLarge,
  validateKey,
  validatePrefix,
} from './internal/keys.ts';
import { listAllPages } from './internal/list-all.ts';
import type {
  Body,
  ByteRange,
  GetOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  ObjectStore,
  PutOptions,
} from './types.ts';

type Sdk = typeof import('@aws-sdk/client-s3');
let loading: Promise<Sdk> | null = null;

/**
 * The AWS SDK, loaded when the first S3 store makes its first request, not when this package is
 * imported: a process with no S3 destination or source never loads it (about 6 MiB of heap and
 * 30 MiB resident in the engine, which imports this package whatever its destinations). A load
 * that fails is tried again at the next request.
 */
function loadSdk(): Promise<Sdk> {
  loading ??= import('@aws-sdk/client-s3').catch((e: unknown) => {
    loading = null;
    throw e;
  });
  return loading;
}

export interface S3StoreOptions {
  bucket: string;
  /** Key prefix inside the bucket (leading and trailing '/' are ignored). */
  prefix?: string;
  /** Endpoint URL for S3-compatible servers, e.g. "http://127.0.0.1:7480". */
  endpoint?: string;
  /** Region (default "us-east-1"; most S3-compatible servers accept any). */
  region?: string;
  /** Path-style addressing (`endpoint/bucket/key`), needed by most self-hosted servers. */
  forcePathStyle?: boolean;
  /** Static credentials; when absent the AWS SDK's default provider chain is used. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Multipart part size in bytes for bodies of unknown or large length (5 MiB..5 GiB, default 8 MiB). */
  partSize?: number;
  /** Most attempts per request, retries included (default 3). */
  maxAttempts?: number;
}

const MIB = 1024 * 1024;
const DEFAULT_PART = 8 * MIB;
const MAX_PARTS = 10_000;

/**
 * Creates an S3-compatible store. Throws ERR_OBJECTSTORE_INVALID_CONFIG for a missing bucket, a
 * malformed prefix, endpoint or part size. No request is made until the first operation.
 */
export function createS3Store(options: S3StoreOptions): ObjectStore {
  const bad = (why: string) => new ObjectStoreError('ERR_OBJECTSTORE_INVALID_CONFIG', `s3 store: ${why}`);
  const bucket = options?.bucket;
  if (typeof bucket !== 'string' || !/^[A-Za-z0-9._-]{1,255}$/.test(bucket))
    throw bad('bucket name is missing or malformed');
  const prefix = (options.prefix ?? '').replace(/^\/+|\/+$/g, '');
  if (prefix !== '' && keyProblem(prefix) !== null) throw bad('prefix is malformed');
  if (options.endpoint !== undefined) {
    let url: URL;
    try {
      url = new URL(options.endpoint);
    } catch {
      throw bad('endpoint is not a URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad('endpoint must be http: or https:');
    if (url.username !== '' || url.password !== '') throw bad('endpoint must not carry credentials');
  }
  const partSize = options.partSize ?? DEFAULT_PART;
  if (!Number.isSafeInteger(partSize) || partSize < 5 * MIB || partSize > 5 * 1024 * MIB) {
    throw bad('partSize must be between 5 MiB and 5 GiB');
  }
  const config: S3ClientConfig = {
    region: options.region ?? 'us-east-1',
    forcePathStyle: options.forcePathStyle ?? false,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: options.maxAttempts ?? 3,
  };
  if (options.endpoint !== undefined) config.endpoint = options.endpoint;
  if (options.credentials !== undefined) config.credentials = { ...options.credentials };
  return new S3Store(config, bucket, prefix, partSize);
}

interface SdkError {
  name?: string;
  code?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
  $response?: { statusCode?: number };
}

/** Maps an SDK or network error to an ObjectStoreError (never carrying the original message). */
export function mapS3Error(
  err: unknown,
  op: string,
  key: string | undefined,
  description: string,
): ObjectStoreError {
  if (err instanceof ObjectStoreError) return err;
  const e = (err ?? {}) as SdkError;
  const status = e.$metadata?.httpStatusCode ?? e.$response?.statusCode;
  let s3Code = typeof e.Code === 'string' ? e.Code : typeof e.name === 'string' ? e.name : undefined;
  if (s3Code === 'Error' || s3Code === 'S3ServiceException') s3Code = undefined;
  const netCode = typeof e.code === 'string' ? e.code : undefined;
  const storeCode = s3Code ?? netCode ?? (status !== undefined ? `HTTP${status}` : undefined);
  const what = `${op}${key === undefined ? '' : ` ${quoteKey(key)}`} on ${description}`;
  const detail = `(${[storeCode, status !== undefined ? `HTTP ${status}` : undefined].filter(Boolean).join(', ')})`;
  const opts = {
    ...(storeCode === undefined ? {} : { storeCode }),
    ...(key === undefined ? {} : { key }),
    ...(status === undefined ? {} : { status }),
  };
  const make = (code: ObjectStoreError['code'], text: string) =>
    new ObjectStoreError(code, `${what}: ${text} ${detail}`, opts);
  if (s3Code === 'NoSuchKey' || (status === 404 && (s3Code === 'NotFound' || s3Code === undefined))) {
    return make('ERR_OBJECTSTORE_NOT_FOUND', 'no such object');
  }
  if (
    status === 403 ||
    s3Code === 'AccessDenied' ||
    s3Code === 'InvalidAccessKeyId' ||
    s3Code === 'SignatureDoesNotMatch' ||
    s3Code === 'CredentialsProviderError'
  ) {
    return make('ERR_OBJECTSTORE_ACCESS_DENIED', 'access denied');
  }
  if (
    status === 429 ||
    status === 503 ||
    s3Code === 'SlowDown' ||
    s3Code === 'Throttling' ||
    s3Code === 'ThrottlingException'
  ) {
    return make('ERR_OBJECTSTORE_THROTTLED', 'throttled by the store');
  }
  if (status === 412 || s3Code === 'PreconditionFailed' || s3Code === 'ConditionalRequestConflict') {
    return make('ERR_OBJECTSTORE_PRECONDITION_FAILED', 'precondition failed (the object already exists)');
  }
  if (status !== undefined && status >= 400 && status < 500) {
    return make('ERR_OBJECTSTORE_REJECTED', 'rejected by the store');
  }
  return make('ERR_OBJECTSTORE_FAULT', 'store fault');
}

class S3Store implements ObjectStore {
  readonly description: string;
  readonly #config: S3ClientConfig;
  #s3: { client: S3Client; sdk: Sdk } | null = null;
  readonly #bucket: string;
  readonly #prefix: string;
  readonly #partSize: number;

  constructor(config: S3ClientConfig, bucket: string, prefix: string, partSize: number) {
    this.#config = config;
    this.#bucket = bucket;
    this.#prefix = prefix === '' ? '' : `${prefix}/`;
    this.#partSize = partSize;
    this.description = `s3://${bucket}${prefix === '' ? '' : `/${prefix}`}`;
  }

  #full(key: string): string {
    return this.#prefix + validateKey(key, this.description);
  }

  /** The SDK and this store's client, made at its first request (loadSdk). */
  async #sdk(): Promise<{ client: S3Client; sdk: Sdk }> {
    if (this.#s3 === null) {
      const sdk = await loadSdk();
      this.#s3 ??= { client: new sdk.S3Client(this.#config), sdk };
    }
    return this.#s3;
  }

  #fail(err: unknown, op: string, key: string | undefined): ObjectStoreError {
    return mapS3Error(err, op, key, this.description);
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<{ etag?: string }> {
    const full = this.#full(key);
    const { contentLength } = options;
    if (contentLength !== undefined && (!Number.isSafeInteger(contentLength) || contentLength < 0)) {
      throw new ObjectStoreError(
        'ERR_OBJECTSTORE_INVALID_CONFIG',
        `put ${quoteKey(key)}: bad contentLength`,
        { key },
      );
    }
    if (body instanceof Uint8Array) {
      if (contentLength !== undefined && contentLength !== body.byteLength) throw this.#lengthMismatch(key);
      if (body.byteLength <= this.#partSize) return this.#putSingle(key, full, body, options);
    }
    // Keep every part but the last the same size and within the 10,000-part limit.
    let partSize = this.#partSize;
    if (contentLength !== undefined) partSize = Math.max(partSize, Math.ceil(contentLength / MAX_PARTS));
    const buffer = Buffer.allocUnsafe(partSize);
    let filled = 0;
    let total = 0;
    let upload: { id: string; parts: { PartNumber: number; ETag: string }[] } | undefined;
    try {
      const { client, sdk } = await this.#sdk();
      for await (const chunk of chunksOf(body)) {
        total += chunk.byteLength;
        if (contentLength !== undefined && total > contentLength) throw this.#lengthMismatch(key);
        let off = 0;
        while (off < chunk.byteLength) {
          const n = Math.min(partSize - filled, chunk.byteLength - off);
          buffer.set(chunk.subarray(off, off + n), filled);
          filled += n;
          off += n;
          if (filled === partSize) {
            upload ??= await this.#startMultipart(key, full, options);
            await this.#uploadPart(key, full, upload, buffer.subarray(0, filled));
            filled = 0;
          }
        }
      }
      if (contentLength !== undefined && total !== contentLength) throw this.#lengthMismatch(key);
      if (upload === undefined) return await this.#putSingle(key, full, buffer.subarray(0, filled), options);
      if (filled > 0 || upload.parts.length === 0) {
        await this.#uploadPart(key, full, upload, buffer.subarray(0, filled));
      }
      const done = await client.send(
        new sdk.CompleteMultipartUploadCommand({
          Bucket: this.#bucket,
          Key: full,
          UploadId: upload.id,
          MultipartUpload: { Parts: upload.parts },
          ...(options.ifNoneMatch === '*' ? { IfNoneMatch: '*' } : {}),
        }),
      );
      upload = undefined;
      return done.ETag ? { etag: done.ETag } : {};
    } catch (err) {
      // An upload was started: the SDK is loaded.
      const s3 = this.#s3;
      if (upload !== undefined && s3 !== null) {
        const id = upload.id;
        await s3.client
          .send(new s3.sdk.AbortMultipartUploadCommand({ Bucket: this.#bucket, Key: full, UploadId: id }))
          .catch(() => {});
      }
      if (err instanceof SourceError) throw err.original;
      throw this.#fail(err, 'put', key);
    }
  }

  #lengthMismatch(key: string): ObjectStoreError {
    return new ObjectStoreError(
      'ERR_OBJECTSTORE_REJECTED',
      `put ${quoteKey(key)} on ${this.description}: body length differs from contentLength`,
      { key, storeCode: 'IncompleteBody' },
    );
  }

  async #putSingle(
    key: string,
    full: string,
    bytes: Uint8Array,
    options: PutOptions,
  ): Promise<{ etag?: string }> {
    try {
      const { client, sdk } = await this.#sdk();
      const out = await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.#bucket,
          Key: full,
          Body: bytes,
          ContentLength: bytes.byteLength,
          ...(options.contentType === undefined ? {} : { ContentType: options.contentType }),
          ...(options.ifNoneMatch === '*' ? { IfNoneMatch: '*' } : {}),
        }),
      );
      return out.ETag ? { etag: out.ETag } : {};
    } catch (err) {
      throw this.#fail(err, 'put', key);
    }
  }

  async #startMultipart(
    key: string,
    full: string,
    options: PutOptions,
  ): Promise<{ id: string; parts: { PartNumber: number; ETag: string }[] }> {
    // Servers that ignore If-None-Match on CompleteMultipartUpload still refuse early here.
    if (options.ifNoneMatch === '*' && (await this.head(key)) !== null) {
      throw new ObjectStoreError(
        'ERR_OBJECTSTORE_PRECONDITION_FAILED',
        `put ${quoteKey(key)} on ${this.description}: the object already exists`,
        { key, storeCode: 'PreconditionFailed' },
      );
    }
    const { client, sdk } = await this.#sdk();
    const out = await client.send(
      new sdk.CreateMultipartUploadCommand({
        Bucket: this.#bucket,
        Key: full,
        ...(options.contentType === undefined ? {} : { ContentType: options.contentType }),
      }),
    );
    if (out.UploadId === undefined) {
      throw new ObjectStoreError(
        'ERR_OBJECTSTORE_FAULT',
        `put ${quoteKey(key)} on ${this.description}: no upload id`,
        {
          key,
        },
      );
    }
    return { id: out.UploadId, parts: [] };
  }

  async #uploadPart(
    key: string,
    full: string,
    upload: { id: string; parts: { PartNumber: number; ETag: string }[] },
    bytes: Uint8Array,
  ): Promise<void> {
    const PartNumber = upload.parts.length + 1;
    if (PartNumber > MAX_PARTS) {
      throw new ObjectStoreError(
        'ERR_OBJECTSTORE_REJECTED',
        `put ${quoteKey(key)} on ${this.description}: body exceeds ${MAX_PARTS} parts; raise partSize`,
        { key, storeCode: 'TooManyParts' },
      );
    }
    const { client, sdk } = await this.#sdk();
    const out = await client.send(
      new sdk.UploadPartCommand({
        Bucket: this.#bucket,
        Key: full,
        UploadId: upload.id,
        PartNumber,
        Body: bytes,
        ContentLength: bytes.byteLength,
      }),
    );
    upload.parts.push({ PartNumber, ETag: out.ETag ?? '' });
  }

  /** One GetObject request for `full`, ranged when asked (get, getStream). */
  async #getObject(full: string, range: ByteRange | undefined) {
    const Range = this.#rangeHeader(range);
    const { client, sdk } = await this.#sdk();
    return client.send(
      new sdk.GetObjectCommand({
        Bucket: this.#bucket,
        Key: full,
        ...(Range === undefined ? {} : { Range }),
      }),
    );
  }

  #rangeHeader(range: ByteRange | undefined): string | undefined {
    if (range === undefined) return undefined;
    return `bytes=${range.start}-${range.end ?? ''}`;
  }

  async get(key: string, range?: ByteRange, options?: GetOptions): Promise<Uint8Array> {
    const full = this.#full(key);
    checkRange(range, key, this.description);
    const max = options?.maxBytes;
    checkMaxBytes(max, key);
    try {
      const out = await this.#getObject(full, range);
      if (out.Body === undefined) return new Uint8Array(0);
      const bytes =
        max === undefined
          ? await out.Body.transformToByteArray()
          : await this.#readBounded(key, out.Body as AsyncIterable<Uint8Array>, out.ContentLength, max);
      // The SDK has buffered the body already: copying into the caller's buffer saves no
      // allocation here, but keeps the contract (a view of `into` whenever the bytes fit).
      const into = options?.into;
      if (into === undefined || into.byteLength < bytes.byteLength) return bytes;
      into.set(bytes);
      return into.subarray(0, bytes.byteLength);
    } catch (err) {
      throw this.#fail(err, 'get', key);
    }
  }

  // Reads a body of at most `max` bytes: refused on its Content-Length before any byte is read, and
  // counted as it arrives (a server may announce less than it sends). The connection is dropped
  // on refusal, so the rest of the body is never downloaded.
  async #readBounded(
    key: string,
    body: AsyncIterable<Uint8Array>,
    announced: number | undefined,
    max: number,
  ): Promise<Uint8Array> {
    const drop = () => (body as { destroy?: () => void }).destroy?.();
    if (announced !== undefined && announced > max) {
      drop();
      throw tooLarge(key, this.description, announced, max);
    }
    const chunks: Uint8Array[] = [];
    let n = 0;
    for await (const chunk of body) {
      n += chunk.byteLength;
      if (n > max) {
        drop();
        throw tooLarge(key, this.description, null, max);
      }
      chunks.push(chunk);
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, n);
  }

  async getStream(key: string, range?: ByteRange): Promise<AsyncIterable<Uint8Array>> {
    const full = this.#full(key);
    checkRange(range, key, this.description);
    let body: AsyncIterable<Uint8Array> | undefined;
    try {
      const out = await this.#getObject(full, range);
      body = out.Body as AsyncIterable<Uint8Array> | undefined;
    } catch (err) {
      throw this.#fail(err, 'get', key);
    }
    const fail = (err: unknown) => this.#fail(err, 'get', key);
    return (async function* () {
      if (body === undefined) return;
      try {
        for await (const chunk of body) yield chunk;
      } catch (err) {
        throw fail(err);
      } finally {
        (body as { destroy?: () => void }).destroy?.();
      }
    })();
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const full = this.#full(key);
    try {
      const { client, sdk } = await this.#sdk();
      const out = await client.send(new sdk.HeadObjectCommand({ Bucket: this.#bucket, Key: full }));
      const info: ObjectInfo = { key, size: out.ContentLength ?? 0 };
      if (out.ETag !== undefined) info.etag = out.ETag;
      if (out.LastModified !== undefined) info.lastModified = out.LastModified;
      if (out.ContentType !== undefined && out.ContentType !== '') info.contentType = out.ContentType;
      return info;
    } catch (err) {
      const mapped = this.#fail(err, 'head', key);
      if (mapped.code === 'ERR_OBJECTSTORE_NOT_FOUND') return null;
      throw mapped;
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    validatePrefix(prefix, this.description);
    const limit = listLimit(options.limit, this.description);
    const cursor = options.cursor === undefined ? undefined : decodeCursor(options.cursor, this.description);
    try {
      const { client, sdk } = await this.#sdk();
      const out = await client.send(
        new sdk.ListObjectsV2Command({
          Bucket: this.#bucket,
          Prefix: this.#prefix + prefix,
          MaxKeys: limit,
          ...(cursor?.kind === 't' ? { ContinuationToken: cursor.value } : {}),
          ...(cursor?.kind === 'k' ? { StartAfter: this.#prefix + cursor.value } : {}),
        }),
      );
      const objects: ObjectInfo[] = [];
      let last: string | undefined;
      for (const o of out.Contents ?? []) {
        if (o.Key === undefined || !o.Key.startsWith(this.#prefix)) continue;
        last = o.Key.slice(this.#prefix.length);
        // Objects written by other tools may have names no key can have: they are not listed.
        if (keyProblem(last) !== null) continue;
        const info: ObjectInfo = { key: last, size: o.Size ?? 0 };
        if (o.ETag !== undefined) info.etag = o.ETag;
        if (o.LastModified !== undefined) info.lastModified = o.LastModified;
        objects.push(info);
      }
      if (out.IsTruncated !== true) return { objects };
      if (out.NextContinuationToken) return { objects, cursor: encodeCursor('t', out.NextContinuationToken) };
      return last === undefined ? { objects } : { objects, cursor: encodeCursor('k', last) };
    } catch (err) {
      throw this.#fail(err, 'list', prefix);
    }
  }

  listAll(prefix: string): AsyncIterable<ObjectInfo> {
    return listAllPages((p, o) => this.list(p, o), prefix);
  }

  async delete(key: string): Promise<void> {
    const full = this.#full(key);
    try {
      const { client, sdk } = await this.#sdk();
      await client.send(new sdk.DeleteObjectCommand({ Bucket: this.#bucket, Key: full }));
    } catch (err) {
      const mapped = this.#fail(err, 'delete', key);
      if (mapped.code === 'ERR_OBJECTSTORE_NOT_FOUND') return;
      throw mapped;
    }
  }
}
