/**
 * Writes extracted records under a target directory without ever leaving it or clobbering it.
 *
 * Rules (each has a test in test/safe-writer.test.ts):
 *   1. Paths come from recordPath() only (safe-name.ts), so no segment is "..", absolute, empty or
 *      carries a separator.
 *   2. Every directory between the target and the file is checked with lstat as it is walked or
 *      created: a symlink there is refused (ERR_RECOVER_UNSAFE_PATH), whether it points inside or
 *      outside the target, so no write ever goes through one. A file where a directory is needed is
 *      refused (ERR_RECOVER_EXISTS).
 *   3. Bytes go to a temporary file created with O_CREAT|O_EXCL|O_NOFOLLOW beside the final name;
 *      the caller's check (the record's SHA-384) runs before the file is put in place, so a record
 *      that fails verification never appears under its name.
 *   4. Without force, the temporary file is put in place with link(2), which fails if the name
 *      exists (no check-then-write race); with force, rename(2), which replaces a file or a symlink
 *      itself and never writes through it. A directory is never replaced.
 *   5. Just before placing, the parent's real path is compared with the path walked, so a directory
 *      swapped for a symlink during the write is caught.
 * Known limit: another local user who can write the target directory while we extract can still
 * race the checks between 5 and 4 (as with tar); extract into a directory only you can write.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { link, lstat, mkdir, open, realpath, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { RecoverError } from '../errors.ts';
import { fsError } from './translate.ts';

export interface WriteOptions {
  /** Replace an existing file (never a directory, never through a symlink). */
  force: boolean;
}

/** A target directory opened for safe writes. */
export class SafeTarget {
  /** The target's real path (symlinks in the path the operator typed are resolved once, here). */
  readonly root: string;
  readonly force: boolean;

  private constructor(root: string, force: boolean) {
    this.root = root;
    this.force = force;
  }

  /**
   * Opens (creating with mode 0700 when missing) the target directory `dir`. Throws RecoverError
   * when it exists and is not a directory, or cannot be created.
   */
  static async open(dir: string, options: WriteOptions): Promise<SafeTarget> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST' || (e as NodeJS.ErrnoException).code === 'ENOTDIR') {
        throw new RecoverError('ERR_RECOVER_EXISTS', `target ${dir} exists and is not a directory`, {
          object: dir,
        });
      }
      throw fsError(e, dir, 'cannot create target directory');
    }
    let root: string;
    try {
      root = await realpath(dir);
    } catch (e) {
      throw fsError(e, dir, 'cannot resolve target directory');
    }
    return new SafeTarget(root, options.force);
  }

  /** The absolute path `segments` would be written to (nothing is checked or created). */
  pathOf(segments: readonly string[]): string {
    return join(this.root, ...segments);
  }

  /**
   * Checks, without writing, whether `segments` could be written: returns null when free (or
   * replaceable with force), else the RecoverError writing would raise. Used to refuse before the
   * first byte is written. A missing directory on the way counts as free.
   */
  async precheck(segments: readonly string[], label: string): Promise<RecoverError | null> {
    let path = this.root;
    for (let i = 0; i < segments.length; i++) {
      path = join(path, segments[i]!);
      const st = await lstatOrNull(path);
      if (st === null) return null;
      const last = i === segments.length - 1;
      if (st.isSymbolicLink() && !(last && this.force)) return symlinkRefusal(path, label);
      if (!last && !st.isDirectory()) return notADirectory(path, label);
      if (last && st.isDirectory()) return isADirectory(path, label);
      if (last && !this.force) return existsRefusal(path, label);
    }
    return null;
  }

  /**
   * Writes `body` to `segments` under the root. `check` runs after the last byte and before the
   * file is put in place (it gets the temporary file's path, e.g. to set its mode); if it or the
   * body throws, the temporary file is removed and the error re-thrown.
   * `label` names the record in messages. Returns the absolute path written.
   */
  async write(
    segments: readonly string[],
    body: AsyncIterable<Uint8Array>,
    label: string,
    check?: (tmpPath: string) => void | Promise<void>,
  ): Promise<string> {
    if (segments.length === 0) throw new RecoverError('ERR_RECOVER_FAILED', `${label}: empty path`);
    const parent = await this.ensureParents(segments, label);
    const final = join(parent, segments[segments.length - 1]!);
    const existing = await lstatOrNull(final);
    if (existing) {
      if (existing.isDirectory()) throw isADirectory(final, label);
      if (!this.force) throw existsRefusal(final, label);
    }
    const tmp = join(parent, `.coffer-recover-${randomBytes(6).toString('hex')}.tmp`);
    let placed = false;
    try {
      await writeNew(tmp, body);
      if (check) await check(tmp);
      await this.assertParentIs(parent, label);
      if (this.force) {
        await rename(tmp, final);
        placed = true;
      } else {
        await placeNoClobber(tmp, final, label);
        placed = true;
      }
    } finally {
      if (!placed) await unlink(tmp).catch(() => undefined);
    }
    return final;
  }

  /** Walks (creating as needed) every directory above the file; refuses symlinks and files. */
  private async ensureParents(segments: readonly string[], label: string): Promise<string> {
    let path = this.root;
    for (const seg of segments.slice(0, -1)) {
      path = join(path, seg);
      let st = await lstatOrNull(path);
      if (st === null) {
        try {
          await mkdir(path, { mode: 0o755 });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
            throw fsError(e, path, `${label}: cannot create directory`);
        }
        st = await lstatOrNull(path);
      }
      if (st === null)
        throw new RecoverError('ERR_RECOVER_IO', `${label}: directory ${path} vanished`, { object: path });
      if (st.isSymbolicLink()) throw symlinkRefusal(path, label);
      if (!st.isDirectory()) throw notADirectory(path, label);
    }
    return path;
  }

  private async assertParentIs(parent: string, label: string): Promise<void> {
    let real: string;
    try {
      real = await realpath(parent);
    } catch (e) {
      throw fsError(e, parent, `${label}: cannot resolve`);
    }
    if (real !== parent) {
      throw new RecoverError(
        'ERR_RECOVER_UNSAFE_PATH',
        `${label}: directory ${parent} changed into a link during extraction; refusing to write through it`,
        { object: parent },
      );
    }
  }
}

async function lstatOrNull(path: string) {
  try {
    return await lstat(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ENOTDIR') return null;
    throw fsError(e, path, 'cannot inspect');
  }
}

async function writeNew(path: string, body: AsyncIterable<Uint8Array>): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0);
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(path, flags, 0o666);
  } catch (e) {
    throw fsError(e, path, 'cannot create');
  }
  try {
    for await (const chunk of body) {
      let off = 0;
      while (off < chunk.byteLength) {
        const { bytesWritten } = await handle.write(chunk, off, chunk.byteLength - off);
        off += bytesWritten;
      }
    }
    await handle.sync();
  } catch (e) {
    await handle.close().catch(() => undefined);
    throw e;
  }
  await handle.close();
}

/** link(2) refuses an existing name atomically; filesystems without hard links fall back. */
async function placeNoClobber(tmp: string, final: string, label: string): Promise<void> {
  try {
    await link(tmp, final);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw existsRefusal(final, label);
    if (
      code === 'EPERM' ||
      code === 'ENOTSUP' ||
      code === 'EOPNOTSUPP' ||
      code === 'EMLINK' ||
      code === 'EXDEV'
    ) {
      if ((await lstatOrNull(final)) !== null) throw existsRefusal(final, label);
      await rename(tmp, final);
      return;
    }
    throw fsError(e, final, `${label}: cannot place`);
  }
  await unlink(tmp).catch(() => undefined);
}

function existsRefusal(path: string, label: string): RecoverError {
  return new RecoverError(
    'ERR_RECOVER_EXISTS',
    `${label}: ${path} already exists; refusing to overwrite (use --force)`,
    {
      object: path,
    },
  );
}

function isADirectory(path: string, label: string): RecoverError {
  return new RecoverError('ERR_RECOVER_EXISTS', `${label}: ${path} is a directory; refusing to replace it`, {
    object: path,
  });
}

function notADirectory(path: string, label: string): RecoverError {
  return new RecoverError('ERR_RECOVER_EXISTS', `${label}: ${path} exists and is not a directory`, {
    object: path,
  });
}

function symlinkRefusal(path: string, label: string): RecoverError {
  return new RecoverError(
    'ERR_RECOVER_UNSAFE_PATH',
    `${label}: ${path} is a symbolic link inside the target; refusing to follow it`,
    { object: path },
  );
}
