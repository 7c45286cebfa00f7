/**
 * Digests of 0.2 pack objects (docs/archive-format.md §12.4): SHA-256, written `sha256:<64 hex>`.
 * Packs are whole objects of up to 72 MiB read by every verify and every writer's read-back; SHA-256
 * runs about three times faster than SHA-384 on processors with SHA extensions, and a pack digest
 * needs collision resistance only, which SHA-256 gives. Record digests and everything signed stay
 * SHA-384.
 */
import { createHash } from 'node:crypto';

export type PackDigest = `sha256:${string}`;

const PACK_DIGEST = /^sha256:[0-9a-f]{64}$/;

export function isPackDigest(v: unknown): v is PackDigest {
  return typeof v === 'string' && PACK_DIGEST.test(v);
}

export function formatPackDigest(bytes: Uint8Array): PackDigest {
  return `sha256:${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')}`;
}

/** The 32 digest bytes of `text` (which must pass isPackDigest). */
export function parsePackDigest(text: PackDigest): Uint8Array {
  return new Uint8Array(Buffer.from(text.slice(7), 'hex'));
}

export function packDigestOf(bytes: Uint8Array): PackDigest {
  return formatPackDigest(createHash('sha256').update(bytes).digest());
}
