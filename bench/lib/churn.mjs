// A private, churnable copy of the shared benchmark data set (bench/archive-dataset.mjs) and the
// seeded churn that bench/incremental.mjs applies between runs.
//
// The copy is made of hard links (no second copy of the bytes: at BENCH_SCALE=10 that would be
// another 10 GiB, and the page cache is shared with the cached set, so warming one warms both).
// That is only safe if nothing ever writes through a link: churn therefore never writes into an
// existing file that has another link. A rewritten small file is written to a temporary name and
// renamed over the old one; the large file modified in the middle is first replaced by a private
// copy (same bytes, temp + rename), and the in-place 64 KiB overwrite refuses to run on an inode
// with more than one link. The cached set other benches reuse is never modified.
import { createCipheriv, createHash } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  fstatSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statfsSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

/** Deterministic byte stream: AES-256-CTR keystream under a key derived from the seed string. */
export function seededBytes(seed) {
  const key = createHash('sha256').update(`coffer-bench-churn-${seed}`).digest();
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return (n) => cipher.update(Buffer.alloc(n));
}

/** Relative '/'-separated names of the regular files under `dir`, sorted (a stable order to seed from). */
function listNames(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(dir, p).split(sep).join('/'));
    }
  };
  walk(dir);
  return out.sort();
}

/**
 * Re-creates `dest` as a tree of hard links to the files of `sourceDir` (same names, same
 * directories). Falls back to a byte copy per file where link(2) is refused (another file system).
 */
export function linkCopy(sourceDir, dest) {
  rmSync(dest, { recursive: true, force: true });
  let linked = 0;
  let copied = 0;
  for (const name of listNames(sourceDir)) {
    const to = join(dest, ...name.split('/'));
    mkdirSync(dirname(to), { recursive: true });
    try {
      linkSync(join(sourceDir, ...name.split('/')), to);
      linked++;
    } catch (e) {
      if (e.code !== 'EXDEV' && e.code !== 'EPERM' && e.code !== 'EMLINK') throw e;
      copyFileSync(join(sourceDir, ...name.split('/')), to);
      copied++;
    }
  }
  return { linked, copied };
}

function logLines(bytes, rand) {
  const levels = ['INFO', 'INFO', 'INFO', 'WARN', 'DEBUG', 'ERROR'];
  const parts = [];
  let n = 0;
  const r = rand(Math.ceil(bytes / 40) * 8 + 64);
  for (let i = 0; n < bytes; i += 8) {
    const a = r.readUInt32LE(i % (r.length - 8));
    const b = r.readUInt32LE((i + 4) % (r.length - 8));
    const line = `${new Date(1_800_000_000_000 + a).toISOString()} ${levels[a % levels.length]} churn req=${b.toString(16)} status=${a % 13 === 0 ? 503 : 200} ms=${b % 777}\n`;
    parts.push(line);
    n += line.length;
  }
  return Buffer.from(parts.join('')).subarray(0, bytes);
}

function writeReplacing(path, body) {
  const tmp = `${path}.churn-tmp`;
  writeFileSync(tmp, body);
  renameSync(tmp, path);
}

/**
 * One round of churn on the private copy `dir`, fully determined by `seed`:
 * - `fraction` (default 1 %, at least one) of the files under `small/`, chosen by a seeded partial
 *   Fisher-Yates shuffle, rewritten with new content of the same size and kind (log text for
 *   `.txt`, random bytes otherwise), each by temp file + rename;
 * - one file under `large/`, chosen by the seed, gets `patchBytes` (default 64 KiB) of new random
 *   bytes written in place at offset floor(size / 2); its size stays the same.
 * Returns what was changed.
 */
export function applyChurn(dir, { seed, fraction = 0.01, patchBytes = 64 * 1024 } = {}) {
  const rand = seededBytes(seed);
  const pick = (n) => rand(4).readUInt32LE(0) % n;
  const names = listNames(dir);
  const small = names.filter((n) => n.startsWith('small/'));
  const large = names.filter((n) => n.startsWith('large/'));
  const count = Math.max(1, Math.round(small.length * fraction));
  let smallBytes = 0;
  for (let i = 0; i < count && i < small.length; i++) {
    const j = i + pick(small.length - i);
    [small[i], small[j]] = [small[j], small[i]];
    const path = join(dir, ...small[i].split('/'));
    const size = statSync(path).size;
    writeReplacing(path, small[i].endsWith('.txt') ? logLines(size, rand) : rand(size));
    smallBytes += size;
  }
  let largeFile = null;
  let largeOffset = null;
  if (large.length > 0) {
    largeFile = large[pick(large.length)];
    const path = join(dir, ...largeFile.split('/'));
    if (statSync(path).nlink > 1) {
      copyFileSync(path, `${path}.churn-tmp`);
      renameSync(`${path}.churn-tmp`, path);
    }
    const fd = openSync(path, 'r+');
    try {
      const st = fstatSync(fd);
      // The guard that keeps the cached data set intact: never write into a shared inode.
      if (st.nlink !== 1) throw new Error(`churn: ${path} still has ${st.nlink} links, refusing to write`);
      largeOffset = Math.floor(st.size / 2);
      const patch = rand(Math.min(patchBytes, st.size - largeOffset));
      writeSync(fd, patch, 0, patch.length, largeOffset);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }
  return { smallFiles: count, smallBytes, largeFile, largeOffset, patchBytes };
}

/** Bytes of the regular files under `dir` (apparent sizes, as `du -b` of regular files; links not followed). */
export function apparentBytes(dir) {
  let bytes = 0;
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) bytes += lstatSync(p).size;
    }
  };
  try {
    walk(dir);
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  return bytes;
}

/** Bytes available to this user on the file system holding `path`. */
export function freeBytes(path) {
  const s = statfsSync(path);
  return Number(s.bavail) * Number(s.bsize);
}
