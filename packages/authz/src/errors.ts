/**
 * Typed errors of @coffer/authz.
 *
 * Every failure carries a stable `code` that callers switch on (never the message). Messages name
 * only members of the closed role and capability sets, never a caller-supplied value: a role name,
 * capability string or subject that arrives from a request could carry anything, including a
 * secret pasted by mistake, so it is never echoed.
 */

/** The stable codes thrown by this package. */
export const AUTHZ_ERROR_CODES = [
  'ERR_AUTHZ_UNKNOWN_ROLE',
  'ERR_AUTHZ_UNKNOWN_CAPABILITY',
  'ERR_AUTHZ_NOT_CONFERRABLE',
  'ERR_AUTHZ_INVALID_CUSTOM_ROLE',
  'ERR_AUTHZ_ROLE_NAME_TAKEN',
  'ERR_AUTHZ_FORBIDDEN',
  'ERR_AUTHZ_OWNER_ONLY',
] as const;

/** One of {@link AUTHZ_ERROR_CODES}. */
export type AuthzErrorCode = (typeof AUTHZ_ERROR_CODES)[number];

/** Base class of every error this package throws; switch on `code`. */
export class AuthzError extends Error {
  readonly code: AuthzErrorCode;

  constructor(code: AuthzErrorCode, message: string) {
    super(message);
    this.name = 'AuthzError';
    this.code = code;
  }
}

/** The specification's 403 body: `{ error: 'forbidden', required, have }`. */
export interface ForbiddenBody {
  readonly error: 'forbidden';
  /** The capability the route gates on, or `'owner'` on an owner-only route. */
  readonly required: string;
  /** The caller's built-in role; a custom-role caller shows the viewer floor. */
  readonly have: string;
}

/**
 * Thrown by the `require*` / `assert*` helpers when the caller lacks authority. `body` is the
 * exact 403 body the engine sends, so the engine's error handler maps it without re-deriving it.
 * Codes: `ERR_AUTHZ_FORBIDDEN` (capability missing) or `ERR_AUTHZ_OWNER_ONLY` (owner required).
 */
export class AuthzForbiddenError extends AuthzError {
  readonly body: ForbiddenBody;

  constructor(code: 'ERR_AUTHZ_FORBIDDEN' | 'ERR_AUTHZ_OWNER_ONLY', body: ForbiddenBody) {
    super(
      code,
      code === 'ERR_AUTHZ_OWNER_ONLY'
        ? `only an owner may do this (caller holds ${body.have})`
        : `capability ${body.required} required (caller holds ${body.have})`,
    );
    this.name = 'AuthzForbiddenError';
    this.body = body;
  }
}
