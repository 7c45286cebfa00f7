/**
 * Who a person is to the engine: a normalised email, the subject derived from it for passkey
 * callers (rule 7: the subject, never the email, is the authorisation key, and each sign-in method
 * has its own namespace), and the relying party that passkey ceremonies are bound to.
 */
import { IdentityError } from './errors.ts';

const EMAIL = /^[^\s@"<>()[\]\\,;:]+@[^\s@"<>()[\]\\,;:]+\.[^\s@"<>()[\]\\,;:]+$/;

/**
 * Trims and lower-cases an email and checks its shape (one `@`, a dot in the domain, no spaces or
 * quoting, at most 254 characters). Throws ERR_IDENTITY_INVALID_ARGUMENT.
 */
export function normaliseEmail(input: unknown): string {
  if (typeof input !== 'string')
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'email must be a string');
  const email = input.trim().toLowerCase();
  if (email.length === 0 || email.length > 254 || !EMAIL.test(email))
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'email is not an address');
  return email;
}

/** The subject of a passkey caller bound to `email` (its own namespace: `passkey:<email>`). */
export function passkeySubject(email: string): string {
  return `passkey:${normaliseEmail(email)}`;
}

/** The WebAuthn relying party every ceremony is bound to. */
export interface RelyingParty {
  /** The registrable domain: `CONSOLE_ORIGIN`'s host name. */
  id: string;
  /** The exact origin the browser must report: `CONSOLE_ORIGIN`. */
  origin: string;
  name: string;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The relying party from `CONSOLE_ORIGIN`, never from the client. Throws ERR_IDENTITY_NOT_CONFIGURED
 * when it is unset (the engine answers 501 `passkey_not_configured`) and
 * ERR_IDENTITY_INVALID_ARGUMENT when it is not a bare origin: `https://host[:port]`, or `http://`
 * on a loopback host only (browsers treat those as secure contexts).
 */
export function relyingPartyOf(consoleOrigin: string | undefined, name = 'Coffer'): RelyingParty {
  if (consoleOrigin === undefined || consoleOrigin === '')
    throw new IdentityError(
      'ERR_IDENTITY_NOT_CONFIGURED',
      'CONSOLE_ORIGIN is not set: passkeys are not configured',
    );
  let url: URL;
  try {
    url = new URL(consoleOrigin);
  } catch {
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'CONSOLE_ORIGIN is not a URL');
  }
  if (url.origin !== consoleOrigin)
    throw new IdentityError(
      'ERR_IDENTITY_INVALID_ARGUMENT',
      'CONSOLE_ORIGIN must be a bare origin (scheme, host and port; no path, no trailing slash)',
    );
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname)))
    throw new IdentityError(
      'ERR_IDENTITY_INVALID_ARGUMENT',
      'CONSOLE_ORIGIN must be https (http only on loopback)',
    );
  return { id: url.hostname.replace(/^\[|\]$/g, ''), origin: url.origin, name };
}
