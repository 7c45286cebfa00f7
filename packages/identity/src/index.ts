/**
 * @coffer/identity: the people side of the Coffer engine, as functions over plain values (no HTTP
 * server, no storage): session tokens and what ends them, the session and CSRF cookies, the Origin
 * and double-submit checks, recovery codes (slow-hashed), single-use tokens for invites, first-owner
 * set-up links and step-up, email normalisation, passkey subjects, the relying party from
 * `CONSOLE_ORIGIN`, the passkey ceremonies (WebAuthn, on @simplewebauthn/server), OIDC sign-in
 * (relying party, on openid-client) with its group-to-role mapping, and SAML sign-in (service
 * provider, on @node-saml/node-saml). The engine stores what these return and wires them to
 * routes; docs/identity.md is the normative description.
 */

export {
  CSRF_COOKIE,
  CSRF_HEADER,
  clearedCookies,
  csrfCookie,
  csrfTokenFor,
  csrfTokenValid,
  originCheck,
  readCookie,
  SESSION_COOKIE,
  sessionCookie,
} from './cookies.ts';
export {
  IDENTITY_ERROR_CODES,
  IdentityError,
  type IdentityErrorCode,
  isIdentityError,
  type OidcRefusal,
  type PasskeyRefusal,
  type SamlRefusal,
  type SessionRefusal,
} from './errors.ts';
export {
  checkOidcConnection,
  decodeOidcTransaction,
  discoverOidcProvider,
  encodeOidcTransaction,
  type GroupRoleRule,
  newOidcTransactionKey,
  OIDC_DEFAULT_SCOPES,
  OIDC_DEFAULT_TIMEOUT_MS,
  OIDC_TRANSACTION_COOKIE,
  OIDC_TRANSACTION_TTL_MS,
  type OidcConnection,
  type OidcIdentity,
  type OidcProvider,
  type OidcTransaction,
  oidcCallback,
  oidcStart,
  oidcSubject,
  oidcTransactionCookie,
  roleForGroups,
} from './oidc.ts';
export {
  checkOneTimeToken,
  DEFAULT_ONE_TIME_TTL_MS,
  mintOneTimeToken,
  type OneTimePurpose,
  type OneTimeRecord,
  oneTimeTokenId,
} from './one-time-tokens.ts';
export {
  authenticationOptions,
  CEREMONY_TIMEOUT_MS,
  registrationOptions,
  type StoredPasskey,
  verifyAuthentication,
  verifyRegistration,
} from './passkeys.ts';
export { normaliseEmail, passkeySubject, type RelyingParty, relyingPartyOf } from './people.ts';
export {
  matchRecoveryCode,
  mintRecoveryCodes,
  normaliseRecoveryCode,
  RECOVERY_CODE_COUNT,
  type RecoveryVerifier,
} from './recovery-codes.ts';
export {
  checkSamlConnection,
  SAML_DEFAULT_CLOCK_SKEW_SECONDS,
  SAML_DEFAULT_EMAIL_ATTRIBUTES,
  SAML_MAX_CLOCK_SKEW_SECONDS,
  SAML_NAMEID_PERSISTENT,
  type SamlConnection,
  samlCertificateFingerprint,
  samlSubject,
} from './saml-connection.ts';
export { SAML_RESPONSE_MAX_CHARS, type SamlIdentity, samlAssertionConsumer } from './saml-consumer.ts';
export {
  fetchIdpMetadata,
  parseIdpMetadata,
  SAML_DEFAULT_TIMEOUT_MS,
  SAML_METADATA_MAX_BYTES,
  type SamlIdpMetadata,
  samlServiceProviderMetadata,
} from './saml-metadata.ts';
export { samlStart } from './saml-start.ts';
export {
  DEFAULT_SESSION_TTL_SECONDS,
  DEFAULT_TOKEN_SESSION_TTL_SECONDS,
  type MintSessionInput,
  mintSession,
  newSessionKey,
  recentlyAuthenticated,
  SESSION_KEY_BYTES,
  SESSION_TOKEN_TYPE,
  type SessionClaims,
  type SessionMethod,
  type SessionStanding,
  sessionRevoked,
  verifySession,
} from './session.ts';
