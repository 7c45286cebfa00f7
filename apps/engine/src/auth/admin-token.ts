/**
 * Authentication method 3: the bare admin token (`Authorization: Bearer <ADMIN_TOKEN>`), the
 * all-or-nothing owner break-glass with no email and no subject.
 *
 * Security-relevant behaviour (specification "Authentication", rules 5 and 6):
 * - the comparison is constant-time over SHA-256 digests of the presented and configured values,
 *   so neither the token's length nor a matching prefix leaks through timing;
 * - the path is off when ADMIN_TOKEN_DISABLED is set, when ADMIN_TOKEN is unset, or when an owner
 *   retired it (a durable latch in the state store); a failure to read that latch refuses the
 *   token (fail closed);
 * - only the digest of the configured token is kept after start-up.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

export interface AdminTokenChecker {
  /** Whether a token is configured and not disabled by configuration. */
  readonly configured: boolean;
  /** Constant-time check of a presented token against the configured one. */
  matches(presented: string): boolean;
}

/** Builds the checker; `token` undefined or `disabled` true turn the path off. */
export function createAdminTokenChecker(token: string | undefined, disabled: boolean): AdminTokenChecker {
  const digest = token !== undefined && !disabled ? sha256(token) : undefined;
  return {
    configured: digest !== undefined,
    matches(presented) {
      if (digest === undefined) return false;
      return timingSafeEqual(sha256(presented), digest);
    },
  };
}

/**
 * The bearer value of an Authorization header, `null` when the header is absent, or `undefined`
 * when it is present but not a well-formed `Bearer <value>` (a present-but-invalid credential).
 */
export function bearerOf(header: string | string[] | undefined): string | null | undefined {
  if (header === undefined) return null;
  if (Array.isArray(header)) return undefined;
  const m = /^Bearer +(\S+) *$/i.exec(header);
  return m ? m[1] : undefined;
}
