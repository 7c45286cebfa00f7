/**
 * Session tokens: what the `__Host-engine_session` cookie carries.
 *
 * A token is a compact JWS (HS256, `typ: coffer-session+jwt`, jose) over the session's id, subject,
 * email, sign-in method, issue and expiry times, the time of the last proof of presence (for
 * step-up) and the subject's session epoch when it was minted. It never carries a role: the engine
 * resolves the role from the subject on every request. The signing key lives only in the state
 * store; the engine reads it there for every verification (specification rule 4), so a key
 * rotated or a state store restored elsewhere invalidates every cookie at once.
 *
 * Revocation without a session table: logout and "sign out everywhere" bump the subject's epoch
 * and set its not-before to now; `sessionRevoked` refuses a token whose epoch differs or that was
 * issued before the not-before. Single sessions are ended by listing their id as ended.
 */
import { randomBytes } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import { IdentityError } from './errors.ts';

export const SESSION_TOKEN_TYPE = 'coffer-session+jwt';
/** Passkey, recovery-code, OIDC and SAML sessions: one working day unless configured. */
export const DEFAULT_SESSION_TTL_SECONDS = 8 * 60 * 60;
/** Token sessions (the admin bearer exchanged for a cookie): one hour unless configured. */
export const DEFAULT_TOKEN_SESSION_TTL_SECONDS = 60 * 60;
/** Bytes of a session signing key. */
export const SESSION_KEY_BYTES = 32;

export type SessionMethod = 'passkey' | 'recovery' | 'token' | 'oidc' | 'saml';
const METHODS: ReadonlySet<string> = new Set(['passkey', 'recovery', 'token', 'oidc', 'saml']);

export interface SessionClaims {
  /** The session's id (random, 128 bits, base64url). */
  sid: string;
  /** The authorisation key (rule 7); null for a token session. */
  subject: string | null;
  /** The verified email; null for a token session. */
  email: string | null;
  method: SessionMethod;
  /** Seconds since the epoch. */
  issuedAt: number;
  expiresAt: number;
  /** When the person last proved presence (sign-in or step-up), seconds since the epoch. */
  authAt: number;
  /** The subject's session epoch when this session was minted. */
  epoch: number;
}

export interface MintSessionInput {
  subject: string | null;
  email: string | null;
  method: SessionMethod;
  /** The subject's current session epoch (0 when it never signed out everywhere). */
  epoch: number;
  /** Lifetime in seconds (default by method: DEFAULT_SESSION_TTL_SECONDS or the token one). */
  ttlSeconds?: number;
  /** Last proof of presence (default: now). */
  authAt?: number;
  /** Milliseconds since the epoch (default Date.now()). */
  now?: number;
}

/** A new random session signing key (to be stored in the state store, never in a file or env). */
export function newSessionKey(): Uint8Array {
  return new Uint8Array(randomBytes(SESSION_KEY_BYTES));
}

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.byteLength < SESSION_KEY_BYTES)
    throw new IdentityError(
      'ERR_IDENTITY_INVALID_ARGUMENT',
      `session key must be at least ${SESSION_KEY_BYTES} bytes`,
    );
}

/** Mints a session token. Throws ERR_IDENTITY_INVALID_ARGUMENT for a bad key, method or lifetime. */
export async function mintSession(
  key: Uint8Array,
  input: MintSessionInput,
): Promise<{ token: string; claims: SessionClaims }> {
  checkKey(key);
  if (!METHODS.has(input.method))
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'unknown session method');
  if ((input.subject === null) !== (input.method === 'token'))
    throw new IdentityError(
      'ERR_IDENTITY_INVALID_ARGUMENT',
      'a token session has no subject, and every other session has one',
    );
  const ttl =
    input.ttlSeconds ??
    (input.method === 'token' ? DEFAULT_TOKEN_SESSION_TTL_SECONDS : DEFAULT_SESSION_TTL_SECONDS);
  if (!Number.isInteger(ttl) || ttl < 60 || ttl > 30 * 24 * 3600)
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'session lifetime must be 60 s to 30 days');
  if (!Number.isInteger(input.epoch) || input.epoch < 0)
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'session epoch must be a non-negative integer');
  const now = Math.floor((input.now ?? Date.now()) / 1000);
  const claims: SessionClaims = {
    sid: randomBytes(16).toString('base64url'),
    subject: input.subject,
    email: input.email,
    method: input.method,
    issuedAt: now,
    expiresAt: now + ttl,
    authAt: input.authAt ?? now,
    epoch: input.epoch,
  };
  const jwt = new SignJWT({
    sid: claims.sid,
    email: claims.email,
    method: claims.method,
    auth_at: claims.authAt,
    epoch: claims.epoch,
  })
    .setProtectedHeader({ alg: 'HS256', typ: SESSION_TOKEN_TYPE })
    .setIssuedAt(claims.issuedAt)
    .setExpirationTime(claims.expiresAt);
  if (claims.subject !== null) jwt.setSubject(claims.subject);
  return { token: await jwt.sign(key), claims };
}

const invalid = (refusal: 'malformed' | 'bad-signature' | 'expired' | 'not-yet-valid' | 'revoked') =>
  new IdentityError('ERR_IDENTITY_SESSION_INVALID', `session token refused (${refusal})`, { refusal });

/**
 * Verifies a session token's signature, type and lifetime and returns its claims. Throws
 * ERR_IDENTITY_SESSION_INVALID with `refusal` set; never echoes the token.
 */
export async function verifySession(
  key: Uint8Array,
  token: string,
  options: { now?: number } = {},
): Promise<SessionClaims> {
  checkKey(key);
  if (typeof token !== 'string' || token.length === 0 || token.length > 4096) throw invalid('malformed');
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms: ['HS256'],
      typ: SESSION_TOKEN_TYPE,
      currentDate: new Date(options.now ?? Date.now()),
      requiredClaims: ['iat', 'exp'],
    }));
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw invalid('expired');
    if (err instanceof joseErrors.JWSSignatureVerificationFailed) throw invalid('bad-signature');
    if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'iat')
      throw invalid('not-yet-valid');
    if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'nbf')
      throw invalid('not-yet-valid');
    throw invalid('malformed');
  }
  const { sid, email, method, auth_at: authAt, epoch, sub, iat, exp } = payload;
  if (
    typeof sid !== 'string' ||
    typeof method !== 'string' ||
    !METHODS.has(method) ||
    !(email === null || typeof email === 'string') ||
    typeof authAt !== 'number' ||
    typeof epoch !== 'number' ||
    typeof iat !== 'number' ||
    typeof exp !== 'number' ||
    !(sub === undefined || typeof sub === 'string') ||
    (sub === undefined) !== (method === 'token')
  )
    throw invalid('malformed');
  return {
    sid,
    subject: sub ?? null,
    email,
    method: method as SessionMethod,
    issuedAt: iat,
    expiresAt: exp,
    authAt,
    epoch,
  };
}

/** What the state store says about a subject's sessions (token sessions: the engine-wide values). */
export interface SessionStanding {
  /** The subject's current epoch: bumped by logout and sign-out everywhere. */
  epoch: number;
  /** Sessions issued before this (seconds since the epoch) are refused. */
  notBefore: number;
  /** Ids of single sessions ended early. */
  ended?: ReadonlySet<string>;
}

/** True when the session was ended: another epoch, issued before the not-before, or ended by id. */
export function sessionRevoked(claims: SessionClaims, standing: SessionStanding): boolean {
  return (
    claims.epoch !== standing.epoch ||
    claims.issuedAt < standing.notBefore ||
    standing.ended?.has(claims.sid) === true
  );
}

/** True when the session proved presence within `maxAgeSeconds` of `now` (ms). */
export function recentlyAuthenticated(
  claims: SessionClaims,
  maxAgeSeconds: number,
  now = Date.now(),
): boolean {
  return Math.floor(now / 1000) - claims.authAt <= maxAgeSeconds;
}
