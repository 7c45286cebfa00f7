/**
 * Shape checks shared by the builder, the verifier and the parsers. Internal: never imported from
 * outside the package.
 */

/** `sha384:` + 96 lower-case hex digits: the only digest form the chain uses. */
export const DIGEST_RE = /^sha384:[0-9a-f]{96}$/;

/** RFC 3339 date-time (section 5.6), any offset, optional fraction. */
export const RFC3339_RE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** What `buildEvent` writes: UTC, exactly millisecond precision (`Date.prototype.toISOString`). */
export const TS_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A kebab-case action name of at most 64 characters. */
export const ACTION_RE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;

export function isDigest(v: unknown): v is string {
  return typeof v === 'string' && DIGEST_RE.test(v);
}

export function isSeq(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;
}

export function isActionName(v: unknown): v is string {
  return typeof v === 'string' && v.length <= 64 && ACTION_RE.test(v);
}

/** A valid RFC 3339 time whose calendar fields are real (Date.parse agrees). */
export function isRfc3339(v: unknown): v is string {
  return typeof v === 'string' && RFC3339_RE.test(v) && Number.isFinite(Date.parse(v));
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Reason `v` is not plain JSON (null, boolean, finite number, string, array, plain object) within
 * `maxDepth` levels, or null when it is. The reason names a path, never a value.
 */
export function notJsonReason(
  v: unknown,
  path: string,
  maxDepth: number,
  childPath: (path: string, key: string | number) => string,
): string | null {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return null;
  if (typeof v === 'number') return Number.isFinite(v) ? null : `${path} is not a finite number`;
  if (maxDepth <= 0) return `${path} nests too deeply`;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const r = notJsonReason(v[i], childPath(path, i), maxDepth - 1, childPath);
      if (r) return r;
    }
    return null;
  }
  if (isPlainObject(v)) {
    for (const [k, child] of Object.entries(v)) {
      const r = notJsonReason(child, childPath(path, k), maxDepth - 1, childPath);
      if (r) return r;
    }
    return null;
  }
  return `${path} is not a JSON value`;
}
