/**
 * The specification's closed list of failed-run reasons ("Run", 21 entries, in order) and the
 * classifier that turns a run's error into exactly one of them.
 *
 * `classifyFailure(error)` walks the error and its `cause` chain and takes the FIRST branch of the
 * closed list (in the specification's order) that any error in the chain matches; nothing matches
 * -> `run failed`. Before the list it separates the two outcomes that are not failures: a throttle
 * (429 / 503 SlowDown from a destination or a source) parks the run, and a record that was skipped
 * or vanished mid-stream is a warning (the executor resumes from its checkpoint).
 *
 * Security-relevant behaviour: a reason is always one of the fixed strings below (the only
 * variable parts, the store's error code and the handoff class, are checked against a strict
 * pattern / closed set), so no raw message, key or record byte ever reaches a run record. The raw
 * message only feeds the one-way `causeDigest`, which the log line carries too, to join the two.
 */
import { createHash } from 'node:crypto';

export const REASON_DESTINATION_ACCESS = 'destination access error';
export const REASON_RUNLOG_CONTENDED = 'runlog write contended';
export const REASON_TRUNCATED = 'shard enumeration incomplete (refused to sign a truncated archive)';
export const REASON_CHECKPOINT_UNWRAP =
  'checkpoint unwrap failed (resume state unreadable; signer may have rotated)';
export const REASON_HANDOFF = 'seal DO handoff refused';
export const REASON_INTERNAL = 'internal invariant violated';
export const REASON_SHARD_OVERFLOW = 'shard id overflow (refused to seal a misordered archive)';
export const REASON_RESUME_DIVERGENT = 'resume state divergent (mid-record resume refused)';
export const REASON_RANGE_READ = 'source cannot range-read (chunked capture unavailable)';
export const REASON_TOO_LARGE = 'record over the in-band size ceiling (recover it out of band)';
export const REASON_UNSUPPORTED_TYPE = 'unsupported source type';
export const REASON_RESOURCE_MISSING = 'source resource missing';
export const REASON_BINDING = 'source binding error';
export const REASON_SLICE = 'source too large to back up in one slice (not yet resumable)';
export const REASON_READ = 'source read error';
export const REASON_CF_ACCOUNT =
  'cf-config source needs an accountId (re-save the source with an account id)';
export const REASON_PAGE_CAP =
  'source listing exceeded the page cap (too many items to enumerate in one run; narrow the source selector)';
export const REASON_NOT_CONFIGURED = 'engine not fully configured';
export const REASON_RUN_FAILED = 'run failed';
/**
 * Why an attempt stopped when its run lock was lost (log events `run-lease-lost` and
 * `run-attempt-stopped`, docs/runs.md). Not one of the closed list: it is never written to a run
 * record, because the run belongs to the lock's new holder (or the next resume), not to the
 * attempt that lost it.
 */
export const REASON_LEASE_LOST =
  'run lock lost (another engine holds the run; this attempt committed nothing)';

export const HANDOFF_CLASSES = [
  'invalid-payload',
  'worker-spawn-refused',
  'do-error',
  'unreachable',
] as const;
export type HandoffClass = (typeof HANDOFF_CLASSES)[number];

/** The 21 reasons in the specification's order (`<code>` and `<class>` as placeholders). */
export const FAILURE_REASONS = [
  REASON_DESTINATION_ACCESS,
  'destination rejected the write (<code>)',
  REASON_RUNLOG_CONTENDED,
  REASON_TRUNCATED,
  REASON_CHECKPOINT_UNWRAP,
  'seal DO handoff refused (<class>)',
  REASON_HANDOFF,
  REASON_INTERNAL,
  REASON_SHARD_OVERFLOW,
  REASON_RESUME_DIVERGENT,
  REASON_RANGE_READ,
  REASON_TOO_LARGE,
  REASON_UNSUPPORTED_TYPE,
  REASON_RESOURCE_MISSING,
  REASON_BINDING,
  REASON_SLICE,
  REASON_READ,
  REASON_CF_ACCOUNT,
  REASON_PAGE_CAP,
  REASON_NOT_CONFIGURED,
  REASON_RUN_FAILED,
] as const;

/** `destination rejected the write (<code>)` with the store's own code (sanitised). */
export function rejectedReason(storeCode: string | undefined): string {
  const code = storeCode !== undefined && /^[A-Za-z0-9._-]{1,64}$/.test(storeCode) ? storeCode : 'unknown';
  return `destination rejected the write (${code})`;
}

export function handoffReason(cls: HandoffClass | undefined): string {
  return cls === undefined ? REASON_HANDOFF : `${REASON_HANDOFF} (${cls})`;
}

/** True when `reason` is a member of the closed list (placeholders filled). */
export function isFailureReason(reason: string): boolean {
  if ((FAILURE_REASONS as readonly string[]).includes(reason) && !reason.includes('<')) return true;
  if (/^destination rejected the write \([A-Za-z0-9._-]{1,64}\)$/.test(reason)) return true;
  return HANDOFF_CLASSES.some((c) => reason === `${REASON_HANDOFF} (${c})`);
}

// ---------------------------------------------------------------------------------------------
// Engine-side run errors (codes listed in docs/errors.md under the engine's heading).

export type RunErrorCode =
  | 'ERR_RUN_NOT_CONFIGURED'
  | 'ERR_RUN_DESTINATION_UNKNOWN'
  | 'ERR_RUN_HANDOFF'
  | 'ERR_RUN_RESUME_DIVERGENT'
  | 'ERR_RUN_VERIFY_FAILED'
  | 'ERR_RUN_INVARIANT'
  | 'ERR_RUN_JOB_GONE'
  | 'ERR_RUN_CONNECTION_UNCONFIGURED';

export const RUN_ERROR_CODES: readonly RunErrorCode[] = [
  'ERR_RUN_NOT_CONFIGURED',
  'ERR_RUN_DESTINATION_UNKNOWN',
  'ERR_RUN_HANDOFF',
  'ERR_RUN_RESUME_DIVERGENT',
  'ERR_RUN_VERIFY_FAILED',
  'ERR_RUN_INVARIANT',
  'ERR_RUN_JOB_GONE',
  'ERR_RUN_CONNECTION_UNCONFIGURED',
];

/** An error raised by the run machinery itself. Messages carry no secret and no record name. */
export class RunError extends Error {
  readonly code: RunErrorCode;
  readonly handoffClass: HandoffClass | undefined;
  /** For ERR_RUN_VERIFY_FAILED: the archive code of the failing object. */
  readonly verifyCode: string | undefined;
  constructor(
    code: RunErrorCode,
    message: string,
    options: { cause?: unknown; handoffClass?: HandoffClass; verifyCode?: string } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RunError';
    this.code = code;
    this.handoffClass = options.handoffClass;
    this.verifyCode = options.verifyCode;
  }
}

// ---------------------------------------------------------------------------------------------
// Classification

export type Disposition = 'fail' | 'park' | 'warn';

export interface Classification {
  disposition: Disposition;
  /** A closed-list reason (for `fail`); for `park`/`warn` the reason the run would get if it gave up. */
  reason: string;
  /** The most specific error code found in the chain (for logs), e.g. ERR_OBJECTSTORE_THROTTLED. */
  code: string;
  causeDigest: string;
}

interface Coded {
  code?: unknown;
  storeCode?: unknown;
  storeErrorCode?: unknown;
  disposition?: unknown;
  handoffClass?: unknown;
  verifyCode?: unknown;
  message?: unknown;
  cause?: unknown;
}

/** The error and its causes, outermost first (bounded, cycle-safe). */
export function errorChain(error: unknown): Coded[] {
  const out: Coded[] = [];
  const seen = new Set<unknown>();
  let e: unknown = error;
  while (e !== null && e !== undefined && typeof e === 'object' && !seen.has(e) && out.length < 16) {
    seen.add(e);
    out.push(e as Coded);
    e = (e as Coded).cause;
  }
  if (out.length === 0) out.push({ message: String(error) });
  return out;
}

const codeOf = (e: Coded): string => (typeof e.code === 'string' ? e.code : '');

/**
 * A short one-way digest of the raw failure: the first 12 hex digits of SHA-384 over the chain's
 * codes and messages. Equal faults give equal digests; nothing of the message can be read back.
 */
export function causeDigest(error: unknown): string {
  const h = createHash('sha384');
  for (const e of errorChain(error)) {
    h.update(codeOf(e));
    h.update('\0');
    h.update(typeof e.message === 'string' ? e.message : '');
    h.update('\0');
  }
  return h.digest('hex').slice(0, 12);
}

const isThrottle = (e: Coded): boolean =>
  e.code === 'ERR_OBJECTSTORE_THROTTLED' ||
  e.code === 'ERR_SOURCE_THROTTLED' ||
  (e.code === 'ERR_ARCHIVE_DESTINATION' && e.storeErrorCode === 'ERR_OBJECTSTORE_THROTTLED') ||
  (typeof e.code === 'string' && e.code.startsWith('ERR_SOURCE_') && e.disposition === 'park');

const isWarn = (e: Coded): boolean =>
  e.code === 'ERR_SOURCE_RECORD_VANISHED' || e.code === 'ERR_SOURCE_RECORD_SKIPPED';

const DESTINATION_ACCESS_CODES = new Set([
  'ERR_OBJECTSTORE_ACCESS_DENIED',
  'ERR_OBJECTSTORE_NOT_FOUND',
  'ERR_OBJECTSTORE_FAULT',
  'ERR_OBJECTSTORE_INVALID_CONFIG',
]);
const VERIFY_ACCESS_CODES = new Set(['ERR_ARCHIVE_NOT_FOUND', 'ERR_ARCHIVE_DESTINATION']);

type Branch = (e: Coded) => string | null;

/** The closed list as predicates, in the specification's order. */
const BRANCHES: Branch[] = [
  // 1. destination access error
  (e) => {
    const c = codeOf(e);
    if (DESTINATION_ACCESS_CODES.has(c) || c === 'ERR_RUN_DESTINATION_UNKNOWN')
      return REASON_DESTINATION_ACCESS;
    if (c === 'ERR_ARCHIVE_DESTINATION') {
      const s = e.storeErrorCode;
      if (s === undefined || (typeof s === 'string' && DESTINATION_ACCESS_CODES.has(s)))
        return REASON_DESTINATION_ACCESS;
    }
    if (
      c === 'ERR_RUN_VERIFY_FAILED' &&
      typeof e.verifyCode === 'string' &&
      VERIFY_ACCESS_CODES.has(e.verifyCode)
    )
      return REASON_DESTINATION_ACCESS;
    return null;
  },
  // 2. destination rejected the write (<code>)
  (e) => {
    const c = codeOf(e);
    const store = typeof e.storeCode === 'string' ? e.storeCode : undefined;
    if (c === 'ERR_OBJECTSTORE_REJECTED') return rejectedReason(store);
    if (c === 'ERR_OBJECTSTORE_PRECONDITION_FAILED') return rejectedReason(store ?? 'PreconditionFailed');
    if (c === 'ERR_ARCHIVE_DESTINATION' && e.storeErrorCode === 'ERR_OBJECTSTORE_REJECTED')
      return rejectedReason(store);
    if (c === 'ERR_ARCHIVE_DESTINATION' && e.storeErrorCode === 'ERR_OBJECTSTORE_PRECONDITION_FAILED')
      return rejectedReason(store ?? 'PreconditionFailed');
    return null;
  },
  // 3. runlog write contended: the state store was busy or a concurrent write won.
  (e) =>
    codeOf(e) === 'ERR_STATE_CONFLICT' || codeOf(e) === 'ERR_STATE_UNAVAILABLE'
      ? REASON_RUNLOG_CONTENDED
      : null,
  // 4.
  (e) => (codeOf(e) === 'ERR_ARCHIVE_TRUNCATED' ? REASON_TRUNCATED : null),
  // 5.
  (e) => (codeOf(e) === 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE' ? REASON_CHECKPOINT_UNWRAP : null),
  // 6. seal DO handoff refused (<class>): the checkpoint row / worker hand-off with a class.
  (e) =>
    codeOf(e) === 'ERR_RUN_HANDOFF' &&
    typeof e.handoffClass === 'string' &&
    (HANDOFF_CLASSES as readonly string[]).includes(e.handoffClass)
      ? handoffReason(e.handoffClass as HandoffClass)
      : null,
  // 7. seal DO handoff refused
  (e) => (codeOf(e) === 'ERR_RUN_HANDOFF' ? REASON_HANDOFF : null),
  // 8. internal invariant violated
  (e) => {
    const c = codeOf(e);
    return c === 'ERR_ARCHIVE_INTERNAL' ||
      c === 'ERR_ARCHIVE_INVALID_STATE' ||
      c === 'ERR_ARCHIVE_INVALID_ARGUMENT' ||
      c === 'ERR_STATE_INVARIANT' ||
      c === 'ERR_STATE_CORRUPT' ||
      c === 'ERR_OBJECTSTORE_INVALID_KEY' ||
      c === 'ERR_RUN_INVARIANT'
      ? REASON_INTERNAL
      : null;
  },
  // 9.
  (e) => (codeOf(e) === 'ERR_ARCHIVE_SHARD_ID_OVERFLOW' ? REASON_SHARD_OVERFLOW : null),
  // 10.
  (e) =>
    codeOf(e) === 'ERR_ARCHIVE_RESUME_DIVERGENT' || codeOf(e) === 'ERR_RUN_RESUME_DIVERGENT'
      ? REASON_RESUME_DIVERGENT
      : null,
  // 11.-19. source faults
  (e) => (codeOf(e) === 'ERR_SOURCE_RANGE_UNSUPPORTED' ? REASON_RANGE_READ : null),
  (e) => (codeOf(e) === 'ERR_SOURCE_RECORD_TOO_LARGE' ? REASON_TOO_LARGE : null),
  (e) => (codeOf(e) === 'ERR_SOURCE_UNSUPPORTED_TYPE' ? REASON_UNSUPPORTED_TYPE : null),
  (e) => (codeOf(e) === 'ERR_SOURCE_RESOURCE_MISSING' ? REASON_RESOURCE_MISSING : null),
  (e) =>
    codeOf(e) === 'ERR_SOURCE_BINDING' ||
    codeOf(e) === 'ERR_SOURCE_INVALID_CONFIG' ||
    codeOf(e) === 'ERR_RUN_CONNECTION_UNCONFIGURED'
      ? REASON_BINDING
      : null,
  // 16. (no connector here slices a source; kept for the list's order)
  (e) => (codeOf(e) === 'ERR_SOURCE_SLICE_TOO_LARGE' ? REASON_SLICE : null),
  (e) => {
    const c = codeOf(e);
    return c === 'ERR_SOURCE_READ' ||
      c === 'ERR_SOURCE_INVALID_CURSOR' ||
      c === 'ERR_SOURCE_CLOSED' ||
      c === 'ERR_ARCHIVE_SOURCE_READ'
      ? REASON_READ
      : null;
  },
  // 18. (no cf-config connector in this engine)
  (e) => (codeOf(e) === 'ERR_SOURCE_CF_ACCOUNT' ? REASON_CF_ACCOUNT : null),
  (e) => (codeOf(e) === 'ERR_SOURCE_LISTING_OVER_CAP' ? REASON_PAGE_CAP : null),
  // 20.
  (e) => (codeOf(e) === 'ERR_RUN_NOT_CONFIGURED' ? REASON_NOT_CONFIGURED : null),
];

/**
 * Classifies a run's error: `park` for a throttle anywhere in the chain, `warn` for a record that
 * was skipped or vanished, else `fail` with the first matching closed-list reason (default
 * `run failed`). Never throws.
 */
export function classifyFailure(error: unknown): Classification {
  const chain = errorChain(error);
  const digest = causeDigest(error);
  const innermost = [...chain].reverse().find((e) => codeOf(e) !== '');
  const code = innermost ? codeOf(innermost) : 'ERR_UNKNOWN';
  let reason: string = REASON_RUN_FAILED;
  outer: for (const branch of BRANCHES) {
    for (const e of chain) {
      const r = branch(e);
      if (r !== null) {
        reason = r;
        break outer;
      }
    }
  }
  if (chain.some(isThrottle)) return { disposition: 'park', reason, code, causeDigest: digest };
  if (chain.some(isWarn)) return { disposition: 'warn', reason, code, causeDigest: digest };
  return { disposition: 'fail', reason, code, causeDigest: digest };
}
