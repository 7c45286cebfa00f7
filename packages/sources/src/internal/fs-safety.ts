/**
 * Path containment for the `files` connector: record names are checked as relative names before
 * they touch the filesystem, opened files are checked to really lie inside the root (a parent
 * directory swapped for a symbolic link after the name was checked is caught). The write path's
 * parent-directory checks live in files-write.ts.
 */
import { constants, readlinkSync, realpathSync } from 'node:fs';
import { dirname, sep } from 'node:path';

/** Why a record name cannot name a file inside a root (see `fileNameProblem`). */
export type FileNameProblem =
  | 'not-a-string'
  | 'empty'
  | 'nul'
  | 'absolute'
  | 'empty-segment'
  | 'dot-segment'
  | 'dot-dot-segment'
  | 'long-segment';

const PROBLEM_TEXT: Record<FileNameProblem, string> = {
  'not-a-string': 'is not a string',
  empty: 'is empty',
  nul: 'contains NUL',
  absolute: 'is absolute',
  'empty-segment': 'has an empty segment',
  'dot-segment': 'has a "." segment',
  'dot-dot-segment': 'has a ".." segment',
  'long-segment': 'has a segment longer than 255 bytes',
};

/**
 * Why `name` cannot name a file inside a root, or null when it can: a relative, '/'-separated name
 * of non-empty segments, none `.` or `..` or longer than 255 bytes, without NUL.
 */
export function fileNameProblem(name: unknown): FileNameProblem | null {
  if (typeof name !== 'string') return 'not-a-string';
  if (name.length === 0) return 'empty';
  if (name.includes('\u0000')) return 'nul';
  if (name.startsWith('/')) return 'absolute';
  for (const seg of name.split('/')) {
    if (seg === '') return 'empty-segment';
    if (seg === '.') return 'dot-segment';
    if (seg === '..') return 'dot-dot-segment';
    if (seg.length > 63 && Buffer.byteLength(seg, 'utf8') > 255) return 'long-segment';
  }
  return null;
}

/** The problem as words after "record name" (`record name is absolute`). */
export function fileNameProblemText(problem: FileNameProblem): string {
  return PROBLEM_TEXT[problem];
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
