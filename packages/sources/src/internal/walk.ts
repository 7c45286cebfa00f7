/**
 * A resumable, ordered walk of a directory tree for the `files` connector.
 *
 * Order: entries come out in UTF-8 byte order of their full '/'-separated relative names (the order
 * S3 lists in), which a depth-first walk gives when each directory's children are sorted by their
 * name with a '/' appended to directories ("a-c" < "a/" < "a0"). That total order is what makes a
 * listing resumable from a bare name: a walk started `after` a name prunes every subtree whose
 * names all sort before it, without reading it.
 *
 * Safety: nothing is followed. Directories are read with `readdir` and classified from their
 * entries (`lstat` when the type is unknown); a symbolic link is reported as skipped, never
 * entered; sockets, FIFOs and devices are skipped; names that are not valid UTF-8 are skipped (a
 * lossy name could not be restored to the same file).
 */
import type { Dirent, Stats } from 'node:fs';
import { lstatSync } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join, sep } from 'node:path';

/**
 * `position` is the entry's exact place in the walk order (its raw name bytes, '/'-terminated for a
 * directory): what a cursor must carry, since `name` is lossy for names that are not UTF-8.
 */
export type WalkEntry =
  | { kind: 'file'; name: string; position: Buffer; stats: Stats }
  | { kind: 'skipped'; name: string; position: Buffer; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });
const SLASH = Buffer.from('/');

interface Child {
  raw: Buffer; // name bytes
  key: Buffer; // full relative name bytes (with '/' appended for directories)
  text: string | null; // decoded name, null when not valid UTF-8
  kind: 'dir' | 'file' | 'symlink' | 'other';
  otherKind?: string;
}

interface Frame {
  abs: string;
  prefix: string; // '' or 'a/b/'
  children: Child[];
  i: number;
}

function kindOf(d: Dirent<Buffer>): Child['kind'] | null {
  if (d.isSymbolicLink()) return 'symlink';
  if (d.isDirectory()) return 'dir';
  if (d.isFile()) return 'file';
  if (d.isFIFO() || d.isSocket() || d.isCharacterDevice() || d.isBlockDevice()) return 'other';
  return null;
}

function otherKind(s: { isFIFO(): boolean; isSocket(): boolean; isCharacterDevice(): boolean }): string {
  if (s.isFIFO()) return 'named pipe';
  if (s.isSocket()) return 'socket';
  if (s.isCharacterDevice()) return 'character device';
  return 'block device';
}

function decode(raw: Buffer): string | null {
  try {
    return utf8.decode(raw);
  } catch {
    return null;
  }
}

/**
 * The path of entry `name` (one name from readdir: no separator, never `.` or `..`) in directory
 * `dir` (absolute and normalized): what `path.join` gives, without its normalization pass, which
 * built every path character by character (30 MiB of garbage per 20,000 files listed).
 */
function under(dir: string, name: string): string {
  return dir.endsWith(sep) ? `${dir}${name}` : `${dir}${sep}${name}`;
}

/** Reads and sorts one directory; null when it vanished, a string reason when it cannot be read. */
async function readDir(abs: string, prefix: string): Promise<Child[] | null | string> {
  let dirents: Dirent<Buffer>[];
  try {
    dirents = await readdir(abs, { withFileTypes: true, encoding: 'buffer' });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    return `directory not readable (${code ?? 'error'})`;
  }
  const prefixBytes = Buffer.from(prefix, 'utf8');
  const out: Child[] = [];
  for (const d of dirents) {
    const raw = d.name;
    let kind = kindOf(d);
    let other: string | undefined;
    if (kind === null) {
      // Some filesystems do not report entry types: ask lstat (never stat, which would follow).
      try {
        const s = await lstat(join(abs, raw.toString('utf8')));
        kind = s.isSymbolicLink() ? 'symlink' : s.isDirectory() ? 'dir' : s.isFile() ? 'file' : 'other';
        if (kind === 'other') other = otherKind(s);
      } catch {
        continue; // vanished since readdir
      }
    } else if (kind === 'other') {
      other = otherKind(d);
    }
    const key = Buffer.concat(kind === 'dir' ? [prefixBytes, raw, SLASH] : [prefixBytes, raw]);
    out.push({ raw, key, text: decode(raw), kind, ...(other === undefined ? {} : { otherKind: other }) });
  }
  out.sort((a, b) => Buffer.compare(a.key, b.key));
  return out;
}

/**
 * Walks `root` (an absolute, real directory path) and yields files and skipped names in order.
 * With `after`, yields only names that sort after it. A directory that cannot be read is yielded
 * as skipped; entries that vanish mid-walk are left out.
 */
export async function* walkTree(root: string, after: Buffer | null): AsyncGenerator<WalkEntry> {
  const afterBytes = after;
  const first = await readDir(root, '');
  if (first === null || typeof first === 'string') {
    throw Object.assign(new Error('root not readable'), { code: first === null ? 'ENOENT' : 'EACCES' });
  }
  const stack: Frame[] = [{ abs: root, prefix: '', children: first, i: 0 }];
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]!;
    if (frame.i >= frame.children.length) {
      stack.pop();
      continue;
    }
    const child = frame.children[frame.i++]!;
    if (afterBytes !== null) {
      if (child.kind === 'dir') {
        const inside =
          afterBytes.length > child.key.length && afterBytes.subarray(0, child.key.length).equals(child.key);
        // A directory's own position is passed only when it was yielded as skipped (unreadable).
        if (!inside && Buffer.compare(child.key, afterBytes) <= 0) continue;
      } else if (Buffer.compare(child.key, afterBytes) <= 0) {
        continue;
      }
    }
    const name = `${frame.prefix}${child.text ?? child.raw.toString('utf8')}`;
    if (child.text === null) {
      yield { kind: 'skipped', name, position: child.key, reason: 'name is not valid UTF-8' };
      continue;
    }
    if (child.kind === 'symlink') {
      yield { kind: 'skipped', name, position: child.key, reason: 'symbolic link (not followed)' };
      continue;
    }
    if (child.kind === 'other') {
      yield {
        kind: 'skipped',
        name,
        position: child.key,
        reason: `special file (${child.otherKind ?? 'not a regular file'})`,
      };
      continue;
    }
    const abs = under(frame.abs, child.text);
    if (child.kind === 'dir') {
      const children = await readDir(abs, `${name}/`);
      if (children === null) continue;
      if (typeof children === 'string') {
        yield { kind: 'skipped', name: `${name}/`, position: child.key, reason: children };
        continue;
      }
      stack.push({ abs, prefix: `${name}/`, children, i: 0 });
      continue;
    }
    // A regular file: lstat it. Synchronously on purpose: on a local disk lstat is a few
    // microseconds, a thread-pool round trip ~100 us, and trees are mostly small files.
    let stats: Stats;
    try {
      stats = lstatSync(abs);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue; // vanished since readdir
      yield { kind: 'skipped', name, position: child.key, reason: `not accessible (${code ?? 'error'})` };
      continue;
    }
    if (!stats.isFile()) {
      if (stats.isDirectory()) continue; // replaced by a directory mid-walk: not listed this run
      yield {
        kind: 'skipped',
        name,
        position: child.key,
        reason: stats.isSymbolicLink()
          ? 'symbolic link (not followed)'
          : `special file (${otherKind(stats)})`,
      };
      continue;
    }
    yield { kind: 'file', name, position: child.key, stats };
  }
}
