// Incompressible generated data for the benchmarks: xorshift32 words, cheap to make and no
// compressor shrinks them (zeros or a repeated pattern would be sealed at a fraction of their size
// and measure nothing).
import { closeSync, existsSync, mkdirSync, openSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

const CHUNK = 4 * 1024 * 1024;

/** Writes `size` bytes of noise to `path` (kept when it already has that size). */
export function ensureNoiseFile(path, size, seed = 0x9e3779b9) {
  if (existsSync(path) && statSync(path).size === size) return path;
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w');
  const words = new Uint32Array(CHUNK / 4);
  const bytes = new Uint8Array(words.buffer);
  let x = seed >>> 0;
  for (let done = 0; done < size; ) {
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      words[i] = x >>> 0;
    }
    const n = Math.min(CHUNK, size - done);
    writeSync(fd, bytes, 0, n);
    done += n;
  }
  closeSync(fd);
  renameSync(tmp, path);
  return path;
}
