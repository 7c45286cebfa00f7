/**
 * Typed errors of @coffer/sources. Every failure a connector reports is a SourceError with a stable
 * `code`; callers switch on `code` (never on messages). Each code also says what the run executor
 * does with it (`disposition`) and, for run failures, the exact failure reason of the
 * specification's closed list (`reason`), so the engine never has to guess:
 * - `fail`: the run fails with `reason`;
 * - `park`: a throttle (429 / 503 SlowDown, Redis LOADING/BUSY): the run parks on the retry ladder
 *   with its checkpoint kept and no strike;
 * - `warn`: the record is left out and the `ok` run gets a warning (skipped or vanished mid-run);
 * - `restore`: raised only by restore-side calls (`exists`, `write`), never during a backup run.
 *
 * Security: messages name the operation, the record name and the source description only. They
 * never carry passwords, access keys, URLs with credentials, record bytes, or the raw message of
 * a dependency's exception (which can echo connection strings); the dependency's own error code
 * (an errno, an S3 error Code, a Redis error prefix) is kept in `sourceCode`.
 */

/** The failure reasons of the specification's closed list that a source can cause, verbatim. */
export const SOURCE_FAILURE_REASONS = {
  rangeRead: 'source cannot range-read (chunked capture unavailable)',
  tooLarge: 'record over the in-band size ceiling (recover it out of band)',
  unsupportedType: 'unsupported source type',
  resourceMissing: 'source resource missing',
  binding: 'source binding error',
  read: 'source read error',
  pageCap:
    'source listing exceeded the page cap (too many items to enumerate in one run; narrow the source selector)',
} as const;

export type SourceFailureReason = (typeof SOURCE_FAILURE_REASONS)[keyof typeof SOURCE_FAILURE_REASONS];

export type SourceErrorDisposition = 'fail' | 'park' | 'warn' | 'restore';

export type SourceErrorCode =
  | 'ERR_SOURCE_UNSUPPORTED_TYPE'
  | 'ERR_SOURCE_INVALID_CONFIG'
  | 'ERR_SOURCE_BINDING'
  | 'ERR_SOURCE_RESOURCE_MISSING'
  | 'ERR_SOURCE_READ'
  | 'ERR_SOURCE_LISTING_OVER_CAP'
  | 'ERR_SOURCE_RANGE_UNSUPPORTED'
  | 'ERR_SOURCE_RECORD_TOO_LARGE'
  | 'ERR_SOURCE_THROTTLED'
  | 'ERR_SOURCE_RECORD_VANISHED'
  | 'ERR_SOURCE_RECORD_SKIPPED'
  | 'ERR_SOURCE_INVALID_CURSOR'
  | 'ERR_SOURCE_UNSAFE_NAME'
  | 'ERR_SOURCE_TARGET_EXISTS'
  | 'ERR_SOURCE_INVALID_RECORD'
  | 'ERR_SOURCE_UNSAFE_STATEMENT'
  | 'ERR_SOURCE_WRITE'
  | 'ERR_SOURCE_CLOSED';

interface CodeRule {
  disposition: SourceErrorDisposition;
  reason: SourceFailureReason | null;
}

const RULES: Record<SourceErrorCode, CodeRule> = {
  ERR_SOURCE_UNSUPPORTED_TYPE: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.unsupportedType },
  ERR_SOURCE_INVALID_CONFIG: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.binding },
  ERR_SOURCE_BINDING: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.binding },
  ERR_SOURCE_RESOURCE_MISSING: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.resourceMissing },
  ERR_SOURCE_READ: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.read },
  ERR_SOURCE_LISTING_OVER_CAP: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.pageCap },
  ERR_SOURCE_RANGE_UNSUPPORTED: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.rangeRead },
  ERR_SOURCE_RECORD_TOO_LARGE: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.tooLarge },
  ERR_SOURCE_THROTTLED: { disposition: 'park', reason: null },
  ERR_SOURCE_RECORD_VANISHED: { disposition: 'warn', reason: null },
  ERR_SOURCE_RECORD_SKIPPED: { disposition: 'warn', reason: null },
  // A cursor the connector did not issue: a checkpoint from another source or a bug, never data.
  ERR_SOURCE_INVALID_CURSOR: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.read },
  ERR_SOURCE_UNSAFE_NAME: { disposition: 'restore', reason: null },
  ERR_SOURCE_TARGET_EXISTS: { disposition: 'restore', reason: null },
  ERR_SOURCE_INVALID_RECORD: { disposition: 'restore', reason: null },
  ERR_SOURCE_UNSAFE_STATEMENT: { disposition: 'restore', reason: null },
  ERR_SOURCE_WRITE: { disposition: 'restore', reason: null },
  ERR_SOURCE_CLOSED: { disposition: 'fail', reason: SOURCE_FAILURE_REASONS.read },
};

/** Every code this package can throw, in documentation order. */
export const SOURCE_ERROR_CODES = Object.keys(RULES) as readonly SourceErrorCode[];

/**
 * The specification's failure reason for a run that fails on `code`, or null when the code does
 * not fail a run (a throttle parks it, a skipped or vanished record is a warning, restore-side codes
 * never arise in a run).
 */
export function failureReasonFor(code: SourceErrorCode): SourceFailureReason | null {
  return RULES[code]?.reason ?? null;
}

/** What the run executor does with `code` (see the module comment). */
export function dispositionFor(code: SourceErrorCode): SourceErrorDisposition {
  return RULES[code]?.disposition ?? 'fail';
}

export interface SourceErrorOptions {
  /** The record the failure concerns. */
  record?: string;
  /** The dependency's own error code: an errno ("ENOENT"), an S3 Code ("NoSuchBucket"), a Redis prefix ("WRONGPASS"). */
  sourceCode?: string;
}

/** The one error class thrown by every public function of @coffer/sources. */
export class SourceError extends Error {
  readonly code: SourceErrorCode;
  /** The spec's failure reason when this error fails a run; null otherwise. */
  readonly reason: SourceFailureReason | null;
  readonly disposition: SourceErrorDisposition;
  readonly record?: string;
  readonly sourceCode?: string;

  constructor(code: SourceErrorCode, message: string, options: SourceErrorOptions = {}) {
    super(message);
    this.name = 'SourceError';
    this.code = code;
    this.reason = failureReasonFor(code);
    this.disposition = dispositionFor(code);
    if (options.record !== undefined) this.record = options.record;
    if (options.sourceCode !== undefined) this.sourceCode = options.sourceCode;
  }
}

/** True when `err` is a SourceError (optionally with the given code). */
export function isSourceError(err: unknown, code?: SourceErrorCode): err is SourceError {
  return err instanceof SourceError && (code === undefined || err.code === code);
}

/**
 * Quotes a record name for a message: JSON escaping keeps a hostile name from forging message text,
 * and long names are cut.
 */
export function quoteName(name: string): string {
  return JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}...` : name);
}
