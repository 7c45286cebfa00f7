/**
 * Cookie sessions in the state store (docs/identity.md): the signing key, read from the store on
 * every verification (specification rule 4), and each subject's standing (epoch and not-before),
 * which logout and "sign out everywhere" move so every earlier session of that subject is refused.
 * Token sessions (the admin bearer exchanged for a cookie) share one standing.
 *
 * Security-relevant behaviour: the key is created once (insert-if-absent, so two engines starting
 * together agree on one) and never leaves the store: not in a log line, an error, a bundle or an
 * audit row. A store that cannot be read refuses the session (fail closed).
 */
import { createHash } from 'node:crypto';
import {
  csrfTokenFor,
  type MintSessionInput,
  mintSession,
  newSessionKey,
  type SessionClaims,
  type SessionStanding,
  sessionRevoked,
  verifySession,
} from '@coffer/identity';
import type { State } from '@coffer/state';

const KEY_SETTING = 'identity.session-key';
const STANDING_PREFIX = 'identity.standing.';
/** The standing all token sessions share. */
const TOKEN_STANDING = '~token-sessions';
/** Sessions issued before this (seconds) are refused, whoever holds them ("terminate all"). */
const ALL_NOT_BEFORE = 'identity.all-not-before';
/** Single sessions ended early: `identity.ended.<sid>`. */
const ENDED_PREFIX = 'identity.ended.';

interface StoredStanding {
  epoch: number;
  notBefore: number;
}

/** The settings key of a subject's standing (a digest: subjects are long and carry emails). */
function standingKey(subject: string | null): string {
  const id = subject ?? TOKEN_STANDING;
  return STANDING_PREFIX + createHash('sha256').update(id).digest('base64url');
}

export interface SessionLifetimes {
  /** Passkey, recovery, OIDC and SAML sessions, seconds. */
  person: number;
  /** Token sessions, seconds. */
  token: number;
}

export type VerifiedSession =
  | { ok: true; claims: SessionClaims; csrfToken: string }
  | { ok: false; reason: 'malformed' | 'bad-signature' | 'expired' | 'not-yet-valid' | 'revoked' };

export class EngineSessions {
  readonly #state: State;
  readonly #lifetimes: SessionLifetimes;

  constructor(state: State, lifetimes: SessionLifetimes) {
    this.#state = state;
    this.#lifetimes = lifetimes;
  }

  async #key(): Promise<Uint8Array> {
    const stored = await this.#state.settings.get<string>(KEY_SETTING);
    if (typeof stored === 'string') return new Uint8Array(Buffer.from(stored, 'base64url'));
    await this.#state.settings.setIfAbsent(KEY_SETTING, Buffer.from(newSessionKey()).toString('base64url'));
    const now = await this.#state.settings.get<string>(KEY_SETTING);
    if (typeof now !== 'string') throw new Error('session key not stored');
    return new Uint8Array(Buffer.from(now, 'base64url'));
  }

  async #standing(subject: string | null): Promise<StoredStanding> {
    const s = await this.#state.settings.get<StoredStanding>(standingKey(subject));
    return s !== undefined && typeof s?.epoch === 'number' && typeof s.notBefore === 'number'
      ? s
      : { epoch: 0, notBefore: 0 };
  }

  /** Mints a session for a person or (subject null, method `token`) for the admin bearer. */
  async mint(
    input: Omit<MintSessionInput, 'epoch' | 'ttlSeconds'>,
  ): Promise<{ token: string; claims: SessionClaims; csrfToken: string; maxAge: number }> {
    const key = await this.#key();
    const { epoch } = await this.#standing(input.subject);
    const ttlSeconds = input.method === 'token' ? this.#lifetimes.token : this.#lifetimes.person;
    const { token, claims } = await mintSession(key, { ...input, epoch, ttlSeconds });
    return { token, claims, csrfToken: csrfTokenFor(key, claims.sid), maxAge: ttlSeconds };
  }

  /** Verifies a presented cookie value: signature, lifetime and standing. Throws when the store is unreadable. */
  async verify(token: string): Promise<VerifiedSession> {
    const key = await this.#key();
    let claims: SessionClaims;
    try {
      claims = await verifySession(key, token);
    } catch (err) {
      const refusal = (err as { refusal?: string }).refusal;
      return {
        ok: false,
        reason:
          refusal === 'bad-signature' || refusal === 'expired' || refusal === 'not-yet-valid'
            ? refusal
            : 'malformed',
      };
    }
    const [own, all, ended] = await Promise.all([
      this.#standing(claims.subject),
      this.#state.settings.get<number>(ALL_NOT_BEFORE),
      this.#state.settings.get(ENDED_PREFIX + claims.sid),
    ]);
    const standing: SessionStanding = {
      epoch: own.epoch,
      notBefore: Math.max(own.notBefore, typeof all === 'number' ? all : 0),
      ended: ended === undefined ? new Set() : new Set([claims.sid]),
    };
    if (sessionRevoked(claims, standing)) return { ok: false, reason: 'revoked' };
    return { ok: true, claims, csrfToken: csrfTokenFor(key, claims.sid) };
  }

  /**
   * Ends every session of the subject (logout ends the caller's sessions everywhere: the
   * specification's "bumps the session epoch and not-before"). Token sessions end together.
   */
  /** Ends one session (`sessions/terminate`); the others of its subject go on. */
  async endOne(claims: SessionClaims): Promise<void> {
    await this.#state.settings.set(ENDED_PREFIX + claims.sid, { until: claims.expiresAt });
    // Entries of sessions that have expired anyway are no longer needed.
    const now = Math.floor(Date.now() / 1000);
    for (const e of await this.#state.settings.list(ENDED_PREFIX)) {
      const until = (e.value as { until?: unknown } | null)?.until;
      if (typeof until === 'number' && until < now) await this.#state.settings.delete(e.key);
    }
  }

  /** Ends every session of every person and every token session (`sessions/terminate-all`). */
  async endEverything(): Promise<void> {
    await this.#state.settings.set(ALL_NOT_BEFORE, Math.floor(Date.now() / 1000) + 1);
  }

  async endAll(subject: string | null): Promise<void> {
    const current = await this.#standing(subject);
    await this.#state.settings.set(standingKey(subject), {
      epoch: current.epoch + 1,
      notBefore: Math.floor(Date.now() / 1000),
    });
  }
}
