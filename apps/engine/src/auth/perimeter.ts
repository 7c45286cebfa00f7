/**
 * Authentication method 1: the perimeter access JWT (header `perimeter-access-jwt-assertion`),
 * verified with jose against the key set at `https://<PERIMETER_ACCESS_TEAM_DOMAIN>/cdn-cgi/access/certs`.
 *
 * Security-relevant behaviour:
 * - algorithms RS256, ES256 and EdDSA only (never `none`, never HMAC: an HS256 token "signed" with
 *   the public key is refused before any key is used);
 * - issuer must be `https://<team domain>`, audience PERIMETER_ACCESS_AUD, `exp` required and
 *   checked (60 s clock tolerance);
 * - a verified email and a stable subject are required, so a service token (no email, empty
 *   subject) is refused; an explicit `email_verified: false` is refused;
 * - the caller's subject is `<issuer>#<sub>` (the issuer namespaces the user id);
 * - the key set is cached by jose (10 minutes, at most one refetch per 30 s on an unknown `kid`)
 *   and fetched only from the pinned https host without following redirects (jwks-fetch.ts).
 */
import { createRemoteJWKSet, customFetch, errors as joseErrors, jwtVerify } from 'jose';
import { pinnedFetch } from './jwks-fetch.ts';

export const PERIMETER_HEADER = 'perimeter-access-jwt-assertion';
const ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];

export interface PerimeterOptions {
  teamDomain: string;
  audience: string;
  /** Test-only: key-set URL on loopback instead of the team domain's certs endpoint. */
  jwksUrl?: string | undefined;
  /** Test-only: extra CA (PEM) trusted for the key-set fetch. */
  jwksCa?: string | undefined;
}

export interface PerimeterIdentity {
  subject: string;
  email: string;
  /** Seconds since the epoch of the perimeter sign-in (`iat`), for step-up freshness. */
  authenticatedAt: number;
}

/** Why a presented assertion was refused (logged as a coarse reason, never the token). */
export type PerimeterRefusal =
  | 'malformed'
  | 'expired'
  | 'bad-claims'
  | 'bad-signature'
  | 'unknown-key'
  | 'bad-algorithm'
  | 'no-email'
  | 'no-subject'
  | 'keys-unavailable';

export type PerimeterResult =
  | { ok: true; identity: PerimeterIdentity }
  | { ok: false; reason: PerimeterRefusal };

export interface PerimeterVerifier {
  verify(token: string): Promise<PerimeterResult>;
}

function refusalOf(err: unknown): PerimeterRefusal {
  if (err instanceof joseErrors.JWTExpired) return 'expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed) return 'bad-claims';
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad-signature';
  if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) {
    return 'unknown-key';
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed || err instanceof joseErrors.JOSENotSupported)
    return 'bad-algorithm';
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid) return 'malformed';
  return 'keys-unavailable';
}

/** Builds the verifier for one team domain and audience. Never throws from `verify`. */
export function createPerimeterVerifier(options: PerimeterOptions): PerimeterVerifier {
  const issuer = `https://${options.teamDomain}`;
  const url = new URL(options.jwksUrl ?? `${issuer}/cdn-cgi/access/certs`);
  const keys = createRemoteJWKSet(url, {
    timeoutDuration: 5000,
    cooldownDuration: 30_000,
    cacheMaxAge: 600_000,
    [customFetch]: pinnedFetch({ pinnedHost: url.host, ca: options.jwksCa }),
  });
  return {
    async verify(token) {
      if (token.length > 16 * 1024 || token.split('.').length !== 3)
        return { ok: false, reason: 'malformed' };
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer,
          audience: options.audience,
          algorithms: ALGORITHMS,
          requiredClaims: ['exp', 'iat', 'sub'],
          clockTolerance: 60,
        });
        const sub = typeof payload.sub === 'string' ? payload.sub.trim() : '';
        if (sub === '') return { ok: false, reason: 'no-subject' };
        const email = payload.email;
        if (
          typeof email !== 'string' ||
          !/^[^@\s]+@[^@\s]+$/.test(email) ||
          payload.email_verified === false
        ) {
          return { ok: false, reason: 'no-email' };
        }
        return {
          ok: true,
          identity: {
            subject: `${issuer}#${sub}`,
            email: email.toLowerCase(),
            authenticatedAt: payload.iat ?? 0,
          },
        };
      } catch (err) {
        return { ok: false, reason: refusalOf(err) };
      }
    },
  };
}
