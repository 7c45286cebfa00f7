/**
 * The `files` connector: the regular files of a directory tree.
 *
 * - Records are the regular files under `root`, named by their '/'-separated path relative to it,
 *   listed in UTF-8 byte order (see internal/walk.ts). Metadata: `mode` (permission bits), `mtimeMs`,
 *   `uid`, `gid`. Symbolic links, sockets, FIFOs and devices are reported as skipped and never
 *   followed; empty directories are not records.
 * - Reads open the file with O_NOFOLLOW (a file replaced by a link since the listing is skipped)
 *   and check that the opened file still lies inside the root (a parent directory replaced by a
 *   link is caught). A file gone since the listing is ERR_SOURCE_RECORD_VANISHED (a warning).
 * - Writes (restore) refuse names that could leave the root (`..`, absolute, or through an existing
 *   symbolic link), create parent directories, write to a temporary file beside the target and
 *   rename it into place (readers see the old or the new file, never a part), then set the
 *   permission bits (`mode & 0o777`: setuid/setgid/sticky bits are not restored) and mtime.
 *   Ownership is not restored.
 */
import { closeSync, fstatSync, openSync, read as readCallback, readSync } from 'node:fs';
import { mkdir, realpath, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { isSourceError, quoteName, SourceError } from './errors.ts';
import { FilesWriter } from './files-writer.ts';
import {
  bindingOf,
  clampRange,
  decodeCursor,
  encodeCursor,
  enumeratePages,
  maxRecordBytesOf,
  overCeiling,
  pageSizeOf,
} from './internal/common.ts';
import { fileNameProblem, fileNameProblemText, openedInsideSync, READ_FLAGS } from './internal/fs-safety.ts';
import { type WalkEntry, walkTree } from './internal/walk.ts';
import type {
  EnumerateOptions,
  ListOptions,
  ReadOptions,
  RecordBody,
  SkippedRecord,
  SourceConnector,
  SourcePage,
  SourceRecordInfo,
  WriteResult,
} from './types.ts';

export interface FilesSourceConfig {
  type: 'files';
  /** The directory whose tree is backed up (or restored into; created on the first write). */
  root: string;
  binding?: string;
  /** In-band size ceiling: reading a bigger record throws ERR_SOURCE_RECORD_TOO_LARGE. */
  maxRecordBytes?: number;
  /**
   * Restore writes replace an existing file (default true). False: writing a name that exists is
   * ERR_SOURCE_TARGET_EXISTS, decided atomically (restore's `onExisting: skip`).
   */
  replace?: boolean;
}

const READ_CHUNK = 256 * 1024;
/** Files up to this size are read in one synchronous call (see #openForRead). */
const SMALL_FILE = 64 * 1024;
/** A caller's scratch buffer smaller than this is not worth splitting into two read halves. */
const MIN_SCRATCH = 2 * 64 * 1024;

function readAsync(
  fd: number,
  buf: Uint8Array,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    readCallback(fd, buf, offset, length, position, (err, bytesRead) =>
      err ? reject(err) : resolvePromise(bytesRead),
    );
  });
}

/** Reads up to `size` bytes from `position` into `buf` synchronously; returns the count (less when the file shrank). */
function readSyncInto(fd: number, buf: Uint8Array, size: number, position: number): number {
  let got = 0;
  while (got < size) {
    const n = readSync(fd, buf, got, size - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/** `readSyncInto` through the thread pool. */
async function readAsyncInto(fd: number, buf: Uint8Array, size: number, position: number): Promise<number> {
  let got = 0;
  while (got < size) {
    const n = await readAsync(fd, buf, got, size - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

/** Reads up to `size` bytes from `position` (fewer when the file shrank). */
function readFully(fd: number, size: number, position: number): Buffer {
  const buf = Buffer.allocUnsafe(size);
  const got = readSyncInto(fd, buf, size, position);
  return got === size ? buf : buf.subarray(0, got);
}

/**
 * The pieces of an open file of `size` bytes read into the caller's `scratch` (ReadOptions): whole
 * when it fits, else alternating between the two halves of `scratch`, the next piece being read
 * while the caller handles the current one (which it released by asking for the next). Closes
 * `fd` at the end, after any read still in flight (a descriptor is never closed under a read).
 */
async function* scratchPieces(
  fd: number,
  size: number,
  scratch: Uint8Array,
  fail: (err: unknown) => unknown,
): AsyncGenerator<Uint8Array> {
  let pending: Promise<number> | null = null;
  try {
    if (size <= scratch.length) {
      const got = await readAsyncInto(fd, scratch, size, 0);
      if (got > 0) yield scratch.subarray(0, got);
      return;
    }
    const half = Math.floor(scratch.length / 2);
    const halves = [scratch.subarray(0, half), scratch.subarray(half, 2 * half)] as const;
    let which = 0;
    let offset = 0;
    pending = readAsyncInto(fd, halves[0], Math.min(half, size), 0);
    while (pending !== null) {
      const got: number = await pending;
      pending = null;
      if (got === 0) return; // shrank since the open
      const piece = halves[which]!.subarray(0, got);
      offset += got;
      which ^= 1;
      // Up to the size seen when opening: a file appended to meanwhile is read as it was then.
      if (offset < size) pending = readAsyncInto(fd, halves[which]!, Math.min(half, size - offset), offset);
      yield piece;
    }
  } catch (err) {
    throw fail(err);
  } finally {
    if (pending !== null) await (pending as Promise<number>).catch(() => 0);
    closeSync(fd);
  }
}

interface Continuation {
  cursor: string;
  walk: AsyncGenerator<WalkEntry>;
  peeked: WalkEntry;
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Opens a `files` connector. No I/O happens until the first call. Throws INVALID_CONFIG. */
export function createFilesSource(config: FilesSourceConfig): SourceConnector {
  return new FilesSource(config);
}

class FilesSource implements SourceConnector {
  readonly type = 'files' as const;
  readonly binding: string;
  readonly namespace: string;
  readonly description: string;
  readonly rangeRead = true;
  readonly #root: string;
  readonly #ceiling: number;
  #realRoot: string | undefined;
  #cont: Continuation | undefined;
  readonly #writer: FilesWriter;
  readonly #replace: boolean;

  constructor(config: FilesSourceConfig) {
    if (typeof config?.root !== 'string' || config.root.length === 0 || config.root.includes('\u0000')) {
      throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'files source: root must be a directory path');
    }
    this.#root = resolve(config.root);
    this.binding = bindingOf(config.binding, 'files');
    this.#ceiling = maxRecordBytesOf(config.maxRecordBytes);
    this.namespace = this.#root;
    this.description = `files:${this.#root}`;
    this.#writer = new FilesWriter(this.description);
    this.#replace = config.replace !== false;
  }

  /** The root's real path; RESOURCE_MISSING when absent, BINDING when not a usable directory. */
  async #real(createMissing = false): Promise<string> {
    if (this.#realRoot !== undefined) return this.#realRoot;
    try {
      if (createMissing) await mkdir(this.#root, { recursive: true, mode: 0o755 });
      const real = await realpath(this.#root);
      const st = await stat(real);
      if (!st.isDirectory()) {
        throw new SourceError('ERR_SOURCE_BINDING', `${this.description}: root is not a directory`, {
          sourceCode: 'ENOTDIR',
        });
      }
      this.#realRoot = real;
      return real;
    } catch (err) {
      if (isSourceError(err)) throw err;
      const code = errnoOf(err);
      if (code === 'ENOENT') {
        throw new SourceError('ERR_SOURCE_RESOURCE_MISSING', `${this.description}: root does not exist`, {
          sourceCode: code,
        });
      }
      throw new SourceError(
        'ERR_SOURCE_BINDING',
        `${this.description}: root is not usable (${code ?? 'error'})`,
        {
          ...(code === undefined ? {} : { sourceCode: code }),
        },
      );
    }
  }

  async list(options: ListOptions = {}): Promise<SourcePage> {
    const pageSize = pageSizeOf(options);
    const root = await this.#real();
    let walk: AsyncGenerator<WalkEntry>;
    let pending: WalkEntry | undefined;
    const cont = this.#cont;
    this.#cont = undefined;
    if (cont !== undefined && options.cursor !== undefined && cont.cursor === options.cursor) {
      // The usual case: the caller asks for the page after the one we just gave; keep walking.
      walk = cont.walk;
      pending = cont.peeked;
    } else {
      if (cont !== undefined) await cont.walk.return(undefined);
      const after =
        options.cursor === undefined ? null : Buffer.from(decodeCursor('files', options.cursor), 'base64url');
      walk = walkTree(root, after);
    }
    const records: SourceRecordInfo[] = [];
    const skipped: SkippedRecord[] = [];
    let last: Buffer | undefined;
    try {
      while (records.length + skipped.length < pageSize) {
        const entry = pending ?? (await walk.next()).value;
        pending = undefined;
        if (entry === undefined) return { records, skipped };
        last = entry.position;
        if (entry.kind === 'skipped') skipped.push({ skipped: true, name: entry.name, reason: entry.reason });
        else records.push(this.#record(entry.name, entry.stats));
      }
      const next = await walk.next();
      if (next.done === true) return { records, skipped };
      const cursor = encodeCursor('files', last!.toString('base64url'));
      this.#cont = { cursor, walk, peeked: next.value };
      return { records, skipped, cursor };
    } catch (err) {
      await walk.return(undefined).catch(() => {});
      throw this.#readError(err, 'list', undefined);
    }
  }

  #record(
    name: string,
    st: {
      size: number;
      mode: number;
      mtimeMs: number;
      ctimeMs: number;
      ino: number;
      uid: number;
      gid: number;
    },
  ) {
    return {
      name,
      size: st.size,
      sourceType: 'files' as const,
      binding: this.binding,
      namespace: this.namespace,
      metadata: { mode: st.mode & 0o7777, mtimeMs: st.mtimeMs, uid: st.uid, gid: st.gid },
      // The change time moves on every write (and cannot be set back by a user as mtime can), and
      // the inode changes when a file is replaced by a rename: both guard an unread reference.
      change: `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`,
    };
  }

  enumerate(options?: EnumerateOptions): AsyncIterable<SourceRecordInfo | SkippedRecord> {
    return enumeratePages((o) => this.list(o), this.description, options);
  }

  #checkName(name: string): void {
    const problem = fileNameProblem(name);
    if (problem !== null) {
      throw new SourceError(
        'ERR_SOURCE_UNSAFE_NAME',
        `${this.description}: record name ${fileNameProblemText(problem)}`,
        {
          ...(typeof name === 'string' ? { record: name } : {}),
        },
      );
    }
  }

  #readError(err: unknown, op: string, name: string | undefined): SourceError {
    if (isSourceError(err)) return err;
    const code = errnoOf(err);
    const where = name === undefined ? '' : ` ${quoteName(name)}`;
    return new SourceError(
      'ERR_SOURCE_READ',
      `${this.description}: ${op}${where} failed (${code ?? 'error'})`,
      {
        ...(name === undefined ? {} : { record: name }),
        ...(code === undefined ? {} : { sourceCode: code }),
      },
    );
  }

  /**
   * Opens a listed file for reading, with every check; returns the descriptor and its size.
   * Synchronous on purpose: open, fstat and the containment check are each a few microseconds on a
   * local disk, while a thread-pool round trip costs ~100 us; for the many small files of a typical
   * tree that latency, not the disk, would bound throughput.
   */
  #openForRead(name: string, root: string): { fd: number; size: number } {
    const abs = join(root, name);
    let fd: number;
    try {
      fd = openSync(abs, READ_FLAGS);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') {
        throw new SourceError(
          'ERR_SOURCE_RECORD_VANISHED',
          `${this.description}: ${quoteName(name)} vanished`,
          {
            record: name,
            sourceCode: code,
          },
        );
      }
      if (code === 'ELOOP') throw this.#skipped(name, 'now a symbolic link (not followed)', code);
      throw this.#readError(err, 'open', name);
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile()) throw this.#skipped(name, 'no longer a regular file', undefined);
      if (!openedInsideSync(fd, abs, root)) {
        throw this.#skipped(
          name,
          'its path now leads out of the source tree (symbolic link in a parent)',
          undefined,
        );
      }
      if (st.size > this.#ceiling) throw overCeiling(name, st.size, this.#ceiling);
      return { fd, size: st.size };
    } catch (err) {
      closeSync(fd);
      throw this.#readError(err, 'stat', name);
    }
  }

  #skipped(name: string, why: string, code: string | undefined): SourceError {
    return new SourceError(
      'ERR_SOURCE_RECORD_SKIPPED',
      `${this.description}: ${quoteName(name)} skipped: ${why}`,
      {
        record: name,
        ...(code === undefined ? {} : { sourceCode: code }),
      },
    );
  }

  async read(name: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    this.#checkName(name);
    const root = this.#realRoot ?? (await this.#real());
    const { fd, size } = this.#openForRead(name, root);
    const scratch = options.buffer;
    if (size <= SMALL_FILE) {
      // One small synchronous read (page cache: microseconds) instead of two thread-pool hops.
      let data: Uint8Array;
      try {
        data =
          scratch !== undefined && size <= scratch.length
            ? scratch.subarray(0, readSyncInto(fd, scratch, size, 0))
            : readFully(fd, size, 0);
      } catch (err) {
        throw this.#readError(err, 'read', name);
      } finally {
        closeSync(fd);
      }
      return (async function* () {
        if (data.length > 0) yield data;
      })();
    }
    if (scratch !== undefined && scratch.length >= MIN_SCRATCH) {
      return scratchPieces(fd, size, scratch, (err) => this.#readError(err, 'read', name));
    }
    const self = this;
    return (async function* () {
      try {
        // Up to the size seen when opening: a file appended to meanwhile is read as it was then,
        // and each buffer is sized to what is left.
        for (let offset = 0; offset < size; ) {
          const want = Math.min(READ_CHUNK, size - offset);
          const buf = Buffer.allocUnsafe(want);
          const bytesRead = await readAsync(fd, buf, 0, want, offset);
          if (bytesRead === 0) return; // shrank since the open
          offset += bytesRead;
          yield bytesRead === want ? buf : buf.subarray(0, bytesRead);
        }
      } catch (err) {
        throw self.#readError(err, 'read', name);
      } finally {
        closeSync(fd);
      }
    })();
  }

  async readInto(name: string, buffer: Uint8Array): Promise<Uint8Array> {
    this.#checkName(name);
    const root = this.#realRoot ?? (await this.#real());
    const { fd, size } = this.#openForRead(name, root);
    try {
      // Up to the size seen when opening (as `read`); a record bigger than `buffer` gets its own memory.
      const target = size <= buffer.length ? buffer : Buffer.allocUnsafe(size);
      const got =
        size <= SMALL_FILE ? readSyncInto(fd, target, size, 0) : await readAsyncInto(fd, target, size, 0);
      return target.subarray(0, got);
    } catch (err) {
      throw this.#readError(err, 'read', name);
    } finally {
      closeSync(fd);
    }
  }

  async readRange(name: string, start: number, endInclusive: number): Promise<Uint8Array> {
    clampRange(start, endInclusive, Number.MAX_SAFE_INTEGER);
    this.#checkName(name);
    const root = await this.#real();
    const { fd, size } = this.#openForRead(name, root);
    try {
      const range = clampRange(start, endInclusive, size);
      if (range === null) return new Uint8Array(0);
      const length = range[1] - range[0] + 1;
      const buf = Buffer.allocUnsafe(length);
      let got = 0;
      while (got < length) {
        const bytesRead = await readAsync(fd, buf, got, length - got, range[0] + got);
        if (bytesRead === 0) break; // shrank since the stat
        got += bytesRead;
      }
      return buf.subarray(0, got);
    } catch (err) {
      throw this.#readError(err, 'read', name);
    } finally {
      closeSync(fd);
    }
  }

  async exists(name: string): Promise<boolean> {
    this.#checkName(name);
    let root: string;
    try {
      root = await this.#real();
    } catch (err) {
      if (isSourceError(err, 'ERR_SOURCE_RESOURCE_MISSING')) return false;
      throw err;
    }
    return this.#writer.exists(root, name);
  }

  /** See files-writer.ts (synchronous for small in-memory bodies, cached parent checks). */
  async write(name: string, body: RecordBody, metadata: Record<string, unknown> = {}): Promise<WriteResult> {
    this.#checkName(name);
    const root = await this.#real(true);
    return this.#writer.write(root, name, body, metadata, { replace: this.#replace });
  }

  async close(): Promise<void> {
    const cont = this.#cont;
    this.#cont = undefined;
    if (cont !== undefined) await cont.walk.return(undefined).catch(() => {});
  }
}
