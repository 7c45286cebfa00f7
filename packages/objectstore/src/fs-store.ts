/**
 * The local-filesystem ObjectStore driver (the embedded default). Each key maps to a file under
 * `root`, '/' segments to directories.
 *
 * Security-relevant behaviour:
 * - Writes are atomic and durable: the body goes to a temp file in the target directory, which is
 *   fsynced, then renamed over the key (or hard-linked for `ifNoneMatch: '*'`, which fails
 *   atomically when the key exists), then the directory is fsynced. A reader sees the old object or
 *   the new one, never a part. Temp file names contain a backslash, which no valid key can, so they
 *   never show up in a listing and can never collide with a key.
 * - Keys can never escape the root: keys are validated (no '..', '.', empty segment, leading '/',
 *   NUL, backslash or control characters), the joined path is checked to stay under the root, and
 *   every resolved path (after symlinks) must stay under the resolved root; a symlink leading out is
 *   refused with ERR_OBJECTSTORE_ACCESS_DENIED. Listings never follow symlinks.
 * - Files are created with mode 0600 and directories with 0700 (the engine's user only).
 */
import { randomBytes } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import {
  type FileHandle,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  realpath,
  rename,
  rmdir,
  unlink,
} from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { ObjectStoreError } from './errors.ts';
import { chunksOf, SourceError } from './internal/body.ts';
import {
  checkMaxBytes,
  checkRange,
  compareKeys,
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

export interface FsStoreOptions {
  /** The directory holding the objects; created on the first write when absent. */
  root: string;
}

const FILE_MODE = 0o600;
const DIR_MODE = 0o700;
const READ_CHUNK = 256 * 1024;

function errnoOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Creates a filesystem store rooted at `options.root` (resolved to an absolute path).
 * Throws ERR_OBJECTSTORE_INVALID_CONFIG when the root is missing or malformed.
 */
export function createFsStore(options: FsStoreOptions): ObjectStore {
  const root = options?.root;
  if (typeof root !== 'string' || root === '' || root.includes('\0')) {
    throw new ObjectStoreError('ERR_OBJECTSTORE_INVALID_CONFIG', 'fs store: root must be a non-empty path');
  }
  return new FsStore(resolve(root));
}

class FsStore implements ObjectStore {
  readonly description: string;
  readonly #root: string;
  #realRoot: string | undefined;

  constructor(root: string) {
    this.#root = root;
    this.description = `fs:${root}`;
  }

  #fail(err: unknown, op: string, key: string | undefined): ObjectStoreError {
    if (err instanceof ObjectStoreError) return err;
    const errno = errnoOf(err);
    const what = `${op}${key === undefined ? '' : ` ${quoteKey(key)}`} on ${this.description}`;
    const opts = {
      ...(errno === undefined ? {} : { storeCode: errno }),
      ...(key === undefined ? {} : { key }),
    };
    switch (errno) {
      case 'ENOENT':
        return new ObjectStoreError('ERR_OBJECTSTORE_NOT_FOUND', `${what}: no such object`, opts);
      case 'EACCES':
      case 'EPERM':
        return new ObjectStoreError(
          'ERR_OBJECTSTORE_ACCESS_DENIED',
          `${what}: permission denied (${errno})`,
          opts,
        );
      case 'ENAMETOOLONG':
        return new ObjectStoreError(
          'ERR_OBJECTSTORE_INVALID_KEY',
          `${what}: name too long for this filesystem`,
          opts,
        );
      case 'ENOSPC':
      case 'EDQUOT':
      case 'EROFS':
      case 'EFBIG':
      case 'EISDIR':
      case 'ENOTDIR':
      case 'EEXIST':
        return new ObjectStoreError(
          'ERR_OBJECTSTORE_REJECTED',
          `${what}: refused by the filesystem (${errno})`,
          opts,
        );
      default:
        return new ObjectStoreError(
          'ERR_OBJECTSTORE_FAULT',
          `${what}: filesystem error${errno === undefined ? '' : ` (${errno})`}`,
          opts,
        );
    }
  }

  #outside(op: string, key: string): ObjectStoreError {
    return new ObjectStoreError(
      'ERR_OBJECTSTORE_ACCESS_DENIED',
      `${op} ${quoteKey(key)} on ${this.description}: resolves outside the store root (symlink refused)`,
      { key, storeCode: 'OutsideRoot' },
    );
  }

  /** Lexical path of a validated key; also asserts it stays under the root. */
  #pathOf(key: string, op: string): string {
    validateKey(key, this.description);
    const p = join(this.#root, ...key.split('/'));
    if (!p.startsWith(this.#root + sep)) throw this.#outside(op, key);
    return p;
  }

  async #realRootPath(): Promise<string> {
    if (this.#realRoot === undefined) this.#realRoot = await realpath(this.#root);
    return this.#realRoot;
  }

  #inside(realRoot: string, real: string): boolean {
    return real === realRoot || real.startsWith(realRoot + sep);
  }

  /** Resolves an existing path and checks it is under the root; ENOENT propagates. */
  async #resolveExisting(p: string, op: string, key: string, allowRoot = false): Promise<string> {
    const realRoot = await this.#realRootPath();
    const real = await realpath(p);
    if (!this.#inside(realRoot, real) || (real === realRoot && !allowRoot)) throw this.#outside(op, key);
    return real;
  }

  /** Throws "outside the root" when the nearest existing ancestor of `p` resolves outside it. */
  async #checkAncestors(p: string, op: string, key: string): Promise<void> {
    const realRoot = await this.#realRootPath().catch(() => undefined);
    if (realRoot === undefined) return;
    for (let dir = dirname(p); dir.startsWith(this.#root + sep); dir = dirname(dir)) {
      let real: string;
      try {
        real = await realpath(dir);
      } catch {
        continue;
      }
      if (!this.#inside(realRoot, real)) throw this.#outside(op, key);
      return;
    }
  }

  /**
   * Makes sure the directory for `key` exists under the root, creating missing segments one by
   * one (mkdir -p would follow a symlink out of the root) and checking each existing segment's
   * resolved path. Returns the resolved directory.
   */
  async #ensureDir(key: string, op: string): Promise<string> {
    const segments = key.split('/').slice(0, -1);
    const created = await mkdir(this.#root, { recursive: true, mode: DIR_MODE });
    if (created !== undefined) await fsyncDir(dirname(this.#root));
    const realRoot = await this.#realRootPath();
    if (segments.length === 0) return realRoot;
    // Fast path: the directory already exists (the usual case).
    try {
      const real = await realpath(join(this.#root, ...segments));
      if (!this.#inside(realRoot, real) || real === realRoot) throw this.#outside(op, key);
      return real;
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err;
    }
    let current = realRoot;
    for (const seg of segments) {
      const next = join(current, seg);
      try {
        await mkdir(next, { mode: DIR_MODE });
        await fsyncDir(current);
        current = next;
      } catch (err) {
        if (errnoOf(err) !== 'EEXIST') throw err;
        const real = await realpath(next);
        if (!this.#inside(realRoot, real) || real === realRoot) throw this.#outside(op, key);
        current = real;
      }
    }
    return current;
  }

  async put(key: string, body: Body, options: PutOptions = {}): Promise<{ etag?: string }> {
    const op = 'put';
    try {
      this.#pathOf(key, op);
      const name = key.slice(key.lastIndexOf('/') + 1);
      const tmpName = `.coffer-tmp\\${randomBytes(12).toString('hex')}`;
      let dir = '';
      let handle: FileHandle | undefined;
      // A concurrent delete may prune the directories while they are made or before the open:
      // retry.
      for (let attempt = 0; handle === undefined; attempt++) {
        try {
          dir = await this.#ensureDir(key, op);
          handle = await open(
            join(dir, tmpName),
            constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL,
            FILE_MODE,
          );
        } catch (err) {
          if (errnoOf(err) !== 'ENOENT' || attempt >= 3) throw err;
        }
      }
      const tmp = join(dir, tmpName);
      let committed = false;
      try {
        let total = 0;
        for await (const chunk of chunksOf(body)) {
          total += chunk.byteLength;
          if (options.contentLength !== undefined && total > options.contentLength) break;
          let off = 0;
          while (off < chunk.byteLength) {
            const { bytesWritten } = await handle.write(chunk, off, chunk.byteLength - off);
            off += bytesWritten;
          }
        }
        if (options.contentLength !== undefined && total !== options.contentLength) {
          throw new ObjectStoreError(
            'ERR_OBJECTSTORE_REJECTED',
            `put ${quoteKey(key)} on ${this.description}: body length differs from contentLength`,
            { key, storeCode: 'IncompleteBody' },
          );
        }
        // The bytes are in the temp file: the caller's buffer is free during the fsync, which on a
        // busy disk takes longer than writing them.
        options.onBodyWritten?.();
        await handle.sync();
        await handle.close();
        handle = undefined;
        const target = join(dir, name);
        if (options.ifNoneMatch === '*') {
          try {
            await link(tmp, target);
          } catch (err) {
            if (errnoOf(err) === 'EEXIST') {
              throw new ObjectStoreError(
                'ERR_OBJECTSTORE_PRECONDITION_FAILED',
                `put ${quoteKey(key)} on ${this.description}: the object already exists`,
                { key, storeCode: 'PreconditionFailed' },
              );
            }
            throw err;
          }
          committed = true;
          await unlink(tmp);
        } else {
          await rename(tmp, target);
          committed = true;
        }
        await fsyncDir(dir);
        return {};
      } finally {
        if (handle !== undefined) await handle.close().catch(() => {});
        if (!committed) await unlink(tmp).catch(() => {});
      }
    } catch (err) {
      // The caller's own body error comes back unchanged; everything else is typed.
      if (err instanceof SourceError) throw err.original;
      throw this.#fail(err, op, key);
    }
  }

  /** Opens a key for reading; returns the handle and its size. */
  async #openRead(key: string, op: string): Promise<{ handle: FileHandle; size: number; mtime: Date }> {
    const p = this.#pathOf(key, op);
    let handle: FileHandle;
    try {
      const real = await this.#resolveExisting(p, op, key);
      handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') {
        // Answer "outside the root" rather than "not found" for a path through a symlink that
        // leads out, so the store is no oracle for what exists elsewhere.
        await this.#checkAncestors(p, op, key);
        throw this.#fail({ code: 'ENOENT' }, op, key);
      }
      throw this.#fail(err, op, key);
    }
    try {
      const st = await handle.stat();
      if (!st.isFile()) throw this.#fail({ code: 'ENOENT' }, op, key);
      return { handle, size: st.size, mtime: st.mtime };
    } catch (err) {
      await handle.close().catch(() => {});
      throw this.#fail(err, op, key);
    }
  }

  #span(key: string, size: number, range: ByteRange | undefined): { start: number; length: number } {
    if (range === undefined) return { start: 0, length: size };
    if (range.start >= size) {
      throw new ObjectStoreError(
        'ERR_OBJECTSTORE_REJECTED',
        `get ${quoteKey(key)} on ${this.description}: range starts past the end of the object`,
        { key, storeCode: 'InvalidRange', status: 416 },
      );
    }
    const end = Math.min(range.end ?? size - 1, size - 1);
    return { start: range.start, length: end - range.start + 1 };
  }

  async get(key: string, range?: ByteRange, options?: GetOptions): Promise<Uint8Array> {
    checkRange(range, key, this.description);
    checkMaxBytes(options?.maxBytes, key);
    const { handle, size } = await this.#openRead(key, 'get');
    try {
      const { start, length } = this.#span(key, size, range);
      if (options?.maxBytes !== undefined && length > options.maxBytes)
        throw tooLarge(key, this.description, length, options.maxBytes);
      const into = options?.into;
      // The caller's buffer when the bytes fit: a fresh multi-MiB buffer per object costs a page
      // fault per 4 KiB on first touch and lingers in RSS until the garbage collector runs.
      const out =
        into !== undefined && into.byteLength >= length
          ? Buffer.from(into.buffer, into.byteOffset, length)
          : Buffer.allocUnsafe(length);
      let off = 0;
      while (off < length) {
        const { bytesRead } = await handle.read(out, off, length - off, start + off);
        if (bytesRead === 0) break;
        off += bytesRead;
      }
      // The file shrank under us (it was replaced by rename, so this handle is the old file).
      return off === length ? out : out.subarray(0, off);
    } catch (err) {
      throw this.#fail(err, 'get', key);
    } finally {
      await handle.close().catch(() => {});
    }
  }

  async getStream(key: string, range?: ByteRange): Promise<AsyncIterable<Uint8Array>> {
    checkRange(range, key, this.description);
    const { handle, size } = await this.#openRead(key, 'get');
    let span: { start: number; length: number };
    try {
      span = this.#span(key, size, range);
    } catch (err) {
      await handle.close().catch(() => {});
      throw err;
    }
    const fail = (err: unknown) => this.#fail(err, 'get', key);
    return (async function* () {
      if (span.length === 0) {
        await handle.close().catch(() => {});
        return;
      }
      const stream = createReadStream('', {
        fd: handle,
        start: span.start,
        end: span.start + span.length - 1,
        highWaterMark: READ_CHUNK,
        autoClose: true,
      });
      try {
        for await (const chunk of stream) yield chunk as Uint8Array;
      } catch (err) {
        throw fail(err);
      } finally {
        stream.destroy();
      }
    })();
  }

  async head(key: string): Promise<ObjectInfo | null> {
    try {
      const { handle, size, mtime } = await this.#openRead(key, 'head');
      await handle.close().catch(() => {});
      return { key, size, lastModified: mtime };
    } catch (err) {
      if (err instanceof ObjectStoreError && err.code === 'ERR_OBJECTSTORE_NOT_FOUND') return null;
      throw err;
    }
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    validatePrefix(prefix, this.description);
    const limit = listLimit(options.limit, this.description);
    const cursor = options.cursor === undefined ? undefined : decodeCursor(options.cursor, this.description);
    if (cursor !== undefined && cursor.kind !== 'k') {
      throw new ObjectStoreError('ERR_OBJECTSTORE_INVALID_KEY', `foreign list cursor on ${this.description}`);
    }
    const startAfter = cursor?.value;
    const cut = prefix.lastIndexOf('/') + 1;
    const baseRel = prefix.slice(0, cut);
    const namePrefix = prefix.slice(cut);
    let baseDir: string;
    try {
      const realRoot = await this.#realRootPath();
      const real = await realpath(join(this.#root, ...baseRel.split('/').filter(Boolean)));
      if (!this.#inside(realRoot, real)) throw this.#outside('list', prefix);
      baseDir = real;
    } catch (err) {
      if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return { objects: [] };
      throw this.#fail(err, 'list', prefix);
    }
    const objects: ObjectInfo[] = [];
    try {
      for await (const info of walk(baseDir, baseRel, namePrefix, startAfter)) {
        if (objects.length === limit) {
          return { objects, cursor: encodeCursor('k', objects[objects.length - 1]!.key) };
        }
        objects.push(info);
      }
    } catch (err) {
      throw this.#fail(err, 'list', prefix);
    }
    return { objects };
  }

  listAll(prefix: string): AsyncIterable<ObjectInfo> {
    return listAllPages((p, o) => this.list(p, o), prefix);
  }

  async delete(key: string): Promise<void> {
    const p = this.#pathOf(key, 'delete');
    try {
      let dir: string;
      try {
        // The parent is the root itself when the key has one segment.
        dir = await this.#resolveExisting(dirname(p), 'delete', key, dirname(p) === this.#root);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return;
        throw err;
      }
      const target = join(dir, key.slice(key.lastIndexOf('/') + 1));
      let st: Awaited<ReturnType<typeof lstat>>;
      try {
        st = await lstat(target);
      } catch (err) {
        if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return;
        throw err;
      }
      if (st.isDirectory()) return; // a "directory" is not an object
      try {
        await unlink(target);
      } catch (err) {
        // Deleted meanwhile by a concurrent delete of the same key: as S3, that is success.
        if (errnoOf(err) === 'ENOENT') return;
        throw err;
      }
      // Prune now-empty parents so listings stay fast; stop at the first non-empty one.
      const realRoot = await this.#realRootPath();
      let current = dir;
      while (current !== realRoot && this.#inside(realRoot, current)) {
        try {
          await rmdir(current);
        } catch (err) {
          // Gone already: a concurrent delete in the same directory pruned it (its parent may be
          // empty now as well). Anything else (not empty) ends the pruning.
          if (errnoOf(err) !== 'ENOENT') break;
        }
        current = dirname(current);
      }
      await fsyncDir(current).catch((err: unknown) => {
        // Pruned by a concurrent delete after this one stopped: nothing left to make durable.
        if (errnoOf(err) !== 'ENOENT') throw err;
      });
    } catch (err) {
      throw this.#fail(err, 'delete', key);
    }
  }
}

/** Fsyncs a directory so a rename or new entry in it survives a crash. */
async function fsyncDir(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    await handle.sync();
  } catch (err) {
    // Some filesystems refuse fsync on directories; durability there is the filesystem's choice.
    if (errnoOf(err) !== 'EINVAL' && errnoOf(err) !== 'ENOTSUP') throw err;
  } finally {
    await handle?.close().catch(() => {});
  }
}

/**
 * Walks `absDir` (whose key prefix is `relDir`) depth-first in UTF-8 byte order of the full keys,
 * yielding regular files whose key is greater than `startAfter`. Subtrees entirely before
 * `startAfter` are skipped without reading them. Directories sort as "name/" so "a/b" and "a-c"
 * come out in true key order. Symlinks and names that are not valid key segments (temp files) are
 * never listed.
 */
async function* walk(
  absDir: string,
  relDir: string,
  namePrefix: string,
  startAfter: string | undefined,
): AsyncGenerator<ObjectInfo> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(absDir, { withFileTypes: true });
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return;
    throw err;
  }
  const items: { name: string; sortKey: string; dir: boolean }[] = [];
  for (const e of entries) {
    const name = e.name;
    if (!name.startsWith(namePrefix)) continue;
    const dir = e.isDirectory();
    if (!dir && !e.isFile()) continue;
    if (keyProblem(name) !== null) continue;
    items.push({ name, dir, sortKey: dir ? `${name}/` : name });
  }
  items.sort((a, b) => compareKeys(a.sortKey, b.sortKey));
  for (const item of items) {
    const full = relDir + item.sortKey;
    if (item.dir) {
      if (startAfter !== undefined && compareKeys(full, startAfter) < 0 && !startAfter.startsWith(full))
        continue;
      yield* walk(join(absDir, item.name), full, '', startAfter);
    } else {
      if (startAfter !== undefined && compareKeys(full, startAfter) <= 0) continue;
      if (keyProblem(full) !== null) continue;
      try {
        const st = await lstat(join(absDir, item.name));
        if (st.isFile()) yield { key: full, size: st.size, lastModified: st.mtime };
      } catch (err) {
        if (errnoOf(err) !== 'ENOENT') throw err;
      }
    }
  }
}
