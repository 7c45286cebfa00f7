import { createHash } from 'node:crypto';

/**
 * `size` bytes that depend only on `label`: the same label gives the same bytes in every run and
 * process, another label other bytes (artefacts, uploads and other payloads whose content must be
 * distinct and reproducible but not meaningful).
 */
export function labelledBytes(label: string, size = 4096): Uint8Array {
  const out = new Uint8Array(size);
  const seed = createHash('sha256').update(label).digest();
  for (let i = 0; i < size; i++) out[i] = seed[i % seed.length]! ^ (i & 0xff);
  return out;
}
