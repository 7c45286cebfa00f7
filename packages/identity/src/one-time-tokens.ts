/**
 * Single-use tokens that authorise one thing once: an owner's invite to register a passkey for
 * one email, the first-owner set-up link mailed to the deploy-pinned address, and the step-up
 * token a caller presents in `x-engine-stepup`.
 *
 * A token is `<prefix><id>.<secret>`: the id (96 bits) finds the stored record, the secret (256
 * bits) proves possession. Only SHA-256 of the secret is stored (a secret of 256 random bits needs
 * no slow hash), with the purpose, what it is bound to (an email, or a session id for step-up) and
 * the expiry. Single use is the store's part: it deletes the record in the same write that acts on
 * it. Checks compare in constant time and every refusal is one error code (the caller answers one
 * generic status, so a probe learns nothing about which part failed).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { IdentityError } from './errors.ts';

export type OneTimePurpose = 'invite' | 'first-owner' | 'step-up';

const PREFIX: Record<OneTimePurpose, string> = { invite: 'cfi_', 'first-owner': 'cfo_', 'step-up': 'cfs_' };
/** Lifetimes unless the caller sets one: invites 7 days, set-up links 24 hours, step-up 5 minutes. */
export const DEFAULT_ONE_TIME_TTL_MS: Record<OneTimePurpose, number> = {
  invite: 7 * 24 * 3600 * 1000,
  'first-owner': 24 * 3600 * 1000,
  'step-up': 5 * 60 * 1000,
};

/** What the store keeps (no secret in it). */
export interface OneTimeRecord {
  id: string;
  purpose: OneTimePurpose;
  /** The normalised email (invite, first-owner) or the session id (step-up) the token is for. */
  boundTo: string;
  /** SHA-256 of the secret, base64url. */
  verifier: string;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

const digest = (secret: string) => createHash('sha256').update(secret).digest('base64url');

/** Mints a token for `purpose` bound to `boundTo`; returns the token (shown once) and the record to store. */
export function mintOneTimeToken(input: {
  purpose: OneTimePurpose;
  boundTo: string;
  ttlMs?: number;
  now?: number;
}): { token: string; record: OneTimeRecord } {
  if (!(input.purpose in PREFIX))
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'unknown token purpose');
  if (typeof input.boundTo !== 'string' || input.boundTo.length === 0)
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'a one-time token must be bound to something');
  const ttl = input.ttlMs ?? DEFAULT_ONE_TIME_TTL_MS[input.purpose];
  if (!Number.isInteger(ttl) || ttl < 1000 || ttl > 30 * 24 * 3600 * 1000)
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'token lifetime must be 1 s to 30 days');
  const id = randomBytes(12).toString('base64url');
  const secret = randomBytes(32).toString('base64url');
  return {
    token: `${PREFIX[input.purpose]}${id}.${secret}`,
    record: {
      id,
      purpose: input.purpose,
      boundTo: input.boundTo,
      verifier: digest(secret),
      expiresAt: (input.now ?? Date.now()) + ttl,
    },
  };
}

/** The record id of a token of `purpose` (to look the record up), or null when it is not one. */
export function oneTimeTokenId(token: unknown, purpose: OneTimePurpose): string | null {
  if (typeof token !== 'string' || token.length > 200) return null;
  const prefix = PREFIX[purpose];
  if (!token.startsWith(prefix)) return null;
  const dot = token.indexOf('.', prefix.length);
  if (dot < 0) return null;
  const id = token.slice(prefix.length, dot);
  return /^[A-Za-z0-9_-]{16}$/.test(id) ? id : null;
}

/**
 * Checks `token` against its stored `record`: the purpose, the binding (`boundTo` must equal the
 * record's), the secret and the expiry. Throws ERR_IDENTITY_INVITE_INVALID for any mismatch.
 */
export function checkOneTimeToken(
  token: unknown,
  record: OneTimeRecord | null | undefined,
  expect: { purpose: OneTimePurpose; boundTo: string; now?: number },
): void {
  const refuse = () => new IdentityError('ERR_IDENTITY_INVITE_INVALID', `${expect.purpose} token refused`);
  const id = oneTimeTokenId(token, expect.purpose);
  if (id === null || record == null || record.id !== id || record.purpose !== expect.purpose) throw refuse();
  const secret = (token as string).slice((token as string).indexOf('.') + 1);
  const want = Buffer.from(record.verifier);
  const got = Buffer.from(digest(secret));
  const secretOk = want.length === got.length && timingSafeEqual(want, got);
  const boundOk = record.boundTo === expect.boundTo;
  if (!secretOk || !boundOk || (expect.now ?? Date.now()) >= record.expiresAt) throw refuse();
}
