/**
 * Typed errors of @coffer/audit.
 *
 * Every failure carries a stable `code` that callers switch on (never the message). Messages name
 * fields, JSON paths made of safe key names, and rule names, never a value: the values this
 * package handles are exactly the ones that might hold a secret pasted by mistake (a token in a
 * job id, a webhook URL in a detail field), so echoing one would defeat the redaction guard.
 *
 * A chain that fails verification is NOT an error: `verifyChain` and friends return a result
 * naming the first bad `seq` (the specification answers a break with a 200 result). Only
 * `assertChain` turns a failed result into `ERR_AUDIT_CHAIN_BROKEN`.
 */

/** The stable codes thrown by this package. */
export const AUDIT_ERROR_CODES = [
  'ERR_AUDIT_INVALID_EVENT',
  'ERR_AUDIT_UNKNOWN_ACTION',
  'ERR_AUDIT_SECRET_DETECTED',
  'ERR_AUDIT_DETAIL_TOO_LARGE',
  'ERR_AUDIT_BAD_AFTER_SEQ',
  'ERR_AUDIT_BAD_QUERY',
  'ERR_AUDIT_MALFORMED_DOCUMENT',
  'ERR_AUDIT_CHAIN_BROKEN',
  'ERR_AUDIT_STORE',
] as const;

/** One of {@link AUDIT_ERROR_CODES}. */
export type AuditErrorCode = (typeof AUDIT_ERROR_CODES)[number];

/** The exact text the specification requires in the feed's 400 body. */
export const AFTER_SEQ_ERROR = 'afterSeq must be a non-negative integer';

/** Base class of every error this package throws; switch on `code`. */
export class AuditError extends Error {
  readonly code: AuditErrorCode;
  /**
   * For `ERR_AUDIT_STORE`: the storage layer's own stable code (e.g. `ERR_STATE_UNAVAILABLE`) when
   * it had one of the form `ERR_[A-Z_]+`; never its message, which might quote a connection string.
   */
  readonly causeCode?: string;
  /** For `ERR_AUDIT_CHAIN_BROKEN`: the first seq that failed verification. */
  readonly firstBadSeq?: number;

  constructor(code: AuditErrorCode, message: string, extra?: { causeCode?: string; firstBadSeq?: number }) {
    super(message);
    this.name = 'AuditError';
    this.code = code;
    if (extra?.causeCode !== undefined) this.causeCode = extra.causeCode;
    if (extra?.firstBadSeq !== undefined) this.firstBadSeq = extra.firstBadSeq;
  }
}

/**
 * The specification's 400 body for a bad `afterSeq`: `{ error: 'afterSeq must be a non-negative
 * integer' }`. Thrown by `parseFeedQuery`; the engine sends `err.body` with status 400.
 */
export class AuditAfterSeqError extends AuditError {
  readonly body: { readonly error: typeof AFTER_SEQ_ERROR };

  constructor() {
    super('ERR_AUDIT_BAD_AFTER_SEQ', AFTER_SEQ_ERROR);
    this.name = 'AuditAfterSeqError';
    this.body = { error: AFTER_SEQ_ERROR };
  }
}

/** True when `e` is an {@link AuditError} (by shape, so it works across package copies). */
export function isAuditError(e: unknown): e is AuditError {
  return (
    e instanceof Error &&
    typeof (e as { code?: unknown }).code === 'string' &&
    (AUDIT_ERROR_CODES as readonly string[]).includes((e as unknown as { code: string }).code)
  );
}
