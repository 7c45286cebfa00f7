/** Pseudo-random, incompressible bytes from a seed (so sizes on disk reflect what was stored). */
export function noise(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed * 2654435761 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
