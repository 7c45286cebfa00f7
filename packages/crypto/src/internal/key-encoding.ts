/**
 * Versioned binary encodings of the four key kinds (normative layout: docs/crypto.md, "Keys").
 *
 *   key = version (1) || kind (1) || body
 *
 * Version 1 bodies:
 *   signer-public     ed25519 public key (32) || ML-DSA-87 public key (2592)         2626 bytes total
 *   signer-secret     ed25519 seed (32) || ML-DSA-87 keygen seed xi (32)               66 bytes total
 *   recipient-public  X25519 public key (32) || ML-KEM-1024 encapsulation key (1568)  1602 bytes total
 *   recipient-secret  seed (32)                                                        34 bytes total
 *
 * Secret keys hold seeds, not expanded keys: they are small enough to write down, and everything
 * else (expanded secret keys, public keys) is derived from them deterministically. The recipient
 * seed is expanded as X-Wing does (SHAKE256(seed, 96) = d || z || X25519 secret), so every seed
 * bit reaches the public key and a damaged secret key file always fails its fingerprint check.
 * Parsing checks version, then kind, then exact length, and never echoes key bytes in errors.
 */
import { CryptoError } from '../errors.ts';

/** The four kinds of key this package encodes. */
export type KeyKind = 'signer-public' | 'signer-secret' | 'recipient-public' | 'recipient-secret';

/** Current (and only) version of every encoding this package writes. */
export const KEY_VERSION = 1;

export const KIND_CODES: Readonly<Record<KeyKind, number>> = {
  'signer-public': 0x01,
  'signer-secret': 0x02,
  'recipient-public': 0x03,
  'recipient-secret': 0x04,
};

export const ED25519_PUBLIC_BYTES = 32;
export const ED25519_SEED_BYTES = 32;
export const MLDSA87_PUBLIC_BYTES = 2592;
export const MLDSA87_SEED_BYTES = 32;
export const X25519_PUBLIC_BYTES = 32;
export const X25519_SECRET_BYTES = 32;
export const MLKEM1024_PUBLIC_BYTES = 1568;
export const MLKEM1024_SEED_BYTES = 64;
export const RECIPIENT_SEED_BYTES = 32;

const HEADER = 2;

/** Total encoded length of each kind, version 1. */
export const KEY_LENGTHS: Readonly<Record<KeyKind, number>> = {
  'signer-public': HEADER + ED25519_PUBLIC_BYTES + MLDSA87_PUBLIC_BYTES,
  'signer-secret': HEADER + ED25519_SEED_BYTES + MLDSA87_SEED_BYTES,
  'recipient-public': HEADER + X25519_PUBLIC_BYTES + MLKEM1024_PUBLIC_BYTES,
  'recipient-secret': HEADER + RECIPIENT_SEED_BYTES,
};

const KINDS = Object.keys(KIND_CODES) as KeyKind[];

/** True when `value` names a key kind. */
export function isKeyKind(value: unknown): value is KeyKind {
  return typeof value === 'string' && (KINDS as string[]).includes(value);
}

/**
 * The kind of an encoded key after checking version, kind byte and length.
 * Throws ERR_CRYPTO_MALFORMED (not bytes / too short / unknown kind / wrong length) or
 * ERR_CRYPTO_UNSUPPORTED_VERSION.
 */
export function keyKindOf(key: Uint8Array): KeyKind {
  if (!(key instanceof Uint8Array))
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'a key must be a Uint8Array');
  if (key.length < HEADER) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key encoding is truncated');
  if (key[0] !== KEY_VERSION) {
    throw new CryptoError('ERR_CRYPTO_UNSUPPORTED_VERSION', 'key encoding has an unsupported version');
  }
  const kind = KINDS.find((k) => KIND_CODES[k] === key[1]);
  if (kind === undefined)
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key encoding has an unknown kind byte');
  if (key.length !== KEY_LENGTHS[kind]) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', `${kind} key encoding has the wrong length`);
  }
  return kind;
}

/**
 * The body of `key` after checking it is a well-formed key of one of `allowed` kinds.
 * A well-formed key of another kind throws ERR_CRYPTO_WRONG_KIND.
 */
export function keyBody(key: Uint8Array, ...allowed: KeyKind[]): { kind: KeyKind; body: Uint8Array } {
  const kind = keyKindOf(key);
  if (!allowed.includes(kind)) {
    throw new CryptoError(
      'ERR_CRYPTO_WRONG_KIND',
      `expected a ${allowed.join(' or ')} key, got a ${kind} key`,
    );
  }
  return { kind, body: key.subarray(HEADER) };
}

/** version || kind || parts, as a fresh array. */
export function encodeKey(kind: KeyKind, ...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(KEY_LENGTHS[kind]);
  out[0] = KEY_VERSION;
  out[1] = KIND_CODES[kind];
  let offset = HEADER;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  if (offset !== out.length) throw new Error('internal: key parts do not fill the encoding');
  return out;
}
