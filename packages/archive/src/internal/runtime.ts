import * as zlib from 'node:zlib';
import { ArchiveError } from '../errors.ts';

/**
 * Shards and indexes are zstd-compressed, which node:zlib offers from Node.js 22.15 / 23.8 on. On
 * an older runtime every compressed frame would fail to decode and read as tampering, telling an
 * operator that a good archive is damaged; refuse plainly instead, before anything is read or
 * written.
 */
export function assertRuntime(): void {
  const z = zlib as unknown as Record<string, unknown>;
  if (typeof z.zstdCompressSync !== 'function' || typeof z.zstdDecompressSync !== 'function') {
    throw new ArchiveError('ERR_ARCHIVE_UNSUPPORTED_RUNTIME', {
      detail: `Node.js ${process.versions.node} has no zstd in node:zlib (22.15 or newer needed)`,
    });
  }
}
