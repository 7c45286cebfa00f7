/**
 * The stores a canary flight writes through.
 *
 * - `canaryStore(store)`: the destination seen through the canary's own namespace `_canary/`. Every
 *   key the flight names (write, read, list, delete) is put under that prefix and a key that would
 *   climb out of it (an empty, `.` or `..` segment, a leading `/`) is refused before the
 *   destination is touched, so a flight can never read, overwrite or delete a run's objects
 *   (`jobs/`) or `_RECOVERY/`. Runs, retention, restores, drills, the estate size and the pull
 *   endpoints all list under `jobs/` (archive layout), so they never see the canary's objects.
 * - `watchedStore(store)`: remembers the last store error an operation threw, so a read-back that
 *   the archive reader reports only as "destination fault" can still be told apart: throttled or
 *   unreachable (transient) or refused (a real failure).
 * - `memoryStore()`: a small in-memory object store for the self-check (no destination at all).
 *
 * Security-relevant behaviour: none of these wrappers adds text to an error; the destination's own
 * errors pass through unchanged (their messages are never shown, only their codes).
 */
import {
  type Body,
  type ByteRange,
  type GetOptions,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  type ObjectStore,
  ObjectStoreError,
  type PutOptions,
  validateKey,
} from '@coffer/objectstore';

/** The canary's namespace in every destination. Nothing outside it is ever written or deleted. */
export const CANARY_PREFIX = '_canary/';

/** Refuses a key or prefix that is not a plain relative name (so it cannot leave the namespace). */
function inside(key: string, what: 'key' | 'prefix'): string {
  if (what === 'prefix' && key === '') return CANARY_PREFIX;
  const body = what === 'prefix' && key.endsWith('/') ? key.slice(0, -1) : key;
  validateKey(body, 'the canary namespace');
  return `${CANARY_PREFIX}${key}`;
}

/** `store` confined to `_canary/`: keys are relative to it, listings strip it. */
export function canaryStore(store: ObjectStore): ObjectStore {
  const strip = (o: ObjectInfo): ObjectInfo => ({ ...o, key: o.key.slice(CANARY_PREFIX.length) });
  const ours = (o: ObjectInfo) => o.key.startsWith(CANARY_PREFIX);
  return {
    description: 'canary namespace',
    put: async (key, body, options) => store.put(inside(key, 'key'), body, options),
    get: async (key, range, options) => store.get(inside(key, 'key'), range, options),
    getStream: async (key, range) => store.getStream(inside(key, 'key'), range),
    async head(key) {
      const info = await store.head(inside(key, 'key'));
      return info === null ? null : strip(info);
    },
    async list(prefix, options) {
      const page = await store.list(inside(prefix, 'prefix'), options);
      return { ...page, objects: page.objects.filter(ours).map(strip) };
    },
    async *listAll(prefix) {
      for await (const o of store.listAll(inside(prefix, 'prefix'))) if (ours(o)) yield strip(o);
    },
    delete: async (key) => store.delete(inside(key, 'key')),
  };
}

/** A store that remembers the last error thrown by any of its operations. */
export interface WatchedStore extends ObjectStore {
  /** The last error an operation threw (null after `reset()`). */
  readonly lastError: unknown;
  reset(): void;
}

export function watchedStore(store: ObjectStore): WatchedStore {
  let lastError: unknown = null;
  const seen = async <T>(p: Promise<T>): Promise<T> => {
    try {
      return await p;
    } catch (e) {
      lastError = e;
      throw e;
    }
  };
  return {
    description: store.description,
    get lastError() {
      return lastError;
    },
    reset() {
      lastError = null;
    },
    put: (key, body, options) => seen(Promise.resolve().then(() => store.put(key, body, options))),
    get: (key, range, options) => seen(Promise.resolve().then(() => store.get(key, range, options))),
    getStream: (key, range) => seen(Promise.resolve().then(() => store.getStream(key, range))),
    head: (key) => seen(Promise.resolve().then(() => store.head(key))),
    list: (prefix, options) => seen(Promise.resolve().then(() => store.list(prefix, options))),
    async *listAll(prefix) {
      try {
        yield* store.listAll(prefix);
      } catch (e) {
        lastError = e;
        throw e;
      }
    },
    delete: (key) => seen(Promise.resolve().then(() => store.delete(key))),
  };
}

/** A copy (a Buffer's `slice` would share the caller's memory, which the writer reuses). */
const copy = (b: Uint8Array): Uint8Array => new Uint8Array(b);

async function collect(body: Body): Promise<Uint8Array> {
  if (body instanceof Uint8Array) return copy(body);
  const parts: Uint8Array[] = [];
  for await (const p of body) parts.push(copy(p));
  return new Uint8Array(Buffer.concat(parts));
}

/** The most bytes the in-memory store holds (the self-check writes a few KiB). */
const MEMORY_LIMIT = 16 * 1024 * 1024;

/**
 * An in-memory object store with the interface's semantics (create-only puts, ranges, bounded
 * reads, sorted paged listings). For the self-check only: bounded to 16 MiB in all.
 */
export function memoryStore(): ObjectStore {
  const objects = new Map<string, Uint8Array>();
  const where = 'memory';
  let used = 0;
  const notFound = (key: string) =>
    new ObjectStoreError('ERR_OBJECTSTORE_NOT_FOUND', 'no such object', { key });
  // Plain string order: the canary's keys are ASCII, where it equals the UTF-8 byte order.
  const sorted = (prefix: string) => [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  const slice = (bytes: Uint8Array, range?: ByteRange) =>
    range === undefined
      ? bytes
      : bytes.subarray(range.start, range.end === undefined ? undefined : range.end + 1);
  const store: ObjectStore = {
    description: 'memory',
    async put(key: string, body: Body, options?: PutOptions) {
      validateKey(key, where);
      const bytes = await collect(body);
      options?.onBodyWritten?.();
      if (options?.contentLength !== undefined && options.contentLength !== bytes.length)
        throw new ObjectStoreError('ERR_OBJECTSTORE_REJECTED', 'body length differs', { key });
      if (options?.ifNoneMatch === '*' && objects.has(key))
        throw new ObjectStoreError('ERR_OBJECTSTORE_PRECONDITION_FAILED', 'object exists', { key });
      used += bytes.length - (objects.get(key)?.length ?? 0);
      if (used > MEMORY_LIMIT)
        throw new ObjectStoreError('ERR_OBJECTSTORE_REJECTED', 'memory store full', { key });
      objects.set(key, bytes);
      return {};
    },
    async get(key: string, range?: ByteRange, options?: GetOptions) {
      validateKey(key, where);
      const bytes = objects.get(key);
      if (bytes === undefined) throw notFound(key);
      const part = slice(bytes, range);
      if (options?.maxBytes !== undefined && part.length > options.maxBytes)
        throw new ObjectStoreError('ERR_OBJECTSTORE_TOO_LARGE', 'object too large', { key });
      if (options?.into !== undefined && options.into.length >= part.length) {
        options.into.set(part);
        return options.into.subarray(0, part.length);
      }
      return copy(part);
    },
    async getStream(key: string, range?: ByteRange) {
      const bytes = await store.get(key, range);
      return (async function* () {
        yield bytes;
      })();
    },
    async head(key: string) {
      validateKey(key, where);
      const bytes = objects.get(key);
      return bytes === undefined ? null : { key, size: bytes.length };
    },
    async list(prefix: string, options?: ListOptions): Promise<ListPage> {
      const limit = options?.limit ?? 1000;
      const keys = sorted(prefix);
      const start = options?.cursor === undefined ? 0 : keys.findIndex((k) => k > options.cursor!);
      const page = start < 0 ? [] : keys.slice(start, start + limit);
      const objectsOut = page.map((k) => ({ key: k, size: objects.get(k)!.length }));
      const more = start >= 0 && start + limit < keys.length;
      return { objects: objectsOut, ...(more ? { cursor: page[page.length - 1]! } : {}) };
    },
    async *listAll(prefix: string) {
      for (const key of sorted(prefix)) {
        const bytes = objects.get(key);
        if (bytes !== undefined) yield { key, size: bytes.length };
      }
    },
    async delete(key: string) {
      validateKey(key, where);
      used -= objects.get(key)?.length ?? 0;
      objects.delete(key);
    },
  };
  return store;
}
