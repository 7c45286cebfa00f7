/** Shape checks for parsed JSON documents of the format (manifests, index lines, pack indexes). */
import { type Digest, isDigest as isDigestText } from '@coffer/crypto';

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A non-negative safe integer. */
export function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** `sha384:<96 hex>` (a test of the text alone: every record line of an index is checked, and decoding the hex cost ~90 ms per 20,000 records). */
export function isDigest(v: unknown): v is Digest {
  return isDigestText(v);
}
