/**
 * The session and CSRF cookies, the Origin check and the double-submit token check
 * (specification "Origin and CSRF checks").
 *
 * Both cookies are `__Host-` prefixed (the browser then insists on `Secure`, `Path=/` and no
 * `Domain`, so no sibling host can set or shadow them), `HttpOnly` and `SameSite=Strict`. The
 * console reads the CSRF value from `GET /admin/whoami`, never from the cookie, so the cookie need
 * not be readable by scripts.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { IdentityError } from './errors.ts';

export const SESSION_COOKIE = '__Host-engine_session';
export const CSRF_COOKIE = '__Host-engine_csrf';
export const CSRF_HEADER = 'x-engine-csrf';

const COOKIE_VALUE = /^[A-Za-z0-9._~-]*$/;

function cookie(name: string, value: string, maxAgeSeconds: number): string {
  if (!COOKIE_VALUE.test(value))
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'cookie values are base64url or JWS text only');
  return `${name}=${value}; Path=/; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}; Secure; HttpOnly; SameSite=Strict`;
}

/** `Set-Cookie` value carrying a session token for `maxAgeSeconds`. */
export function sessionCookie(token: string, maxAgeSeconds: number): string {
  return cookie(SESSION_COOKIE, token, maxAgeSeconds);
}

/** `Set-Cookie` value carrying the double-submit CSRF token. */
export function csrfCookie(value: string, maxAgeSeconds: number): string {
  return cookie(CSRF_COOKIE, value, maxAgeSeconds);
}

/** `Set-Cookie` values that remove both cookies (logout, a refused session). */
export function clearedCookies(): string[] {
  return [cookie(SESSION_COOKIE, '', 0), cookie(CSRF_COOKIE, '', 0)];
}

/**
 * Reads cookie `name` from a `Cookie` header. `present` is true when the name appears at all;
 * `value` is null when it is absent or appears more than once (a second cookie of the same name
 * is a shadowing attempt: the caller treats it as present but invalid, never as absent).
 */
export function readCookie(
  header: string | undefined,
  name: string,
): { present: boolean; value: string | null } {
  if (typeof header !== 'string' || header.length === 0) return { present: false, value: null };
  let found: string | null = null;
  let count = 0;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    count++;
    found = part.slice(eq + 1).trim();
  }
  if (count === 0) return { present: false, value: null };
  return { present: true, value: count === 1 ? found : null };
}

/** The CSRF token paired with session `sid` (HMAC-SHA256 under the session key, base64url). */
export function csrfTokenFor(key: Uint8Array, sid: string): string {
  return createHmac('sha256', key).update(`coffer-csrf\u0000${sid}`).digest('base64url');
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The double-submit check: the `x-engine-csrf` header equals the `__Host-engine_csrf` cookie and
 * both equal the token of this session (so a cookie planted without the session is useless).
 */
export function csrfTokenValid(
  header: string | undefined,
  cookieValue: string | null,
  expected: string,
): boolean {
  if (typeof header !== 'string' || header.length === 0 || cookieValue === null) return false;
  return sameText(header, cookieValue) && sameText(header, expected);
}

/**
 * The Origin check of a request on a cookie session: `exempt` for GET, HEAD and OPTIONS; `ok` when
 * `Origin` is exactly `consoleOrigin`; `failed` otherwise (a missing Origin fails; so does any
 * request when no console origin is configured).
 */
export function originCheck(
  method: string,
  origin: string | undefined,
  consoleOrigin: string | undefined,
): 'exempt' | 'ok' | 'failed' {
  const m = method.toUpperCase();
  if (m === 'GET' || m === 'HEAD' || m === 'OPTIONS') return 'exempt';
  if (consoleOrigin === undefined || typeof origin !== 'string') return 'failed';
  return origin === consoleOrigin ? 'ok' : 'failed';
}
