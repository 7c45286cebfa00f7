/**
 * Passkey ceremonies (WebAuthn), on `@simplewebauthn/server`: options for the browser, and the
 * checks of what it answers. The relying party is always `relyingPartyOf(CONSOLE_ORIGIN)`, never
 * anything the client sent.
 *
 * What the engine keeps between `begin` and `finish` is the challenge (one per ceremony, single
 * use: it deletes it in the write that acts on the result) and, for registration, who the new
 * credential is for. What it keeps per credential is a `StoredPasskey`. Every refusal is
 * ERR_IDENTITY_PASSKEY_REFUSED with a `refusal` word for logs; the HTTP answer does not say which.
 *
 * Policy: user verification is required (a passkey is a second factor in one: possession and a
 * PIN or biometric); attestation is `none` (Coffer does not restrict authenticator makes); ES256
 * and EdDSA (and RS256 for older platform authenticators) are accepted; a signature counter that
 * does not increase, when either side has one, is refused as a possible clone.
 */
import { randomBytes } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import { IdentityError, type PasskeyRefusal } from './errors.ts';
import type { RelyingParty } from './people.ts';

/** Milliseconds a ceremony may take (the browser's timeout; the engine expires challenges after it). */
export const CEREMONY_TIMEOUT_MS = 5 * 60 * 1000;
/** COSE algorithms accepted: EdDSA, ES256, RS256. */
const ALGORITHMS = [-8, -7, -257];

/** What is stored for one registered passkey. */
export interface StoredPasskey {
  /** Credential id, base64url. */
  id: string;
  /** COSE public key, base64url. */
  publicKey: string;
  counter: number;
  transports: string[];
}

const refuse = (refusal: PasskeyRefusal) =>
  new IdentityError('ERR_IDENTITY_PASSKEY_REFUSED', `passkey ceremony refused (${refusal})`, { refusal });

/** Maps the library's refusal text onto our words (its messages may quote client data: never passed on). */
function refusalOf(err: unknown): PasskeyRefusal {
  const m = err instanceof Error ? err.message : '';
  if (/challenge/i.test(m)) return 'challenge';
  if (/origin/i.test(m)) return 'origin';
  if (/RP ID|rpID|rp id/i.test(m)) return 'rp-id';
  if (/user (could not be )?verif|user verification/i.test(m)) return 'user-verification';
  if (/counter/i.test(m)) return 'counter';
  if (/signature/i.test(m)) return 'signature';
  return 'malformed';
}

const toB64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

// @simplewebauthn/server is loaded with the first ceremony: about 4.6 MiB of heap that an engine
// whose people sign in otherwise (or not yet) need not hold from start.
const webauthn = () => import('@simplewebauthn/server');

/**
 * Options for registering a passkey for `email` (the person's user handle is random per
 * registration: it never reveals the email to other sites). `existing` credentials are excluded so
 * an authenticator that already holds one for this person says so instead of making a second.
 */
export async function registrationOptions(
  rp: RelyingParty,
  person: { email: string; displayName?: string },
  existing: readonly StoredPasskey[] = [],
): Promise<{ options: PublicKeyCredentialCreationOptionsJSON; challenge: string }> {
  const { generateRegistrationOptions } = await webauthn();
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: person.email,
    userDisplayName: person.displayName ?? person.email,
    userID: new Uint8Array(randomBytes(16)),
    timeout: CEREMONY_TIMEOUT_MS,
    attestationType: 'none',
    excludeCredentials: existing.map((c) => ({ id: c.id, transports: c.transports })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'required' },
    supportedAlgorithmIDs: ALGORITHMS,
  });
  return { options, challenge: options.challenge };
}

/** Checks a registration answer against the challenge the engine issued. Returns the passkey to store. */
export async function verifyRegistration(
  rp: RelyingParty,
  response: unknown,
  expectedChallenge: string,
): Promise<StoredPasskey> {
  if (typeof response !== 'object' || response === null) throw refuse('malformed');
  const { verifyRegistrationResponse: verify } = await webauthn();
  let result: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    result = await verify({
      response: response as RegistrationResponseJSON,
      expectedChallenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
      supportedAlgorithmIDs: ALGORITHMS,
    });
  } catch (err) {
    throw refuse(refusalOf(err));
  }
  if (!result.verified) throw refuse('signature');
  const { credential } = result.registrationInfo;
  return {
    id: credential.id,
    publicKey: toB64(credential.publicKey),
    counter: credential.counter,
    transports: [...(credential.transports ?? [])],
  };
}

/** Options for signing in with one of `credentials` (empty: any discoverable passkey of this site). */
export async function authenticationOptions(
  rp: RelyingParty,
  credentials: readonly StoredPasskey[] = [],
): Promise<{ options: PublicKeyCredentialRequestOptionsJSON; challenge: string }> {
  const { generateAuthenticationOptions } = await webauthn();
  const options = await generateAuthenticationOptions({
    rpID: rp.id,
    allowCredentials: credentials.map((c) => ({ id: c.id, transports: c.transports })),
    timeout: CEREMONY_TIMEOUT_MS,
    userVerification: 'required',
  });
  return { options, challenge: options.challenge };
}

/**
 * Checks a sign-in (or step-up) answer against the challenge and the stored passkey it names.
 * Returns the new signature counter to store. `credentials` are the caller's passkeys (or all
 * passkeys the engine knows, for a discoverable sign-in); an answer naming none of them is refused.
 */
export async function verifyAuthentication(
  rp: RelyingParty,
  response: unknown,
  expectedChallenge: string,
  credentials: readonly StoredPasskey[],
): Promise<{ credentialId: string; newCounter: number }> {
  const id = (response as { id?: unknown } | null)?.id;
  if (typeof id !== 'string') throw refuse('malformed');
  const stored = credentials.find((c) => c.id === id);
  if (stored === undefined) throw refuse('unknown-credential');
  const { verifyAuthenticationResponse: verify } = await webauthn();
  let result: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
  try {
    result = await verify({
      response: response as AuthenticationResponseJSON,
      expectedChallenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
      credential: {
        id: stored.id,
        publicKey: new Uint8Array(Buffer.from(stored.publicKey, 'base64url')),
        counter: stored.counter,
        transports: stored.transports as never,
      },
    });
  } catch (err) {
    throw refuse(refusalOf(err));
  }
  if (!result.verified) throw refuse('signature');
  return { credentialId: stored.id, newCounter: result.authenticationInfo.newCounter };
}
