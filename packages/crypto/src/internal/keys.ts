/**
 * Key generation (random and seeded), public-from-secret derivation and fingerprints.
 *
 * Seeded generation is internal: it exists so the golden vectors in test/vectors/ can be
 * regenerated bit for bit. Public generation always draws its seeds from the platform CSPRNG.
 * Fingerprints are SHA-384 of the whole public-key encoding (version and kind bytes included), so
 * a signer key and a recipient key can never share a fingerprint.
 */
import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { sha384 as nobleSha384 } from '@noble/hashes/sha2.js';
import { shake256 } from '@noble/hashes/sha3.js';
import { ml_dsa87 } from '@noble/post-quantum/ml-dsa.js';
import { ml_kem1024 } from '@noble/post-quantum/ml-kem.js';
import { CryptoError } from '../errors.ts';
import { checkBytes, randomBytes } from './bytes.ts';
import { type Digest, formatDigest } from './digest.ts';
import {
  ED25519_PUBLIC_BYTES,
  ED25519_SEED_BYTES,
  encodeKey,
  keyBody,
  MLDSA87_SEED_BYTES,
  MLKEM1024_SEED_BYTES,
  RECIPIENT_SEED_BYTES,
  X25519_PUBLIC_BYTES,
  X25519_SECRET_BYTES,
} from './key-encoding.ts';

/** A hybrid signing key pair, both halves in their versioned encodings. */
export interface SignerKeyPair {
  publicKey: Uint8Array;
  secretKey: Uint8Array;
}

/** A hybrid sealing key pair, both halves in their versioned encodings. */
export interface RecipientKeyPair {
  publicKey: Uint8Array;
  secretKey: Uint8Array;
}

/** The expanded material of a signer secret key (internal; never leaves the package). */
export interface ExpandedSigner {
  ed25519Seed: Uint8Array;
  ed25519Public: Uint8Array;
  mldsaSecret: Uint8Array;
  mldsaPublic: Uint8Array;
  publicKey: Uint8Array;
}

/** The expanded material of a recipient secret key (internal). */
export interface ExpandedRecipient {
  x25519Secret: Uint8Array;
  x25519Public: Uint8Array;
  mlkemDecapsulationKey: Uint8Array;
  mlkemEncapsulationKey: Uint8Array;
  publicKey: Uint8Array;
}

function internalFailure(): CryptoError {
  return new CryptoError('ERR_CRYPTO_MALFORMED', 'key material was rejected by the underlying primitive');
}

/** Expands seeds into a signer (internal; deterministic). */
export function expandSigner(ed25519Seed: Uint8Array, mldsaSeed: Uint8Array): ExpandedSigner {
  checkBytes(ed25519Seed, 'ed25519 seed', ED25519_SEED_BYTES);
  checkBytes(mldsaSeed, 'ML-DSA-87 seed', MLDSA87_SEED_BYTES);
  try {
    const ed25519Public = ed25519.getPublicKey(ed25519Seed);
    const { publicKey: mldsaPublic, secretKey: mldsaSecret } = ml_dsa87.keygen(mldsaSeed);
    const publicKey = encodeKey('signer-public', ed25519Public, mldsaPublic);
    return { ed25519Seed, ed25519Public, mldsaSecret, mldsaPublic, publicKey };
  } catch {
    throw internalFailure();
  }
}

/**
 * Expands a 32-byte recipient seed (internal; deterministic), as X-Wing's expandDecapsulationKey
 * does: SHAKE256(seed, 96) = ML-KEM d (32) || ML-KEM z (32) || X25519 secret (32).
 */
export function expandRecipient(seed: Uint8Array): ExpandedRecipient {
  checkBytes(seed, 'recipient seed', RECIPIENT_SEED_BYTES);
  const expanded = shake256(seed, { dkLen: MLKEM1024_SEED_BYTES + X25519_SECRET_BYTES });
  const x25519Secret = expanded.slice(MLKEM1024_SEED_BYTES);
  try {
    const x25519Public = x25519.getPublicKey(x25519Secret);
    const { publicKey: mlkemEncapsulationKey, secretKey: mlkemDecapsulationKey } = ml_kem1024.keygen(
      expanded.subarray(0, MLKEM1024_SEED_BYTES),
    );
    const publicKey = encodeKey('recipient-public', x25519Public, mlkemEncapsulationKey);
    return { x25519Secret, x25519Public, mlkemDecapsulationKey, mlkemEncapsulationKey, publicKey };
  } catch {
    throw internalFailure();
  } finally {
    expanded.fill(0);
  }
}

/** Seeded signer generation (internal, for golden vectors): `seed` is 64 bytes, ed25519 seed || ML-DSA seed. */
export function signerFromSeed(seed: Uint8Array): SignerKeyPair {
  checkBytes(seed, 'signer seed', ED25519_SEED_BYTES + MLDSA87_SEED_BYTES);
  const edSeed = seed.slice(0, ED25519_SEED_BYTES);
  const dsaSeed = seed.slice(ED25519_SEED_BYTES);
  const expanded = expandSigner(edSeed, dsaSeed);
  return { publicKey: expanded.publicKey, secretKey: encodeKey('signer-secret', edSeed, dsaSeed) };
}

/** Seeded recipient generation (internal, for golden vectors): `seed` is 32 bytes. */
export function recipientFromSeed(seed: Uint8Array): RecipientKeyPair {
  const expanded = expandRecipient(seed);
  expanded.mlkemDecapsulationKey.fill(0);
  return { publicKey: expanded.publicKey, secretKey: encodeKey('recipient-secret', seed.slice()) };
}

/** A fresh hybrid signer (Ed25519 + ML-DSA-87) from the CSPRNG. Returns versioned encodings. */
export function generateSigner(): SignerKeyPair {
  return signerFromSeed(randomBytes(ED25519_SEED_BYTES + MLDSA87_SEED_BYTES));
}

/** A fresh hybrid recipient (X25519 + ML-KEM-1024) from the CSPRNG. Returns versioned encodings. */
export function generateRecipient(): RecipientKeyPair {
  return recipientFromSeed(randomBytes(RECIPIENT_SEED_BYTES));
}

/** Expands an encoded signer secret key. Throws MALFORMED / UNSUPPORTED_VERSION / WRONG_KIND. */
export function parseSignerSecret(secretKey: Uint8Array): ExpandedSigner {
  const { body } = keyBody(secretKey, 'signer-secret');
  return expandSigner(body.slice(0, ED25519_SEED_BYTES), body.slice(ED25519_SEED_BYTES));
}

/** Expands an encoded recipient secret key. Throws MALFORMED / UNSUPPORTED_VERSION / WRONG_KIND. */
export function parseRecipientSecret(secretKey: Uint8Array): ExpandedRecipient {
  const { body } = keyBody(secretKey, 'recipient-secret');
  return expandRecipient(body);
}

/** The two halves of an encoded signer public key; the Ed25519 point must decode. */
export function parseSignerPublic(publicKey: Uint8Array): {
  ed25519Public: Uint8Array;
  mldsaPublic: Uint8Array;
} {
  const { body } = keyBody(publicKey, 'signer-public');
  const ed25519Public = body.slice(0, ED25519_PUBLIC_BYTES);
  try {
    ed25519.Point.fromBytes(ed25519Public);
  } catch {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'signer public key holds an invalid Ed25519 point');
  }
  return { ed25519Public, mldsaPublic: body.slice(ED25519_PUBLIC_BYTES) };
}

/** The two halves of an encoded recipient public key (the ML-KEM key is checked when used). */
export function parseRecipientPublic(publicKey: Uint8Array): {
  x25519Public: Uint8Array;
  mlkemEncapsulationKey: Uint8Array;
} {
  const { body } = keyBody(publicKey, 'recipient-public');
  return {
    x25519Public: body.slice(0, X25519_PUBLIC_BYTES),
    mlkemEncapsulationKey: body.slice(X25519_PUBLIC_BYTES),
  };
}

/** The encoded public key of an encoded signer secret key. Throws MALFORMED / UNSUPPORTED_VERSION / WRONG_KIND. */
export function signerPublicKeyFromSecret(secretKey: Uint8Array): Uint8Array {
  return parseSignerSecret(secretKey).publicKey;
}

/** The encoded public key of an encoded recipient secret key. Throws MALFORMED / UNSUPPORTED_VERSION / WRONG_KIND. */
export function recipientPublicKeyFromSecret(secretKey: Uint8Array): Uint8Array {
  return parseRecipientSecret(secretKey).publicKey;
}

/** SHA-384 of a public-key encoding, as raw bytes (the capsule's recipient key id). */
export function keyId(publicKey: Uint8Array): Uint8Array {
  keyBody(publicKey, 'signer-public', 'recipient-public');
  return nobleSha384(publicKey);
}

/**
 * `sha384:<hex>` of the canonical public-key encoding (signer or recipient).
 * Throws ERR_CRYPTO_WRONG_KIND for a secret key (a secret key is never hashed into a public
 * identifier), ERR_CRYPTO_MALFORMED / ERR_CRYPTO_UNSUPPORTED_VERSION for a bad encoding.
 */
export function fingerprint(publicKey: Uint8Array): Digest {
  return formatDigest(keyId(publicKey));
}
