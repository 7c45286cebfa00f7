/**
 * What the passkey routes (passkeys.ts) and the step-up routes (stepup.ts) share: the relying party
 * or the 501 answer, the challenge a browser answer claims, the stored passkey in the shape the
 * ceremonies take, and the single-use record that keeps a ceremony's challenge until `finish`.
 */
import { type RelyingParty, relyingPartyOf, type StoredPasskey } from '@coffer/identity';
import type { IdentityRepository, PasskeyRecord } from '@coffer/state';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** How long a ceremony's challenge is kept (the browser's own timeout is the same). */
export const CEREMONY_MS = 5 * 60 * 1000;

/**
 * The relying party from CONSOLE_ORIGIN, or null after the 501 (the specification's two bodies:
 * `{ ok: false, reason }` for sign-in ceremonies, `{ error }` for step-up).
 */
export function relyingPartyOr501(
  app: FastifyInstance,
  reply: FastifyReply,
  kind: 'signin' | 'stepup',
): RelyingParty | null {
  try {
    return relyingPartyOf(app.config.consoleOrigin);
  } catch {
    void reply
      .code(501)
      .send(
        kind === 'signin'
          ? { ok: false, reason: 'passkey_not_configured' }
          : { error: 'passkey_not_configured' },
      );
    return null;
  }
}

/** The challenge a browser answer claims (only a lookup key: the verification checks it). */
export function claimedChallenge(credential: unknown): string | null {
  const text = (credential as { response?: { clientDataJSON?: unknown } } | null)?.response?.clientDataJSON;
  if (typeof text !== 'string' || text.length > 4096) return null;
  try {
    const c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as { challenge?: unknown };
    return typeof c.challenge === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(c.challenge)
      ? c.challenge
      : null;
  } catch {
    return null;
  }
}

/** A stored passkey as the ceremonies take it. */
export const storedPasskey = (p: PasskeyRecord): StoredPasskey => ({
  id: p.id,
  publicKey: p.publicKey,
  counter: p.counter,
  transports: p.transports,
});

/** Keeps a ceremony's challenge as a single-use record (`purpose`, bound to `boundTo`) until `finish`. */
export function rememberChallenge(
  identity: IdentityRepository,
  challenge: string,
  purpose: string,
  boundTo: string,
  verifier = '-',
): Promise<void> {
  return identity.putToken({
    id: challenge,
    purpose,
    boundTo,
    verifier,
    expiresAt: Date.now() + CEREMONY_MS,
  });
}
