/**
 * The extraction target: a directory that records are written under without ever leaving it or
 * clobbering it. The writing itself is `@coffer/sources/files-writer`, the same writer the engine
 * restores with (one owner of writes into a target); this module opens the directory, maps the
 * writer's refusals onto our error codes and messages, and checks every path before the first byte.
 *
 * What holds (tests in test/target.test.ts; the writer's own in @coffer/sources):
 *   1. Paths come from recordPath() only (safe-name.ts), so no segment is "..", absolute, empty or
 *      carries a separator; the writer refuses such a name anyway.
 *   2. A symbolic link where a directory must be is refused (ERR_RECOVER_UNSAFE_PATH), whether it
 *      points inside or outside the target; a file where a directory must be is refused
 *      (ERR_RECOVER_EXISTS). A parent swapped for a link during the write is caught by the kernel's
 *      own path of the opened temporary file.
 *   3. A record checked whole in memory is created at its name with O_CREAT|O_EXCL|O_NOFOLLOW
 *      (refusing anything there, atomically) and mode 000 until its bytes, mtime and mode are in;
 *      a streamed one goes to a temporary file created so beside the final name, and one whose
 *      SHA-384 fails (the reader throws at its end) never appears under its name.
 *   4. Without --force a temporary file is put in place with link(2), which refuses an existing
 *      name (a file, a link, a dangling link) atomically; with --force an existing name is
 *      replaced through a temporary file and rename(2), which replaces a file or a link itself and
 *      never writes through it. A directory is never replaced.
 * Known limit: another local user who can write the target directory while we extract can still
 * race some checks (as with tar); extract into a directory only you can write.
 */
import { mkdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { FilesWriter, type RecordBody } from '@coffer/sources/files-writer';
import { RecoverError } from '../errors.ts';
import { fsError } from './translate.ts';

export interface TargetOptions {
  /** Replace an existing file (never a directory, never through a symlink). */
  force: boolean;
}

/** A target directory opened for safe writes. */
export class ExtractTarget {
  /** The target's real path (symlinks in the path the operator typed are resolved once, here). */
  readonly root: string;
  readonly force: boolean;
  readonly #writer: FilesWriter;

  private constructor(root: string, force: boolean) {
    this.root = root;
    this.force = force;
    this.#writer = new FilesWriter(root);
  }

  /**
   * Opens (creating with mode 0700 when missing) the target directory `dir`. Throws RecoverError
   * when it exists and is not a directory, or cannot be created.
   */
  static async open(dir: string, options: TargetOptions): Promise<ExtractTarget> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EEXIST' || code === 'ENOTDIR') {
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
    return new ExtractTarget(root, options.force);
  }

  /** The absolute path `segments` would be written to (nothing is checked or created). */
  pathOf(segments: readonly string[]): string {
    return join(this.root, ...segments);
  }

  /**
   * Checks, without writing, whether `segments` could be written: returns null when free (or
   * replaceable with --force), else the RecoverError writing would raise. Used to refuse before the
   * first byte is written. A missing directory on the way counts as free.
   */
  precheck(segments: readonly string[], label: string): RecoverError | null {
    const path = this.pathOf(segments);
    let entry: ReturnType<FilesWriter['entryAt']>;
    try {
      entry = this.#writer.entryAt(this.root, segments.join('/'));
    } catch (e) {
      const refusal = this.#refusal(e, path, label);
      if (refusal instanceof RecoverError) return refusal;
      throw refusal;
    }
    if (entry === 'absent') return null;
    if (entry === 'directory') return isADirectory(path, label);
    if (this.force) return null;
    if (entry === 'link') return symlinkRefusal(path, label);
    return existsRefusal(path, label);
  }

  /**
   * Writes `body` to `segments` under the root with `metadata` (`mode`: permission bits; `mtimeMs`).
   * If the body throws (a record failing verification, an interrupt), nothing appears under the
   * name and its error is re-thrown unchanged. `label` names the record in messages. Returns the
   * absolute path written.
   */
  async write(
    segments: readonly string[],
    body: RecordBody,
    metadata: { mode?: number; mtimeMs?: number },
    label: string,
  ): Promise<string> {
    const path = this.pathOf(segments);
    try {
      await this.#writer.write(this.root, segments.join('/'), body, metadata, { replace: this.force });
    } catch (e) {
      throw this.#refusal(e, path, label);
    }
    return path;
  }

  /** Our error for one of the writer's (its body's own errors pass through unchanged). */
  #refusal(e: unknown, path: string, label: string): unknown {
    const code = (e as { code?: unknown })?.code;
    if (typeof code !== 'string' || !code.startsWith('ERR_SOURCE_')) return e;
    const sourceCode = (e as { sourceCode?: unknown }).sourceCode;
    if (code === 'ERR_SOURCE_TARGET_EXISTS') return existsRefusal(path, label);
    if (code === 'ERR_SOURCE_UNSAFE_NAME')
      return new RecoverError(
        'ERR_RECOVER_UNSAFE_PATH',
        `${label}: a symbolic link inside the target is on the way to ${path}; refusing to follow it`,
        { object: path },
      );
    if (sourceCode === 'EISDIR') return isADirectory(path, label);
    if (sourceCode === 'ENOTDIR' || sourceCode === 'EEXIST')
      return new RecoverError(
        'ERR_RECOVER_EXISTS',
        `${label}: a file is in the way of a directory on the way to ${path}`,
        { object: path },
      );
    return fsError(
      Object.assign(new Error('write failed'), { code: typeof sourceCode === 'string' ? sourceCode : 'EIO' }),
      path,
      `${label}: cannot write`,
    );
  }
}

function existsRefusal(path: string, label: string): RecoverError {
  return new RecoverError(
    'ERR_RECOVER_EXISTS',
    `${label}: ${path} already exists; refusing to overwrite (use --force)`,
    { object: path },
  );
}

function isADirectory(path: string, label: string): RecoverError {
  return new RecoverError('ERR_RECOVER_EXISTS', `${label}: ${path} is a directory; refusing to replace it`, {
    object: path,
  });
}

function symlinkRefusal(path: string, label: string): RecoverError {
  return new RecoverError(
    'ERR_RECOVER_EXISTS',
    `${label}: ${path} is a symbolic link; refusing to replace it (use --force)`,
    { object: path },
  );
}
