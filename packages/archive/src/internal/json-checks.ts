/** Shape checks for parsed JSON documents of the format (manifests, index lines, pack indexes). */
import { type Digest, parseDigest } from '@coffer/crypto';

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A non-negative safe integer. */
export function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** `sha384:<96 hex>`. */
export function isDigest(v: unknown): v is Digest {
  if (typeof v !== 'string') return false;
  try {
    return parseDigest(v).length === 48;
  } catch {
    return false;
  }
}
