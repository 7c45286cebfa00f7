/**
 * Typed errors of @coffer/identity. Callers switch on `code`, never on messages. Messages never
 * carry a token, a code, a key or a hash: only what kind of thing failed and why.
 */

export const IDENTITY_ERROR_CODES = [
  'ERR_IDENTITY_INVALID_ARGUMENT',
  'ERR_IDENTITY_NOT_CONFIGURED',
  'ERR_IDENTITY_SESSION_INVALID',
  'ERR_IDENTITY_INVITE_INVALID',
  'ERR_IDENTITY_RECOVERY_CODE_INVALID',
  'ERR_IDENTITY_PASSKEY_REFUSED',
] as const;

export type IdentityErrorCode = (typeof IDENTITY_ERROR_CODES)[number];

/** Why a presented session token was refused (for logs and tests; the HTTP answer is one 401). */
export type SessionRefusal = 'malformed' | 'bad-signature' | 'expired' | 'not-yet-valid' | 'revoked';

/** Why a passkey ceremony's answer was refused (for logs and tests; the HTTP answer does not say). */
export type PasskeyRefusal =
  | 'malformed'
  | 'challenge'
  | 'origin'
  | 'rp-id'
  | 'user-verification'
  | 'signature'
  | 'counter'
  | 'unknown-credential';

export class IdentityError extends Error {
  readonly code: IdentityErrorCode;
  /** For ERR_IDENTITY_SESSION_INVALID and ERR_IDENTITY_PASSKEY_REFUSED: which check refused. */
  readonly refusal: SessionRefusal | PasskeyRefusal | undefined;

  constructor(
    code: IdentityErrorCode,
    message: string,
    options: { refusal?: SessionRefusal | PasskeyRefusal } = {},
  ) {
    super(message);
    this.name = 'IdentityError';
    this.code = code;
    this.refusal = options.refusal;
  }
}

/** True when `e` is an IdentityError (by shape, so it survives bundling), optionally of `code`. */
export function isIdentityError(e: unknown, code?: IdentityErrorCode): e is IdentityError {
  const c = (e as { code?: unknown } | null)?.code;
  return (
    typeof c === 'string' &&
    (IDENTITY_ERROR_CODES as readonly string[]).includes(c) &&
    (code === undefined || c === code)
  );
}
