/**
 * The `redis` connector: the keys of one Redis database (optionally only those under a key
 * prefix), with their values and expirations (the specification's key-value namespace).
 *
 * - Listing walks the key space with SCAN (MATCH <prefix>*), page by page; the listing cursor is
 *   SCAN's own cursor, so a listing resumes in another process. SCAN may return a key twice; this
 *   connector drops repeats within one enumeration.
 * - A record is one key. Its bytes are the key's DUMP payload: Redis's own serialisation of any
 *   value type (string, list, set, sorted set, hash, stream, module types), with its RDB version and
 *   checksum, restored exactly by RESTORE. Metadata: `type`, `pttl` (remaining milliseconds at
 *   listing, -1 for none), `expiresAt` (epoch milliseconds or null), `rdbVersion` of the payload,
 *   `redisVersion` of the server. DUMP and PTTL are taken at listing time (pipelined per page) and
 *   served to the following `read` from a bounded cache (re-dumped when evicted).
 * - Record names are the keys themselves when they are well-formed UTF-8 text without control
 *   characters; any other key (binary, control characters, empty, or one that starts with the
 *   escape marker `!b64:`) is named `!b64:` + base64url of its bytes. The mapping is one-to-one.
 * - Restore (`write`) uses RESTORE ... ABSTTL with the recorded `expiresAt`, so a key keeps its
 *   original expiry instant; a key whose expiry has passed is not written (`written: false,
 *   reason: 'expired'`). With `replace: true` (default, the specification's `onExisting:
 *   overwrite`) an existing key is replaced; with `replace: false` it is ERR_SOURCE_TARGET_EXISTS.
 *   Keys outside the configured prefix are refused. A payload from a newer Redis than the target
 *   is refused by the server (ERR_SOURCE_INVALID_RECORD).
 *
 * Security: the connection URL carries the password; it never appears in a message, a
 * description or an error (errors keep only Redis's error prefix, e.g. WRONGPASS, or the errno).
 */
import type { Redis } from 'ioredis';
import { quoteName, SourceError } from './errors.ts';
import {
  bindingOf,
  clampRange,
  collectBody,
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

export interface RedisSourceConfig {
  type: 'redis';
  /** redis://[:password@]host:port[/db] or rediss:// for TLS. Holds a secret: never logged. */
  url: string;
  /** Database number (overrides the URL's). Default 0. */
  db?: number;
  /** Only keys starting with this prefix. */
  prefix?: string;
  binding?: string;
  /** Restore replaces existing keys (default true). */
  replace?: boolean;
  maxRecordBytes?: number;
  /** Bytes of DUMP payloads kept from a listing page for the reads that follow (default 32 MiB). */
  cacheBytes?: number;
}

const ESCAPE = '!b64:';
const MAX_VALUE = 512 * 1024 * 1024; // Redis's own ceiling for one value
const SCAN_CALLS_PER_PAGE = 100;
const utf8 = new TextDecoder('utf-8', { fatal: true });
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what force the escaped form
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The record name of a key. */
export function redisKeyToName(key: Buffer): string {
  let text: string | null;
  try {
    text = utf8.decode(key);
  } catch {
    text = null;
  }
  if (text === null || text.length === 0 || CONTROL.test(text) || text.startsWith(ESCAPE)) {
    return `${ESCAPE}${key.toString('base64url')}`;
  }
  return text;
}

/** The key of a record name, or null when the name is not one this connector makes. */
export function redisNameToKey(name: string): Buffer | null {
  if (typeof name !== 'string') return null;
  if (name.startsWith(ESCAPE)) {
    const b64 = name.slice(ESCAPE.length);
    if (!/^[A-Za-z0-9_-]*$/.test(b64)) return null;
    const key = Buffer.from(b64, 'base64url');
    return redisKeyToName(key) === name ? key : null;
  }
  if (name.length === 0 || CONTROL.test(name)) return null;
  return Buffer.from(name, 'utf8');
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** The first word of a Redis error reply (WRONGPASS, NOAUTH, BUSYKEY, ERR, ...) or the errno. */
function codeOf(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.message === 'string') {
    const word = /^([A-Z][A-Z_]{1,30})\b/.exec(e.message)?.[1];
    if (word !== undefined) return word;
  }
  return 'error';
}

function messageOf(err: unknown): string {
  const m = (err as { message?: unknown })?.message;
  return typeof m === 'string' ? m : '';
}

interface Cached {
  payload: Buffer;
}

/** Opens a `redis` connector. No connection is made until the first call. Throws INVALID_CONFIG. */
export function createRedisSource(config: RedisSourceConfig): SourceConnector {
  return new RedisSource(config);
}

class RedisSource implements SourceConnector {
  readonly type = 'redis' as const;
  readonly binding: string;
  readonly namespace: string;
  readonly description: string;
  readonly rangeRead = true;
  readonly #url: string;
  readonly #db: number;
  readonly #prefix: string;
  readonly #prefixBytes: Buffer;
  readonly #replace: boolean;
  readonly #ceiling: number;
  readonly #cacheLimit: number;
  #client: Redis | undefined;
  #connecting: Promise<Redis> | undefined;
  #lastError: unknown;
  #redisVersion: string | undefined;
  #seen = new Set<string>();
  #cache = new Map<string, Cached>();
  #cacheBytes = 0;
  #closed = false;

  constructor(config: RedisSourceConfig) {
    const bad = (why: string) => new SourceError('ERR_SOURCE_INVALID_CONFIG', `redis source: ${why}`);
    let url: URL;
    try {
      url = new URL(String(config?.url));
    } catch {
      throw bad('url is not a valid redis:// URL'); // never echo it: it may hold the password
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
      throw bad('url must start with redis:// or rediss://');
    const pathDb = url.pathname.replace(/^\//, '');
    const db = config.db ?? (pathDb === '' ? 0 : Number(pathDb));
    if (!Number.isSafeInteger(db) || db < 0) throw bad('db must be a non-negative integer');
    if (config.prefix !== undefined && typeof config.prefix !== 'string')
      throw bad('prefix must be a string');
    this.#url = url.toString();
    this.#db = db;
    this.#prefix = config.prefix ?? '';
    this.#prefixBytes = Buffer.from(this.#prefix, 'utf8');
    this.#replace = config.replace ?? true;
    this.#ceiling = maxRecordBytesOf(config.maxRecordBytes);
    const cache = config.cacheBytes ?? 32 * 1024 * 1024;
    if (!Number.isSafeInteger(cache) || cache < 0) throw bad('cacheBytes must be a non-negative integer');
    this.#cacheLimit = cache;
    this.binding = bindingOf(config.binding, 'redis');
    this.namespace = `db${db}`;
    const port = url.port === '' ? '6379' : url.port;
    this.description = `${url.protocol}//${url.hostname}:${port}/${db}${this.#prefix === '' ? '' : ` prefix ${quoteName(this.#prefix)}`}`;
  }

  /** Classifies a connection or command failure. */
  #error(err: unknown, op: string, name?: string): SourceError {
    if (err instanceof SourceError) return err;
    // A closed connection reports itself vaguely; the 'error' event said why.
    let cause = err;
    if (
      /Connection is closed|Stream isn't writeable/i.test(messageOf(err)) &&
      this.#lastError !== undefined
    ) {
      cause = this.#lastError;
    }
    const code = codeOf(cause);
    const text = messageOf(cause);
    const opts = { sourceCode: code, ...(name === undefined ? {} : { record: name }) };
    const what = `${this.description}: ${op}${name === undefined ? '' : ` ${quoteName(name)}`}`;
    if (
      [
        'WRONGPASS',
        'NOAUTH',
        'NOPERM',
        'ECONNREFUSED',
        'ENOTFOUND',
        'EAI_AGAIN',
        'ETIMEDOUT',
        'ECONNRESET',
        'EHOSTUNREACH',
      ].includes(code)
    ) {
      return new SourceError(
        'ERR_SOURCE_BINDING',
        `${what} failed: server not reachable or refused us (${code})`,
        opts,
      );
    }
    if (code === 'ERR' && /DB index is out of range/i.test(text)) {
      return new SourceError(
        'ERR_SOURCE_RESOURCE_MISSING',
        `${what} failed: database ${this.#db} does not exist`,
        opts,
      );
    }
    if (code === 'LOADING' || code === 'BUSY' || code === 'TRYAGAIN' || code === 'MASTERDOWN') {
      return new SourceError('ERR_SOURCE_THROTTLED', `${what}: server busy (${code})`, opts);
    }
    return new SourceError('ERR_SOURCE_READ', `${what} failed (${code})`, opts);
  }

  #connect(): Promise<Redis> {
    if (this.#closed)
      return Promise.reject(new SourceError('ERR_SOURCE_CLOSED', `${this.description}: connector is closed`));
    if (this.#client !== undefined) return Promise.resolve(this.#client);
    this.#connecting ??= (async () => {
      // Loaded at the first connection, not with this package: a process with no redis source
      // never loads it (about 2.3 MiB of heap).
      const { Redis: RedisClient } = await import('ioredis');
      const client = new RedisClient(this.#url, {
        lazyConnect: true,
        db: 0,
        connectTimeout: 10_000,
        maxRetriesPerRequest: 2,
        retryStrategy: (times) => (times > 5 ? null : Math.min(times * 200, 2000)),
      });
      client.on('error', (err: unknown) => {
        this.#lastError = err;
      });
      try {
        await client.connect();
        // SELECT explicitly: a database that does not exist must fail here, not be ignored.
        if (this.#db !== 0) await client.select(this.#db);
        const info = await client.info('server');
        this.#redisVersion = /redis_version:([^\r\n]+)/.exec(info)?.[1];
      } catch (err) {
        client.disconnect();
        throw this.#error(err, 'connect');
      }
      this.#client = client;
      return client;
    })().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async list(options: ListOptions = {}): Promise<SourcePage> {
    const pageSize = pageSizeOf(options);
    let scan = '0';
    if (options.cursor === undefined) {
      this.#seen.clear();
      this.#clearCache();
    } else {
      scan = decodeCursor('redis', options.cursor);
      if (!/^\d{1,20}$/.test(scan) || scan === '0') {
        throw new SourceError('ERR_SOURCE_INVALID_CURSOR', `${this.description}: malformed listing cursor`);
      }
    }
    const client = await this.#connect();
    const keys: Buffer[] = [];
    try {
      for (let calls = 0; calls < SCAN_CALLS_PER_PAGE && keys.length < pageSize; calls++) {
        const [next, batch] = await client.scanBuffer(
          scan,
          'MATCH',
          `${globEscape(this.#prefix)}*`,
          'COUNT',
          pageSize,
        );
        scan = next.toString('latin1');
        for (const key of batch) {
          if (!key.subarray(0, this.#prefixBytes.length).equals(this.#prefixBytes)) continue;
          const name = redisKeyToName(key);
          if (this.#seen.has(name)) continue; // SCAN may repeat a key during a rehash
          this.#seen.add(name);
          keys.push(key);
        }
        if (scan === '0') break;
      }
    } catch (err) {
      throw this.#error(err, 'scan');
    }
    const records = await this.#describe(client, keys);
    return { records, skipped: [], ...(scan === '0' ? {} : { cursor: encodeCursor('redis', scan) }) };
  }

  /** DUMP, PTTL and TYPE of each key in one pipeline; keys gone meanwhile are left out. */
  async #describe(client: Redis, keys: Buffer[]): Promise<SourceRecordInfo[]> {
    if (keys.length === 0) return [];
    const pipe = client.pipeline();
    for (const key of keys) pipe.dumpBuffer(key).pttl(key).type(key);
    const now = Date.now();
    let results: [Error | null, unknown][] | null;
    try {
      results = await pipe.exec();
    } catch (err) {
      throw this.#error(err, 'dump');
    }
    if (results === null) throw this.#error(new Error('pipeline aborted'), 'dump');
    const records: SourceRecordInfo[] = [];
    for (let i = 0; i < keys.length; i++) {
      const [dumpErr, payload] = results[i * 3]!;
      const [pttlErr, pttl] = results[i * 3 + 1]!;
      const [typeErr, type] = results[i * 3 + 2]!;
      const failed = dumpErr ?? pttlErr ?? typeErr;
      if (failed) throw this.#error(failed, 'dump');
      if (payload === null || !Buffer.isBuffer(payload) || pttl === -2 || type === 'none') continue; // expired or deleted since SCAN
      const name = redisKeyToName(keys[i]!);
      const ms = Number(pttl);
      this.#remember(name, payload);
      records.push({
        name,
        size: payload.length,
        sourceType: 'redis',
        binding: this.binding,
        namespace: this.namespace,
        metadata: {
          type: String(type),
          pttl: ms,
          expiresAt: ms >= 0 ? now + ms : null,
          rdbVersion: payload.length >= 10 ? payload.readUInt16LE(payload.length - 10) : null,
          ...(this.#redisVersion === undefined ? {} : { redisVersion: this.#redisVersion }),
        },
      });
    }
    return records;
  }

  #remember(name: string, payload: Buffer): void {
    if (payload.length > this.#ceiling || payload.length > this.#cacheLimit) return;
    const old = this.#cache.get(name);
    if (old !== undefined) this.#cacheBytes -= old.payload.length;
    this.#cache.set(name, { payload });
    this.#cacheBytes += payload.length;
    // Oldest first: the run reads in listing order, so the oldest entries are the ones already read.
    for (const [k, v] of this.#cache) {
      if (this.#cacheBytes <= this.#cacheLimit) break;
      this.#cache.delete(k);
      this.#cacheBytes -= v.payload.length;
    }
  }

  #clearCache(): void {
    this.#cache.clear();
    this.#cacheBytes = 0;
  }

  enumerate(options?: EnumerateOptions): AsyncIterable<SourceRecordInfo | SkippedRecord> {
    return enumeratePages((o) => this.list(o), this.description, options);
  }

  #keyOf(name: string): Buffer {
    const key = redisNameToKey(name);
    if (key === null) {
      throw new SourceError(
        'ERR_SOURCE_UNSAFE_NAME',
        `${this.description}: ${quoteName(String(name))} is not a key name`,
        {
          ...(typeof name === 'string' ? { record: name } : {}),
        },
      );
    }
    if (!key.subarray(0, this.#prefixBytes.length).equals(this.#prefixBytes)) {
      throw new SourceError(
        'ERR_SOURCE_UNSAFE_NAME',
        `${this.description}: ${quoteName(name)} is outside the key prefix`,
        {
          record: name,
        },
      );
    }
    return key;
  }

  /** The payload of a key: from the listing cache (kept for `keep`), else a fresh DUMP. */
  async #payload(name: string, keep: boolean): Promise<Buffer> {
    const key = this.#keyOf(name);
    const cached = this.#cache.get(name);
    if (cached !== undefined) {
      if (!keep) {
        this.#cache.delete(name);
        this.#cacheBytes -= cached.payload.length;
      }
      return cached.payload;
    }
    const client = await this.#connect();
    let payload: Buffer | null;
    try {
      payload = await client.dumpBuffer(key);
    } catch (err) {
      throw this.#error(err, 'dump', name);
    }
    if (payload === null) {
      throw new SourceError(
        'ERR_SOURCE_RECORD_VANISHED',
        `${this.description}: ${quoteName(name)} vanished (expired or deleted)`,
        {
          record: name,
        },
      );
    }
    if (payload.length > this.#ceiling) throw overCeiling(name, payload.length, this.#ceiling);
    if (keep) this.#remember(name, payload);
    return payload;
  }

  async read(name: string): Promise<AsyncIterable<Uint8Array>> {
    const payload = await this.#payload(name, false);
    return (async function* () {
      yield payload;
    })();
  }

  async readRange(name: string, start: number, endInclusive: number): Promise<Uint8Array> {
    clampRange(start, endInclusive, Number.MAX_SAFE_INTEGER);
    // Keep the payload cached: chunked capture reads one key in several ranges.
    const payload = await this.#payload(name, true);
    const range = clampRange(start, endInclusive, payload.length);
    return range === null ? new Uint8Array(0) : payload.subarray(range[0], range[1] + 1);
  }

  async exists(name: string): Promise<boolean> {
    const key = this.#keyOf(name);
    const client = await this.#connect();
    try {
      return (await client.exists(key)) === 1;
    } catch (err) {
      throw this.#error(err, 'exists', name);
    }
  }

  async write(name: string, body: RecordBody, metadata: Record<string, unknown> = {}): Promise<WriteResult> {
    const key = this.#keyOf(name);
    const expiresAt = metadata.expiresAt;
    if (
      expiresAt !== undefined &&
      expiresAt !== null &&
      (typeof expiresAt !== 'number' || !Number.isSafeInteger(expiresAt))
    ) {
      throw new SourceError(
        'ERR_SOURCE_INVALID_RECORD',
        `${this.description}: ${quoteName(name)} has a malformed expiresAt`,
        {
          record: name,
        },
      );
    }
    const payload = await collectBody(body, MAX_VALUE, name);
    if (typeof expiresAt === 'number' && expiresAt <= Date.now())
      return { written: false, reason: 'expired' };
    const client = await this.#connect();
    const args: (string | number | Buffer)[] = [key, typeof expiresAt === 'number' ? expiresAt : 0, payload];
    if (this.#replace) args.push('REPLACE');
    if (typeof expiresAt === 'number') args.push('ABSTTL');
    try {
      await client.call('RESTORE', ...args);
      return { written: true };
    } catch (err) {
      const code = codeOf(err);
      if (code === 'BUSYKEY') {
        throw new SourceError(
          'ERR_SOURCE_TARGET_EXISTS',
          `${this.description}: ${quoteName(name)} already exists`,
          {
            record: name,
            sourceCode: code,
          },
        );
      }
      if (/DUMP payload|Bad data format/i.test(messageOf(err))) {
        throw new SourceError(
          'ERR_SOURCE_INVALID_RECORD',
          `${this.description}: ${quoteName(name)} is not a payload this server can restore (corrupt, or from a newer Redis)`,
          { record: name, sourceCode: code },
        );
      }
      const mapped = this.#error(err, 'restore', name);
      if (mapped.code !== 'ERR_SOURCE_READ') throw mapped;
      throw new SourceError(
        'ERR_SOURCE_WRITE',
        `${this.description}: restore ${quoteName(name)} failed (${code})`,
        {
          record: name,
          sourceCode: code,
        },
      );
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#clearCache();
    this.#seen.clear();
    const client = this.#client ?? (await this.#connecting?.catch(() => undefined));
    this.#client = undefined;
    if (client !== undefined) {
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    }
  }
}
