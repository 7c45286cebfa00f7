/**
 * Hybrid sealing to a recipient: X25519 + ML-KEM-1024, combined X-Wing-style with HKDF-SHA-384,
 * then AES-256-GCM (normative layout: docs/crypto.md, "Capsules").
 *
 *   ss_X   = X25519(ephemeral secret, recipient X25519 public)
 *   ct_M, ss_M = ML-KEM-1024.Encaps(recipient ML-KEM public)
 *   ikm    = ss_M (32) || ss_X (32) || ephemeral X25519 public (32) || recipient X25519 public (32)
 *            || ct_M (1568) || SEAL_LABEL
 *   key (32) || nonce (12) = HKDF-SHA-384(salt = "", ikm, info = SEAL_INFO, 44)
 *   capsule = 0x01 || recipient key id (48) || ephemeral X25519 public (32) || ct_M (1568)
 *             || AES-256-GCM(key, nonce, plaintext, aad = purpose (1) || caller aad) (len + 16)
 *
 * The key id (SHA-384 of the recipient public-key encoding) lets `open` say "wrong key" without
 * trial decryption. Each capsule has a fresh KEM secret, so the derived key is used exactly once
 * and a derived nonce is safe. The purpose byte keeps a wrapped data key and a sealed message
 * from being swapped for one another.
 */
import { x25519 } from '@noble/curves/ed25519.js';
import { hkdf } from '@noble/hashes/hkdf.js';
import { sha384 as nobleSha384 } from '@noble/hashes/sha2.js';
import { ml_kem1024 } from '@noble/post-quantum/ml-kem.js';
import { CryptoError } from '../errors.ts';
import { ascii, checkBytes, concatBytes, constantTimeEqual, randomBytes } from './bytes.ts';
import { X25519_PUBLIC_BYTES } from './key-encoding.ts';
import { type ExpandedRecipient, keyId, parseRecipientPublic, parseRecipientSecret } from './keys.ts';
import type { Platform } from './platform.ts';

export const CAPSULE_VERSION = 1;
export const SEAL_LABEL = ascii('coffer-seal-v1 X25519+ML-KEM-1024');
export const SEAL_INFO = ascii('coffer-seal-v1 AES-256-GCM key and nonce');
export const KEY_ID_BYTES = 48;
export const MLKEM1024_CIPHERTEXT_BYTES = 1568;
export const CAPSULE_HEADER_BYTES = 1 + KEY_ID_BYTES + X25519_PUBLIC_BYTES + MLKEM1024_CIPHERTEXT_BYTES;
/** Smallest possible capsule (empty plaintext). */
export const CAPSULE_MIN_BYTES = CAPSULE_HEADER_BYTES + 16;

/** What a capsule's plaintext is for; bound into the AEAD associated data. */
export const PURPOSE_SEAL = 0x01;
export const PURPOSE_WRAP_KEY = 0x02;

const EMPTY = new Uint8Array(0);

/** Fixed randomness for golden vectors (internal). */
export interface SealRandomness {
  ephemeralSecret: Uint8Array; // 32 bytes
  mlkemMessage: Uint8Array; // 32 bytes
}

function deriveKeyAndNonce(
  ssM: Uint8Array,
  ssX: Uint8Array,
  ephemeralPublic: Uint8Array,
  recipientX25519: Uint8Array,
  ctM: Uint8Array,
): { key: Uint8Array; nonce: Uint8Array } {
  const ikm = concatBytes(ssM, ssX, ephemeralPublic, recipientX25519, ctM, SEAL_LABEL);
  const okm = hkdf(nobleSha384, ikm, EMPTY, SEAL_INFO, 44);
  ikm.fill(0);
  return { key: okm.slice(0, 32), nonce: okm.slice(32, 44) };
}

/** Seals (internal form with purpose and optional fixed randomness). */
export async function sealWith(
  platform: Platform,
  recipientPublicKey: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
  purpose: number,
  fixed?: SealRandomness,
): Promise<Uint8Array> {
  const { x25519Public, mlkemEncapsulationKey } = parseRecipientPublic(recipientPublicKey);
  checkBytes(plaintext, 'plaintext');
  checkBytes(aad, 'aad');
  const id = keyId(recipientPublicKey);
  const ephemeralSecret = fixed ? fixed.ephemeralSecret : randomBytes(32);
  let ssX: Uint8Array;
  let ephemeralPublic: Uint8Array;
  let ctM: Uint8Array;
  let ssM: Uint8Array;
  try {
    ephemeralPublic = x25519.getPublicKey(ephemeralSecret);
    ssX = x25519.getSharedSecret(ephemeralSecret, x25519Public);
  } catch {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'recipient public key holds an unusable X25519 key');
  }
  try {
    const kem = ml_kem1024.encapsulate(mlkemEncapsulationKey, fixed ? fixed.mlkemMessage : undefined);
    ctM = kem.cipherText;
    ssM = kem.sharedSecret;
  } catch {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'recipient public key holds an invalid ML-KEM-1024 key');
  }
  const { key, nonce } = deriveKeyAndNonce(ssM, ssX, ephemeralPublic, x25519Public, ctM);
  ssM.fill(0);
  ssX.fill(0);
  if (!fixed) ephemeralSecret.fill(0);
  const sealed = await platform.aesGcmEncrypt(
    key,
    nonce,
    plaintext,
    concatBytes(Uint8Array.of(purpose), aad),
  );
  key.fill(0);
  return concatBytes(Uint8Array.of(CAPSULE_VERSION), id, ephemeralPublic, ctM, sealed);
}

/**
 * Checks the capsule's version and length and returns its recipient key id.
 * Throws ERR_CRYPTO_MALFORMED or ERR_CRYPTO_UNSUPPORTED_VERSION.
 */
export function capsuleKeyId(capsule: Uint8Array): Uint8Array {
  if (!(capsule instanceof Uint8Array) || capsule.length === 0) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'capsule must be a non-empty Uint8Array');
  }
  if (capsule[0] !== CAPSULE_VERSION) {
    throw new CryptoError('ERR_CRYPTO_UNSUPPORTED_VERSION', 'capsule has an unsupported version');
  }
  if (capsule.length < CAPSULE_MIN_BYTES)
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'capsule is truncated');
  return capsule.subarray(1, 1 + KEY_ID_BYTES);
}

/** Opens (internal form with purpose). Throws WRONG_KEY / TAMPERED / UNSUPPORTED_VERSION / MALFORMED / WRONG_KIND. */
export async function openWith(
  platform: Platform,
  recipientSecretKey: Uint8Array,
  capsule: Uint8Array,
  aad: Uint8Array,
  purpose: number,
): Promise<Uint8Array> {
  capsuleKeyId(capsule);
  checkBytes(aad, 'aad');
  return openExpanded(platform, parseRecipientSecret(recipientSecretKey), capsule, aad, purpose);
}

/**
 * Opens with an already expanded recipient (so unwrapKey expands the secret key once), then wipes
 * the recipient's secret material. Same errors as {@link openWith}.
 */
export async function openExpanded(
  platform: Platform,
  recipient: ExpandedRecipient,
  capsule: Uint8Array,
  aad: Uint8Array,
  purpose: number,
): Promise<Uint8Array> {
  try {
    const id = capsuleKeyId(capsule);
    checkBytes(aad, 'aad');
    if (!constantTimeEqual(id, keyId(recipient.publicKey))) {
      throw new CryptoError('ERR_CRYPTO_WRONG_KEY', 'capsule is sealed to another recipient');
    }
    let offset = 1 + KEY_ID_BYTES;
    const ephemeralPublic = capsule.subarray(offset, offset + X25519_PUBLIC_BYTES);
    offset += X25519_PUBLIC_BYTES;
    const ctM = capsule.subarray(offset, offset + MLKEM1024_CIPHERTEXT_BYTES);
    offset += MLKEM1024_CIPHERTEXT_BYTES;
    let ssX: Uint8Array;
    let ssM: Uint8Array;
    try {
      ssX = x25519.getSharedSecret(recipient.x25519Secret, ephemeralPublic);
      // ML-KEM decapsulation never fails on a wrong ciphertext (implicit rejection): a tampered
      // ct_M yields an unrelated secret and the AEAD tag check below refuses the capsule.
      ssM = ml_kem1024.decapsulate(ctM, recipient.mlkemDecapsulationKey);
    } catch {
      throw new CryptoError('ERR_CRYPTO_TAMPERED', 'capsule failed authentication');
    }
    const { key, nonce } = deriveKeyAndNonce(ssM, ssX, ephemeralPublic, recipient.x25519Public, ctM);
    ssM.fill(0);
    ssX.fill(0);
    let plaintext: Uint8Array | null;
    try {
      plaintext = await platform.aesGcmDecrypt(
        key,
        nonce,
        capsule.subarray(offset),
        concatBytes(Uint8Array.of(purpose), aad),
      );
    } catch (e) {
      throw asCryptoError(e, 'AES-256-GCM decryption could not run');
    } finally {
      key.fill(0);
    }
    if (plaintext === null) throw new CryptoError('ERR_CRYPTO_TAMPERED', 'capsule failed authentication');
    return plaintext;
  } finally {
    recipient.mlkemDecapsulationKey.fill(0);
    recipient.x25519Secret.fill(0);
  }
}

/** `e` when it is already a CryptoError, else a MALFORMED one with `message` (never the cause's text). */
export function asCryptoError(e: unknown, message: string): CryptoError {
  return e instanceof CryptoError ? e : new CryptoError('ERR_CRYPTO_MALFORMED', message);
}
