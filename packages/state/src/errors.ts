/**
 * Errors of @coffer/state. Every failure leaving the package is a `StateError` with a stable
 * `code`; callers switch on `code`. Messages are our own sentences: they never carry a
 * connection-string password, a stored secret or a raw driver message (driver messages can echo
 * values); the driver's own error code (e.g. `SQLITE_BUSY`, PostgreSQL SQLSTATE `28P01`) is kept in
 * `driverCode` for diagnosis.
 */
import type { JobPrecondition } from './api.ts';

export const STATE_ERROR_CODES = [
  'ERR_STATE_UNAVAILABLE',
  'ERR_STATE_PRECONDITION',
  'ERR_STATE_CONFLICT',
  'ERR_STATE_MIGRATION',
  'ERR_STATE_NOT_FOUND',
  'ERR_STATE_INVALID',
  'ERR_STATE_CORRUPT',
  'ERR_STATE_INVARIANT',
  'ERR_STATE_CLOSED',
  'ERR_STATE_LEASE_LOST',
] as const;

export type StateErrorCode = (typeof STATE_ERROR_CODES)[number];

export class StateError extends Error {
  readonly code: StateErrorCode;
  /** The driver's error code (SQLite result code name or PostgreSQL SQLSTATE), when one caused it. */
  readonly driverCode: string | undefined;
  /** Set only for ERR_STATE_PRECONDITION: the specification's precondition object. */
  readonly precondition: JobPrecondition | undefined;

  constructor(
    code: StateErrorCode,
    message: string,
    extra?: { driverCode?: string | undefined; precondition?: JobPrecondition },
  ) {
    super(message);
    this.name = 'StateError';
    this.code = code;
    this.driverCode = extra?.driverCode;
    this.precondition = extra?.precondition;
  }
}

/** True when `e` is a StateError with one of the given codes (any code when none given). */
export function isStateError(e: unknown, ...codes: StateErrorCode[]): e is StateError {
  return e instanceof StateError && (codes.length === 0 || codes.includes(e.code));
}
