/** Streams a file through SHA-384: `{ sha384: 'sha384:<hex>', size }`. */
import { createReadStream } from 'node:fs';
import { createSha384, formatDigest } from '@coffer/crypto';

export async function hashFile(path: string): Promise<{ sha384: string; size: number }> {
  const h = createSha384();
  let size = 0;
  for await (const chunk of createReadStream(path)) {
    const c = chunk as Uint8Array;
    size += c.byteLength;
    h.update(c);
  }
  return { sha384: formatDigest(h.digest()), size };
}
