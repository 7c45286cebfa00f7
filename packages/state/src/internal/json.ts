/** JSON helpers shared by the repositories: parse-or-corrupt, object checks, field diffs. */
import { StateError } from '../errors.ts';

/** Parses a stored JSON column; a value that no longer parses is ERR_STATE_CORRUPT (never a guess). */
export function parseStored<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new StateError('ERR_STATE_CORRUPT', `stored ${what} is not readable JSON`);
  }
}

/** Serialises a value for a JSON column; refuses what JSON cannot carry faithfully. */
export function toStored(value: unknown, what: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (text === undefined) throw new StateError('ERR_STATE_INVALID', `${what} is not JSON-serialisable`);
  return text;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Key-order-independent serialisation, used only to compare values. */
export function stableStringify(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableStringify).join(',')}]`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${stableStringify(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** Top-level field names whose values differ (added, removed or changed), sorted. */
export function changedFieldNames(before: Record<string, unknown>, after: Record<string, unknown>): string[] {
  const names = new Set([...Object.keys(before), ...Object.keys(after)]);
  const out: string[] = [];
  for (const n of names) {
    const a = before[n];
    const b = after[n];
    if (a === undefined && b === undefined) continue;
    if (a === undefined || b === undefined || stableStringify(a) !== stableStringify(b)) out.push(n);
  }
  return out.sort();
}

/** Checks an identifier argument (job id, run id, lease name ...). */
export function checkId(id: unknown, what: string): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 512) {
    throw new StateError('ERR_STATE_INVALID', `${what} must be a non-empty string of at most 512 characters`);
  }
  return id;
}
