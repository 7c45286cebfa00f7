/**
 * Typed errors of @coffer/restore. Callers switch on `code` (never on the message or the class).
 * Each code carries the HTTP status the engine answers with (`status`), so the engine maps errors
 * in one place: 400 for a rejected request (the message is the exact `{ error }` text), 403 for the
 * approval gate (`restore not approved` carries `planHash`), 404, 409 for state conflicts and 429
 * (a plain JSON body, not problem+json) for an approve that comes too early.
 *
 * Security: messages are built from fixed sentences, field names, record positions, plan hashes
 * and target descriptions only. They never carry tokens (`cfConfig.token`, `mediaRestore.token`),
 * keys, connection strings or record bytes; the raw message of a dependency's error is never
 * repeated (its `code` is kept in `cause` for the engine's cause digest).
 */

/** Every code this package throws, with the HTTP status the engine answers with. */
export const RESTORE_ERROR_STATUS = {
  ERR_RESTORE_INVALID_REQUEST: 400,
  ERR_RESTORE_PLAN_TOO_OLD: 400,
  ERR_RESTORE_UNKNOWN_DESTINATION: 400,
  ERR_RESTORE_UNKNOWN_TARGET: 400,
  ERR_RESTORE_TARGET_MISMATCH: 400,
  ERR_RESTORE_OUTSIDE_ROOTS: 400,
  ERR_RESTORE_TARGET_NOT_ALLOWED: 400,
  ERR_RESTORE_TABLES_NOT_FOUND: 400,
  ERR_RESTORE_NO_SUBJECT: 403,
  ERR_RESTORE_SELF_APPROVAL: 403,
  ERR_RESTORE_NOT_APPROVED: 403,
  ERR_RESTORE_NOT_REQUESTER: 403,
  ERR_RESTORE_APPROVAL_NOT_FOUND: 404,
  ERR_RESTORE_PLAN_UNAVAILABLE: 409,
  ERR_RESTORE_PLAN_CHANGED: 409,
  ERR_RESTORE_TARGET_NOT_FRESH: 409,
  ERR_RESTORE_APPROVAL_CONFLICT: 409,
  ERR_RESTORE_APPROVAL_EXPIRED: 409,
  ERR_RESTORE_APPROVAL_TOO_EARLY: 429,
  ERR_RESTORE_INTERNAL: 500,
} as const;

export type RestoreErrorCode = keyof typeof RESTORE_ERROR_STATUS;

/** Every code, in documentation order. */
export const RESTORE_ERROR_CODES = Object.keys(RESTORE_ERROR_STATUS) as readonly RestoreErrorCode[];

export interface RestoreErrorOptions {
  /** The plan hash concerned (ERR_RESTORE_NOT_APPROVED carries it in the 403 body). */
  planHash?: string;
  /** Seconds until an early approve is accepted (ERR_RESTORE_APPROVAL_TOO_EARLY: `Retry-After`). */
  retryAfterSeconds?: number;
  /** The underlying error (kept for a cause digest; never rendered in the message). */
  cause?: unknown;
}

/** The one error class of @coffer/restore. `message` is the client-facing sentence. */
export class RestoreError extends Error {
  readonly code: RestoreErrorCode;
  /** HTTP status for the engine's error handler. */
  readonly status: number;
  readonly planHash: string | undefined;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: RestoreErrorCode, message: string, options: RestoreErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RestoreError';
    this.code = code;
    this.status = RESTORE_ERROR_STATUS[code];
    this.planHash = options.planHash;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /**
   * The JSON body the engine answers with: `{ error }`, plus `planHash` for the approval gate and
   * `retryAfterSeconds` for a too-early approve.
   */
  toJSON(): { error: string; planHash?: string; retryAfterSeconds?: number } {
    return {
      error: this.message,
      ...(this.planHash === undefined ? {} : { planHash: this.planHash }),
      ...(this.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: this.retryAfterSeconds }),
    };
  }
}

/** True when `e` is a RestoreError (optionally with the given code). */
export function isRestoreError(e: unknown, code?: RestoreErrorCode): e is RestoreError {
  return e instanceof RestoreError && (code === undefined || e.code === code);
}

/** The `code` of a dependency's error when it has a string one (for receipts and reasons). */
export function codeOf(e: unknown): string {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : 'ERR_UNKNOWN';
}
