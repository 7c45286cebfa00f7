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
  'ERR_IDENTITY_OIDC_REFUSED',
  'ERR_IDENTITY_OIDC_UNAVAILABLE',
  'ERR_IDENTITY_SAML_REFUSED',
  'ERR_IDENTITY_SAML_UNAVAILABLE',
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

/**
 * Why an OIDC sign-in was refused (ERR_IDENTITY_OIDC_REFUSED) or could not be attempted
 * (ERR_IDENTITY_OIDC_UNAVAILABLE): for logs and tests; the engine answers every one with the same
 * redirect (`?oidc=failed`). docs/identity.md, "OIDC sign-in (package)", says when each applies.
 */
export type OidcRefusal =
  // the transaction cookie
  | 'transaction-invalid'
  | 'transaction-expired'
  | 'connection-mismatch'
  // the authorization response
  | 'state-mismatch'
  | 'issuer-mismatch'
  | 'provider-error'
  | 'response-invalid'
  // the code exchange (the provider's invalid_grant covers a replayed, expired or foreign code
  // and a PKCE mismatch alike)
  | 'code-rejected'
  | 'exchange-failed'
  // the ID token
  | 'nonce-mismatch'
  | 'audience-mismatch'
  | 'token-expired'
  | 'token-time-invalid'
  | 'id-token-invalid'
  // the person
  | 'email-missing'
  | 'email-unverified'
  | 'email-domain'
  // the provider itself (ERR_IDENTITY_OIDC_UNAVAILABLE)
  | 'provider-unreachable'
  | 'metadata-invalid';

/**
 * Why a SAML sign-in was refused (ERR_IDENTITY_SAML_REFUSED) or the identity provider's metadata
 * could not be used (ERR_IDENTITY_SAML_UNAVAILABLE): for logs and tests; the engine answers every
 * one with the same redirect (`?saml=failed`). docs/identity.md, "SAML sign-in (package)", says
 * when each applies.
 */
export type SamlRefusal =
  // the response as a document
  | 'malformed'
  | 'status'
  // the signature
  | 'unsigned'
  | 'bad-signature'
  | 'weak-algorithm'
  // the assertion's checks
  | 'wrong-issuer'
  | 'wrong-audience'
  | 'wrong-recipient'
  | 'expired'
  | 'not-yet-valid'
  | 'in-response-to'
  // the person
  | 'nameid-format'
  | 'email-missing'
  | 'email-domain'
  // the provider's metadata (ERR_IDENTITY_SAML_UNAVAILABLE)
  | 'metadata-unreachable'
  | 'metadata-invalid';

export class IdentityError extends Error {
  readonly code: IdentityErrorCode;
  /**
   * For ERR_IDENTITY_SESSION_INVALID, ERR_IDENTITY_PASSKEY_REFUSED and the two OIDC and two SAML
   * codes: which check refused (the OIDC or SAML reason code).
   */
  readonly refusal: SessionRefusal | PasskeyRefusal | OidcRefusal | SamlRefusal | undefined;

  constructor(
    code: IdentityErrorCode,
    message: string,
    options: { refusal?: SessionRefusal | PasskeyRefusal | OidcRefusal | SamlRefusal } = {},
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
