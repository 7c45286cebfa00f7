/**
 * `@coffer/sources/files-writer`: the one write path into a directory target. The `files`
 * connector's restore writes, `@coffer/restore`'s plan checks and resume clean-up, and
 * `coffer-recover extract` all go through it. This module imports only Node built-ins (and the
 * package's own error class), so the offline recovery bundle can carry it without the other
 * connectors' drivers.
 *
 * What it guarantees: a record name is checked as a relative name first (`fileNameProblem`: no
 * `..`, `.` or empty segment, not absolute, no NUL, segments at most 255 bytes); every parent directory is created one
 * component at a time and refused when it is a symbolic link or not a directory; the bytes go to a
 * temporary file created with O_EXCL | O_NOFOLLOW (mode 0600) beside the target, which is checked
 * to really lie inside the root (the kernel's own path of the open file, /proc/self/fd) before a
 * byte is written, then get their permission bits and mtime and are put in place: by default with
 * rename(2), which replaces a file or a symbolic link at the final name and never writes through
 * it; with `replace: false` with link(2), which refuses an existing name (a file, a link, a dangling
 * link, a directory) atomically, so there is no check-then-write race (ERR_SOURCE_TARGET_EXISTS).
 * A directory at the final name is never replaced (the kernel refuses; ERR_SOURCE_WRITE, EISDIR).
 * A body stream that throws (for example a reader whose SHA-384 check failed at the end) leaves
 * nothing under the name and no temporary file: a record is never seen half-written or unverified.
 * Files are not fsync'ed one by one (neither does `restic restore`); the caller syncs when it needs to.
 *
 * A body already in memory (the caller verified it before the call) to a name where nothing is
 * takes a shorter path: the file is created at its final name itself with O_EXCL | O_NOFOLLOW and
 * mode 000, checked in place the same way, written, given its mtime and, last, its permission
 * bits. That is one directory operation instead of three (create, link or rename, unlink of the
 * temporary name), and in an extract of 20,028 small files those operations, not the bytes, were
 * most of the kernel's time (profiled: link and unlink 5.9 s, the creates 3.9 s). O_EXCL
 * refuses anything at the name as link(2) did; then `replace: false` is TARGET_EXISTS and
 * `replace: true` goes the temporary-file way. The cost: until its mode is set a file being
 * written is visible under its name with mode 000 (nobody but root can read it), and a crash
 * leaves it so. `removeCutWrites` with `since` removes such a file of a record still to write.
 *
 * Temporary names are `.<first 200 characters of the base name>.coffer-<12 hex>.tmp` beside the
 * target; `removeCutWrites` is the only other code that knows this naming.
 *
 * Why most calls are synchronous: each async fs call is a hand-off to the libuv thread pool and
 * back (~50-100 us of futex traffic), while most calls take a few microseconds on a local disk. A
 * restore of 20,000 small files made ~10 such hand-offs per file, and the hand-offs, not the disk,
 * bounded its throughput. So the checks, a body's write (in memory and at most SYNC_MAX bytes),
 * fchmod, futimes and close are direct *Sync calls. Creating the temporary file and renaming it
 * take the parent directory's lock and usually take tens of microseconds, but creating an inode
 * can cost far more: ext4 without a journal skips every recently deleted inode, one lookup each,
 * ~0.1-1 ms of kernel CPU per create right after a big tree was removed. So they are synchronous
 * while creates are quick, and once one took longer than SLOW_CREATE_MS the next POOLED_WRITES
 * creates and renames go through the thread pool: there they run while the event loop goes on
 * (the caller's next records get read and verified) and, for different directories, in
 * parallel on several cores; then a synchronous create measures again. Bigger or
 * streamed bodies write their bytes through the pool too.
 *
 * Why parent directories are cached: the lstat walk of every parent of every file (and the mkdir
 * attempts) were most of the remaining system calls. A directory this writer created or checked
 * with a full walk is remembered with its device and inode numbers; a later record in it makes one
 * lstat of that directory instead of the walk, and any difference (gone, a link now, another
 * inode: an ancestor was swapped for a link to another tree) drops the cache and walks again, so
 * nothing is created through a link that was there before the write began. Neither the walk nor
 * that lstat stops a swap racing with the write itself; the check on the opened temporary file
 * does, and with the cache it demands the EXACT path the file must have (real root + checked
 * parents + temporary name), so a parent swapped for a link anywhere, inside the root or out,
 * changes the kernel's path and is caught (the empty temporary is removed, nothing is written);
 * on a mismatch the cache is dropped and the full walk decides, as without a cache. Where
 * /proc/self/fd is unavailable the cache is not used (every write walks its parents; the opened
 * file is then checked through the realpath of its directory).
 */
import { randomFillSync } from 'node:crypto';
import type { Dirent } from 'node:fs';
import {
  closeSync,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  futimesSync,
  link as linkCallback,
  lstatSync,
  mkdirSync,
  open as openCallback,
  openSync,
  readlinkSync,
  realpathSync,
  rename as renameCallback,
  renameSync,
  unlinkSync,
  write as writeCallback,
  writeSync,
} from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { isSourceError, quoteName, SourceError } from './errors.ts';
import { CREATE_FLAGS, fileNameProblem, fileNameProblemText } from './internal/fs-safety.ts';
import type { RecordBody, WriteResult } from './types.ts';

export { type FileNameProblem, fileNameProblem, fileNameProblemText } from './internal/fs-safety.ts';
export type { RecordBody, WriteResult } from './types.ts';

/** Bodies in memory up to this size are written with synchronous calls only. */
export const SYNC_MAX = 1024 * 1024;
/** A synchronous create slower than this sends the next POOLED_WRITES creates to the thread pool. */
const SLOW_CREATE_MS = 0.25;
const POOLED_WRITES = 256;
/** Directories remembered as checked, at most (the set is emptied when it would grow past it). */
const CACHE_MAX = 65_536;

/** The mode of a file created at its final name until its bytes are in (see `#writeDirect`). */
const CUT_MODE = 0o000;
/** Characters of the base name kept in a temporary name (the rest of the name is in the record). */
const TMP_BASE_MAX = 200;
/** A temporary name of `write` (`.<base>.coffer-<hex>.tmp`). */
const CUT_WRITE = /^\.(.+)\.coffer-[0-9a-f]{12}\.tmp$/;

/** What a parent directory of a name is when it cannot be written through. */
export type ParentProblem = { kind: 'symlink' | 'not-directory'; at: string };

/** What is at a name in a target (a symbolic link is `link`, whatever it points to). */
export type TargetEntry = 'absent' | 'file' | 'directory' | 'link' | 'other';

export interface FilesWriteOptions {
  /**
   * Replace what is at the name (default true: a file or a link is replaced, never written
   * through). False: an existing name of any kind is ERR_SOURCE_TARGET_EXISTS, decided atomically
   * by link(2) (a filesystem without hard links falls back to a check and rename).
   */
  replace?: boolean;
}

/** Carries an error thrown by the caller's body stream through our own error mapping. */
class BodyError {
  readonly inner: unknown;
  constructor(inner: unknown) {
    this.inner = inner;
  }
}

function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

let procFd: boolean | undefined;

/** The kernel's path of an open descriptor, or null where /proc/self/fd is unavailable. */
function fdPath(fd: number): string | null {
  if (procFd === false) return null;
  try {
    const p = readlinkSync(`/proc/self/fd/${fd}`);
    procFd = true;
    return p;
  } catch {
    procFd = false;
    return null;
  }
}

function openAsync(path: string, mode: number): Promise<number> {
  return new Promise((resolve, reject) => {
    openCallback(path, CREATE_FLAGS, mode, (err, fd) => (err ? reject(err) : resolve(fd)));
  });
}

function linkAsync(from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    linkCallback(from, to, (err) => (err ? reject(err) : resolve()));
  });
}

/** Errors of link(2) that mean "no hard links here", not "the name exists". */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EMLINK', 'EXDEV', 'ENOSYS']);

function renameAsync(from: string, to: string): Promise<void> {
  return new Promise((resolve, reject) => {
    renameCallback(from, to, (err) => (err ? reject(err) : resolve()));
  });
}

function writeAsync(fd: number, buf: Uint8Array, offset: number, length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    writeCallback(fd, buf, offset, length, null, (err, n) => (err ? reject(err) : resolve(n)));
  });
}

async function writeAllAsync(fd: number, buf: Uint8Array): Promise<void> {
  for (let at = 0; at < buf.byteLength; ) at += await writeAsync(fd, buf, at, buf.byteLength - at);
}

function writeAllSync(fd: number, buf: Uint8Array): void {
  for (let at = 0; at < buf.byteLength; ) at += writeSync(fd, buf, at, buf.byteLength - at);
}

/**
 * Removes a file this writer created as `fd` (a direct write that failed), without ever removing
 * anything else. Its bytes go first (truncated), then its name: the one the kernel reports for the
 * open file (where it really is, even if a parent was swapped for a link since the create), and
 * only while that name is still this inode. `abs` stands in where /proc/self/fd is unavailable.
 * Unlinking `abs` blindly would not do: after a parent swap it names another directory's file of
 * the same name (the record's name, known to whoever swapped it). A swap racing between the
 * inode check and unlink(2) is the one window left; it needs write access to the target.
 */
function discardCreated(fd: number, abs: string, inode: Inode): void {
  try {
    ftruncateSync(fd, 0);
  } catch {}
  removeIfInode(fdPath(fd) ?? abs, inode);
}

type Inode = { dev: number; ino: number };

/** unlink(2) `path` if it is still the regular file `inode`, else leave whatever is there. */
function removeIfInode(path: string, inode: Inode): void {
  try {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st?.isFile() && st.dev === inode.dev && st.ino === inode.ino) unlinkSync(path);
  } catch {}
}

/** Random hex for temporary names, drawn 64 names at a time (one getrandom per 64 files). */
class TmpNames {
  #pool = Buffer.alloc(6 * 64);
  #at = this.#pool.length;
  next(): string {
    if (this.#at === this.#pool.length) {
      randomFillSync(this.#pool);
      this.#at = 0;
    }
    const hex = this.#pool.toString('hex', this.#at, this.#at + 6);
    this.#at += 6;
    return hex;
  }
}

/**
 * Writes records into directory targets. One instance per target (its cache of checked parent
 * directories is its own); `description` starts every error message (`files:/srv/restore`).
 */
export class FilesWriter {
  readonly #description: string;
  /**
   * Parent directories (relative, '/'-separated) created or checked as real directories, with
   * every ancestor, by a full walk: their device and inode numbers then.
   */
  readonly #checked = new Map<string, [number, number]>();
  readonly #names = new TmpNames();
  /** Writes left whose create and rename go through the thread pool (creates were slow). */
  #pooled = 0;

  constructor(description: string) {
    this.#description = description;
  }

  #unsafeParent(name: string, problem: ParentProblem): SourceError {
    if (problem.kind === 'symlink') {
      return new SourceError(
        'ERR_SOURCE_UNSAFE_NAME',
        `${this.#description}: ${quoteName(name)} passes through a symbolic link (${quoteName(problem.at)})`,
        { record: name },
      );
    }
    return new SourceError(
      'ERR_SOURCE_WRITE',
      `${this.#description}: ${quoteName(name)}: ${quoteName(problem.at)} is not a directory`,
      { record: name, sourceCode: 'ENOTDIR' },
    );
  }

  #badName(name: unknown): SourceError | null {
    const problem = fileNameProblem(name);
    if (problem === null) return null;
    return new SourceError(
      'ERR_SOURCE_UNSAFE_NAME',
      `${this.#description}: record name ${fileNameProblemText(problem)}`,
      typeof name === 'string' ? { record: name } : {},
    );
  }

  #exists(name: string): SourceError {
    return new SourceError(
      'ERR_SOURCE_TARGET_EXISTS',
      `${this.#description}: ${quoteName(name)} already exists`,
      {
        record: name,
      },
    );
  }

  #outside(name: string): SourceError {
    return new SourceError(
      'ERR_SOURCE_UNSAFE_NAME',
      `${this.#description}: ${quoteName(name)} would be written outside the root`,
      { record: name },
    );
  }

  /**
   * Checks (and with `create`, makes) the parents of `name` under `realRoot`, one component at a
   * time with lstat. `useCache`: when the immediate parent was checked before, one lstat of it
   * (still a directory, not a link, the same device and inode) stands for the walk; anything else
   * drops the cache and walks. Returns the problem, or null; `missing` (without `create`) when a
   * parent does not exist.
   */
  #parents(
    realRoot: string,
    name: string,
    create: boolean,
    useCache: boolean,
  ): { problem: ParentProblem | null; missing: boolean } {
    const last = name.lastIndexOf('/');
    if (last < 0) return { problem: null, missing: false };
    if (useCache) {
      const known = this.#checked.get(name.slice(0, last));
      if (known !== undefined) {
        const st = lstatSync(join(realRoot, name.slice(0, last)), { throwIfNoEntry: false });
        if (st?.isDirectory() && st.dev === known[0] && st.ino === known[1])
          return { problem: null, missing: false };
        this.#checked.clear();
      }
    }
    let end = name.indexOf('/');
    for (;;) {
      const rel = name.slice(0, end);
      const abs = join(realRoot, rel);
      let st = lstatSync(abs, { throwIfNoEntry: false });
      if (st === undefined) {
        if (!create) return { problem: null, missing: true };
        try {
          mkdirSync(abs, { mode: 0o755 });
        } catch (err) {
          if (errnoOf(err) !== 'EEXIST') throw err;
        }
        // Whatever is there now (ours, or another writer's that won the race) is judged below.
        st = lstatSync(abs, { throwIfNoEntry: false });
        if (st === undefined) throw Object.assign(new Error('parent vanished'), { code: 'ENOENT' });
      }
      if (st.isSymbolicLink()) return { problem: { kind: 'symlink', at: rel }, missing: false };
      if (!st.isDirectory()) return { problem: { kind: 'not-directory', at: rel }, missing: false };
      if (useCache) {
        if (this.#checked.size >= CACHE_MAX) this.#checked.clear();
        this.#checked.set(rel, [st.dev, st.ino]);
      }
      if (end === last) return { problem: null, missing: false };
      end = name.indexOf('/', end + 1);
    }
  }

  /**
   * Whether the temporary file open as `fd` lies where it must. With the cache in use the kernel's
   * path must be exactly `tmp`; otherwise (or on a mismatch, after dropping the cache and walking
   * the parents again) inside the root is enough, as it was before the cache existed.
   */
  #placed(fd: number, tmp: string, realRoot: string, name: string): void {
    const at = fdPath(fd);
    if (at === tmp) return;
    const inside = (p: string) =>
      p === realRoot || p.startsWith(realRoot.endsWith(sep) ? realRoot : realRoot + sep);
    if (at !== null) {
      this.#checked.clear();
      const { problem } = this.#parents(realRoot, name, false, false);
      if (problem !== null) throw this.#unsafeParent(name, problem);
      if (!inside(at)) throw this.#outside(name);
      return;
    }
    let dir: string;
    try {
      dir = realpathSync(dirname(tmp));
    } catch {
      throw this.#outside(name);
    }
    if (!inside(dir)) throw this.#outside(name);
  }

  /**
   * Writes `body` as record `name` under `realRoot` (the real path of an existing directory: the
   * caller made it and resolved it). Metadata: `mode` (permission bits; default 0644) and
   * `mtimeMs`. Throws UNSAFE_NAME (a bad name, through a symbolic link, or outside the root),
   * TARGET_EXISTS (`replace: false` and the name exists), WRITE (a parent is not a directory, a
   * directory is at the name, or the filesystem refused), or the body stream's own error unchanged.
   */
  async write(
    realRoot: string,
    name: string,
    body: RecordBody,
    metadata: Record<string, unknown> = {},
    options: FilesWriteOptions = {},
  ): Promise<WriteResult> {
    const bad = this.#badName(name);
    if (bad !== null) throw bad;
    const replace = options.replace !== false;
    const abs = join(realRoot, name);
    const slash = name.lastIndexOf('/');
    const base = name.slice(slash + 1);
    const mode =
      typeof metadata.mode === 'number' && Number.isInteger(metadata.mode) ? metadata.mode & 0o777 : 0o644;
    const mtimeMs =
      typeof metadata.mtimeMs === 'number' && Number.isFinite(metadata.mtimeMs)
        ? metadata.mtimeMs
        : undefined;
    const inMemory = body instanceof Uint8Array;
    let tmp: string | undefined;
    let fd: number | undefined;
    try {
      const { problem } = this.#parents(realRoot, name, true, procFd !== false);
      if (problem !== null) throw this.#unsafeParent(name, problem);
      if (inMemory) {
        // A fresh name takes the direct path: one create instead of create, link and unlink.
        const direct = await this.#writeDirect(realRoot, name, abs, body, mode, mtimeMs);
        if (direct === 'written') return { written: true };
        if (!replace) throw this.#exists(name);
      }
      tmp = join(
        realRoot,
        name.slice(0, slash + 1),
        `.${base.slice(0, TMP_BASE_MAX)}.coffer-${this.#names.next()}.tmp`,
      );
      // Create and rename synchronously while creates are quick; through the thread pool for a
      // while once one was slow (see the module comment).
      const pooled = this.#pooled > 0;
      fd = await this.#create(tmp, 0o600);
      this.#placed(fd, tmp, realRoot, name);
      if (inMemory && body.byteLength <= SYNC_MAX) writeAllSync(fd, body);
      else if (inMemory) await writeAllAsync(fd, body);
      else {
        const it = (body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
        for (;;) {
          let next: IteratorResult<Uint8Array>;
          try {
            next = await it.next();
          } catch (err) {
            throw new BodyError(err); // the caller's own stream failed: hand its error back unchanged
          }
          if (next.done === true) break;
          if (next.value.byteLength <= SYNC_MAX) writeAllSync(fd, next.value);
          else await writeAllAsync(fd, next.value);
        }
      }
      fchmodSync(fd, mode);
      if (mtimeMs !== undefined) futimesSync(fd, Date.now() / 1000, mtimeMs / 1000);
      const open = fd;
      fd = undefined;
      closeSync(open);
      if (replace) {
        // rename never follows a link at the destination: an existing link is replaced, not written through.
        if (pooled) await renameAsync(tmp, abs);
        else renameSync(tmp, abs);
        tmp = undefined;
      } else await this.#placeNew(tmp, abs, name); // the temporary name goes in the finally block
      return { written: true };
    } catch (err) {
      if (err instanceof BodyError) throw err.inner;
      if (isSourceError(err)) throw err;
      const code = errnoOf(err);
      throw new SourceError(
        'ERR_SOURCE_WRITE',
        `${this.#description}: write ${quoteName(name)} failed (${code ?? 'error'})`,
        { record: name, ...(code === undefined ? {} : { sourceCode: code }) },
      );
    } finally {
      if (fd !== undefined) {
        try {
          closeSync(fd);
        } catch {}
      }
      if (tmp !== undefined) {
        try {
          unlinkSync(tmp);
        } catch {}
      }
    }
  }

  /**
   * Writes an in-memory body straight to its final name, created with O_EXCL | O_NOFOLLOW and mode
   * 000: 'exists' when anything is at the name (the caller refuses or replaces through a temporary
   * file). While the bytes go in the file has no permission bits, and they are set last (after
   * the mtime), so a file with mode 000 is one still being written or cut by a crash:
   * `removeCutWrites` with `since` removes such a file of a record not yet written. Any failure
   * after the create removes the file again (`discardCreated`: by inode, never by name alone):
   * nothing is left under the name.
   */
  async #writeDirect(
    realRoot: string,
    name: string,
    abs: string,
    body: Uint8Array,
    mode: number,
    mtimeMs: number | undefined,
  ): Promise<'written' | 'exists'> {
    let fd: number;
    try {
      fd = await this.#create(abs, CUT_MODE);
    } catch (err) {
      if (errnoOf(err) === 'EEXIST') return 'exists';
      throw err;
    }
    let mine: Inode;
    try {
      mine = fstatSync(fd);
    } catch (err) {
      try {
        closeSync(fd);
      } catch {}
      throw err;
    }
    try {
      this.#placed(fd, abs, realRoot, name);
      if (body.byteLength <= SYNC_MAX) writeAllSync(fd, body);
      else await writeAllAsync(fd, body);
      if (mtimeMs !== undefined) futimesSync(fd, Date.now() / 1000, mtimeMs / 1000);
      fchmodSync(fd, mode);
    } catch (err) {
      discardCreated(fd, abs, mine);
      try {
        closeSync(fd);
      } catch {}
      throw err;
    }
    try {
      closeSync(fd);
    } catch (err) {
      // The descriptor is gone (its kernel path with it): only the name-and-inode check is left.
      removeIfInode(abs, mine);
      throw err;
    }
    return 'written';
  }

  /** Creates `path` (CREATE_FLAGS): synchronously while creates are quick, else through the pool. */
  async #create(path: string, mode: number): Promise<number> {
    if (this.#pooled > 0) {
      this.#pooled--;
      return openAsync(path, mode);
    }
    const t0 = performance.now();
    const fd = openSync(path, CREATE_FLAGS, mode);
    if (performance.now() - t0 > SLOW_CREATE_MS) this.#pooled = POOLED_WRITES;
    return fd;
  }

  /** link(2) the temporary file to `abs` (refusing an existing name), for `replace: false`. */
  async #placeNew(tmp: string, abs: string, name: string): Promise<void> {
    try {
      await linkAsync(tmp, abs);
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'EEXIST') throw this.#exists(name);
      if (!NO_LINKS.has(code ?? '')) throw err;
      // No hard links on this filesystem: check, then rename (a narrow race, as `tar -k`).
      if (lstatSync(abs, { throwIfNoEntry: false }) !== undefined) throw this.#exists(name);
      await renameAsync(tmp, abs);
    }
  }

  /**
   * What is at record `name` under `root` (a link counts as `link`, never followed). Never uses
   * the cache: every parent is looked at now. Throws UNSAFE_NAME for a bad name or a symbolic link
   * among the parents, WRITE when a parent is not a directory, READ when the filesystem refused.
   */
  entryAt(root: string, name: string): TargetEntry {
    const bad = this.#badName(name);
    if (bad !== null) throw bad;
    try {
      const { problem, missing } = this.#parents(root, name, false, false);
      if (problem !== null) throw this.#unsafeParent(name, problem);
      if (missing) return 'absent';
      const st = lstatSync(join(root, name), { throwIfNoEntry: false });
      if (st === undefined) return 'absent';
      if (st.isSymbolicLink()) return 'link';
      if (st.isDirectory()) return 'directory';
      return st.isFile() ? 'file' : 'other';
    } catch (err) {
      if (isSourceError(err)) throw err;
      const code = errnoOf(err);
      if (code === 'ENOENT' || code === 'ENOTDIR') return 'absent';
      throw new SourceError(
        'ERR_SOURCE_READ',
        `${this.#description}: check ${quoteName(name)} failed (${code ?? 'error'})`,
        { record: name, ...(code === undefined ? {} : { sourceCode: code }) },
      );
    }
  }

  /** Whether anything is at record `name` under `root` (see `entryAt`, whose errors it throws). */
  exists(root: string, name: string): boolean {
    return this.entryAt(root, name) !== 'absent';
  }

  /**
   * Why a write of `name` under `root` would be refused because of a parent directory already
   * there (a symbolic link, or not a directory), or null. Missing parents are fine (a write
   * creates them). For plans made before any write: uses the cache of checked directories.
   */
  parentProblem(root: string, name: string): ParentProblem | null {
    try {
      return this.#parents(root, name, false, procFd !== false).problem;
    } catch {
      return null; // unreadable: the write itself will report it
    }
  }
}

export interface RemoveCutWritesOptions {
  /**
   * When the interrupted writes began (ms since the epoch). Given, a regular file at the name of
   * one of the records with mode 000 whose inode changed since then is one cut while written
   * straight to its name (see `FilesWriter`), and is removed too. Pass only records not written
   * yet: a record whose own mode is 000 and that was written since then would be removed as well.
   */
  since?: number;
}

/**
 * Resuming writes into `root` after a crash: removes the temporary files `write` left for the
 * records `names` (only a regular file named as `write` names the temporary of one of these
 * records, in that record's directory; never anything else) and, with `since`, the records' own
 * names where a direct write was cut (mode 000, changed since `since`). Errors are ignored (best
 * effort).
 */
export async function removeCutWrites(
  root: string,
  names: readonly string[],
  options: RemoveCutWritesOptions = {},
): Promise<void> {
  const { since } = options;
  const byDir = new Map<string, Set<string>>();
  /** With `since`: the base names of the records, by directory, to look at for a cut direct write. */
  const direct = new Map<string, string[]>();
  for (const n of names) {
    const slash = n.lastIndexOf('/');
    const dir = slash < 0 ? '' : n.slice(0, slash);
    const set = byDir.get(dir) ?? new Set<string>();
    byDir.set(dir, set);
    set.add(n.slice(slash + 1).slice(0, TMP_BASE_MAX));
    if (since !== undefined && fileNameProblem(n) === null) {
      const list = direct.get(dir) ?? [];
      direct.set(dir, list);
      list.push(n.slice(slash + 1));
    }
  }
  if (direct.size > 0) {
    let realRoot: string;
    try {
      realRoot = realpathSync(root);
    } catch {
      realRoot = '';
    }
    for (const [dir, bases] of realRoot === '' ? [] : direct) {
      try {
        // Only inside the root: a directory reached through a link is left alone.
        if (realpathSync(join(realRoot, dir)) !== join(realRoot, dir)) continue;
        for (const base of bases) {
          const path = join(realRoot, dir, base);
          const st = lstatSync(path, { throwIfNoEntry: false });
          if (st?.isFile() && (st.mode & 0o7777) === CUT_MODE && st.ctimeMs >= since!) unlinkSync(path);
        }
      } catch {}
    }
  }
  for (const [dir, bases] of byDir) {
    let entries: Dirent[];
    try {
      entries = await readdir(join(root, dir), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      const m = CUT_WRITE.exec(e.name);
      if (m && e.isFile() && bases.has(m[1]!))
        await rm(join(root, dir, e.name), { force: true }).catch(() => {});
    }
  }
}
