/**
 * Path containment for the `files` connector: record names are checked as relative names before
 * they touch the filesystem, opened files are checked to really lie inside the root (a parent
 * directory swapped for a symbolic link after the name was checked is caught), and parent
 * directories are created one component at a time, refusing any component that is a symbolic link.
 */
import { constants, readlinkSync, realpathSync } from 'node:fs';
import { type FileHandle, lstat, mkdir, readlink, realpath } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';

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
 * Whether the open file `handle` lies inside `realRoot` (a realpath), judged by the kernel's own
 * record of the path (/proc/self/fd on Linux). Elsewhere falls back to the realpath of `abs`'s
 * parent, which narrows but does not close the race.
 */
export async function openedInside(handle: FileHandle, abs: string, realRoot: string): Promise<boolean> {
  const inside = (p: string) =>
    p === realRoot || p.startsWith(realRoot.endsWith(sep) ? realRoot : realRoot + sep);
  if (procFd !== false) {
    try {
      const real = await readlink(`/proc/self/fd/${handle.fd}`);
      procFd = true;
      return inside(real);
    } catch {
      procFd = false;
    }
  }
  try {
    return inside(await realpath(dirname(abs)));
  } catch {
    return false;
  }
}

/** `openedInside` for a raw descriptor, synchronously (see files-source's #openForRead). */
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

export type ParentProblem = { kind: 'symlink' | 'not-directory'; at: string } | null;

/**
 * Checks (and with `create`, makes) the parent directories of `name` under `realRoot`, one
 * component at a time with lstat, so no component is ever a symbolic link. Returns the problem
 * found, or null when every parent is a real directory (or, without `create`, when one is absent:
 * `missing` is then true).
 */
export async function checkParents(
  realRoot: string,
  name: string,
  create: boolean,
): Promise<{ problem: ParentProblem; missing: boolean }> {
  const segs = name.split('/');
  let dir = realRoot;
  for (let i = 0; i < segs.length - 1; i++) {
    dir = join(dir, segs[i]!);
    let st: Awaited<ReturnType<typeof lstat>> | null;
    try {
      st = await lstat(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      st = null;
    }
    if (st === null) {
      if (!create) return { problem: null, missing: true };
      try {
        await mkdir(dir, { mode: 0o755 });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        i--; // raced with another writer: look at what is there now
        dir = join(dir, '..');
        continue;
      }
      continue;
    }
    if (st.isSymbolicLink())
      return { problem: { kind: 'symlink', at: segs.slice(0, i + 1).join('/') }, missing: false };
    if (!st.isDirectory()) {
      return { problem: { kind: 'not-directory', at: segs.slice(0, i + 1).join('/') }, missing: false };
    }
  }
  return { problem: null, missing: false };
}
