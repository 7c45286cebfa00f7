/**
 * Path containment for the `files` connector: record names are checked as relative names before
 * they touch the filesystem, opened files are checked to really lie inside the root (a parent
 * directory swapped for a symbolic link after the name was checked is caught). The write path's
 * parent-directory checks live in files-write.ts.
 */
import { constants, readlinkSync, realpathSync } from 'node:fs';
import { dirname, sep } from 'node:path';

/** Why `name` cannot name a file inside a root, or null when it can. */
export function fileNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return 'not a string';
  if (name.length === 0) return 'empty';
  if (name.includes('\u0000')) return 'contains NUL';
  if (name.startsWith('/')) return 'is absolute';
  for (const seg of name.split('/')) {
    if (seg === '') return 'has an empty segment';
    if (seg === '.' || seg === '..') return `has a "${seg}" segment`;
    if (Buffer.byteLength(seg, 'utf8') > 255) return 'has a segment longer than 255 bytes';
  }
  return null;
}

/** Flags for opening a file to read without following a final symbolic link or blocking on a FIFO. */
export const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** Flags for creating a new temporary file, never through a symbolic link. */
export const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

let procFd: boolean | undefined;

/**
 * Whether the open descriptor `fd` lies inside `realRoot` (a realpath), judged by the kernel's own
 * record of the path (/proc/self/fd on Linux). Elsewhere falls back to the realpath of `abs`'s
 * parent, which narrows but does not close the race. Synchronous (see files-source's #openForRead).
 */
export function openedInsideSync(fd: number, abs: string, realRoot: string): boolean {
  const inside = (p: string) =>
    p === realRoot || p.startsWith(realRoot.endsWith(sep) ? realRoot : realRoot + sep);
  if (procFd !== false) {
    try {
      const real = readlinkSync(`/proc/self/fd/${fd}`);
      procFd = true;
      return inside(real);
    } catch {
      procFd = false;
    }
  }
  try {
    return inside(realpathSync(dirname(abs)));
  } catch {
    return false;
  }
}
