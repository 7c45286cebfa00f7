/**
 * Pull credential grants (specification "Pull credential grant", "Pull credentials", Limits):
 * minting, lifetimes, the redacted console view, and the presentation check used by the pull
 * endpoints.
 *
 * - client id `dpc_` + base64url of 16 random bytes (a non-secret lookup label);
 * - secret `dps_` + base64url of 24 random bytes (192 bits), returned once at mint and stored only
 *   as its verifier: lower-case hex SHA-384 (96 characters) of the whole secret string;
 * - one active grant per scope: minting again REPLACES the scope's grant (the old credential stops
 *   working at once; the reply says `replaced: true`). A refusal with 409 would leave an owner who
 *   lost a secret no way to rotate it short of revoke-then-mint; replacement is that in one step;
 * - lifetimes (seconds): diagnostics default 72 h, max 7 d; audit-feed default 90 d, max 365 d;
 *   metrics (not tabled by the specification) default 90 d, max 365 d, like the feed, because a
 *   scraper is long-lived; a requested value is floored and clamped to [60 s, max].
 *
 * Presentation (`Authorization: Bearer <client_id>.<secret>`, split on the first dot) is checked in
 * the specification's order: grant active for the scope; not expired; client id matches; secret has
 * prefix `dps_`; SHA-384 of the secret equals the stored verifier in constant time. The result
 * names the failed step for the log only; every failure is answered the same 401.
 */
import { constantTimeEqual, fromHex, randomBytes, sha384, toBase64Url, toHex } from '@coffer/crypto';
import type { PullCredential, PullScope, State } from '@coffer/state';

export const PULL_SCOPES: readonly PullScope[] = ['diagnostics', 'audit-feed', 'metrics'];
export const MIN_LIFETIME_SECONDS = 60;
const HOUR = 3600;
const DAY = 24 * HOUR;
export const LIFETIMES: Record<PullScope, { defaultSeconds: number; maxSeconds: number }> = {
  diagnostics: { defaultSeconds: 72 * HOUR, maxSeconds: 7 * DAY },
  'audit-feed': { defaultSeconds: 90 * DAY, maxSeconds: 365 * DAY },
  metrics: { defaultSeconds: 90 * DAY, maxSeconds: 365 * DAY },
};
export const CLIENT_ID_PREFIX = 'dpc_';
export const SECRET_PREFIX = 'dps_';
export const SECRET_BYTES = 24;
export const CLIENT_ID_BYTES = 16;

/** The lifetime a request gets: default when absent, else floored and clamped to [60 s, max]. */
export function lifetimeFor(scope: PullScope, requested: number | undefined): number {
  const { defaultSeconds, maxSeconds } = LIFETIMES[scope];
  if (requested === undefined || !Number.isFinite(requested)) return defaultSeconds;
  return Math.min(maxSeconds, Math.max(MIN_LIFETIME_SECONDS, Math.floor(requested)));
}

/** Hex SHA-384 of the secret string (the stored verifier). */
export function verifierOf(secret: string): string {
  return toHex(sha384(new TextEncoder().encode(secret)));
}

export interface MintedCredential {
  scope: PullScope;
  clientId: string;
  /** Shown once; never stored, logged or audited. */
  secret: string;
  expiresAt: string;
  lifetimeSeconds: number;
  grantedBy: string | null;
  replaced: boolean;
}

/** Mints and stores the scope's grant (replacing any). Throws the store's errors. */
export async function mintCredential(
  state: State,
  scope: PullScope,
  requestedLifetime: number | undefined,
  grantedBy: string | null,
  now: Date = new Date(),
): Promise<MintedCredential> {
  const clientId = CLIENT_ID_PREFIX + toBase64Url(randomBytes(CLIENT_ID_BYTES));
  const secret = SECRET_PREFIX + toBase64Url(randomBytes(SECRET_BYTES));
  const lifetimeSeconds = lifetimeFor(scope, requestedLifetime);
  const expiresAt = new Date(now.getTime() + lifetimeSeconds * 1000).toISOString();
  const previous = await state.credentials.replace({
    scope,
    clientId,
    verifier: verifierOf(secret),
    grantedBy,
    grantedAt: now.toISOString(),
    expiresAt,
  });
  return { scope, clientId, secret, expiresAt, lifetimeSeconds, grantedBy, replaced: previous !== null };
}

/** One scope in the console view: never the secret, never the verifier. */
export interface CredentialView {
  scope: PullScope;
  active: boolean;
  clientId: string | null;
  grantedBy: string | null;
  grantedAt: string | null;
  expiresAt: string | null;
  expired: boolean;
  /** Last pull timestamps (at most 50), newest last. */
  pulls: string[];
  lastPullAt: string | null;
}

export function credentialView(scope: PullScope, grant: PullCredential | null, now: Date): CredentialView {
  if (!grant) {
    return {
      scope,
      active: false,
      clientId: null,
      grantedBy: null,
      grantedAt: null,
      expiresAt: null,
      expired: false,
      pulls: [],
      lastPullAt: null,
    };
  }
  const expired = Date.parse(grant.expiresAt) <= now.getTime();
  return {
    scope,
    active: !expired,
    clientId: grant.clientId,
    grantedBy: grant.grantedBy,
    grantedAt: grant.grantedAt,
    expiresAt: grant.expiresAt,
    expired,
    pulls: [...grant.pulls].slice(-50),
    lastPullAt: grant.pulls.at(-1) ?? null,
  };
}

/** Why a presentation failed (for the log only; the reply is always the same 401). */
export type PullAuthFailure =
  | 'no-credential'
  | 'malformed'
  | 'no-grant'
  | 'expired'
  | 'client-id-mismatch'
  | 'secret-prefix'
  | 'secret-mismatch';

export type PullAuthResult = { ok: true; grant: PullCredential } | { ok: false; reason: PullAuthFailure };

/** `<client_id>.<secret>` from an Authorization header, split on the first dot. */
export function parsePresentation(
  header: string | string[] | undefined,
): { clientId: string; secret: string } | PullAuthFailure {
  if (header === undefined) return 'no-credential';
  if (Array.isArray(header)) return 'malformed';
  const m = /^Bearer +(\S+) *$/i.exec(header);
  if (!m) return 'malformed';
  const value = m[1]!;
  const dot = value.indexOf('.');
  if (dot <= 0 || dot === value.length - 1) return 'malformed';
  return { clientId: value.slice(0, dot), secret: value.slice(dot + 1) };
}

/**
 * Checks a presentation against the scope's grant, in the specification's order. Returns the
 * grant or the failed step. Throws when the grant cannot be read (the caller answers 503).
 */
export async function checkPresentation(
  state: State,
  scope: PullScope,
  header: string | string[] | undefined,
  now: Date = new Date(),
): Promise<PullAuthResult> {
  const presented = parsePresentation(header);
  const grant = await state.credentials.get(scope);
  if (!grant) return { ok: false, reason: 'no-grant' };
  if (typeof presented === 'string') return { ok: false, reason: presented };
  if (!(Date.parse(grant.expiresAt) > now.getTime())) return { ok: false, reason: 'expired' };
  const enc = new TextEncoder();
  if (!constantTimeEqual(enc.encode(presented.clientId), enc.encode(grant.clientId))) {
    return { ok: false, reason: 'client-id-mismatch' };
  }
  if (!presented.secret.startsWith(SECRET_PREFIX)) return { ok: false, reason: 'secret-prefix' };
  let stored: Uint8Array;
  try {
    stored = fromHex(grant.verifier);
  } catch {
    return { ok: false, reason: 'secret-mismatch' };
  }
  if (!constantTimeEqual(sha384(enc.encode(presented.secret)), stored)) {
    return { ok: false, reason: 'secret-mismatch' };
  }
  return { ok: true, grant };
}
