/**
 * Hybrid signatures: Ed25519 (RFC 8032, strict verification) and ML-DSA-87 (FIPS 204, pure mode,
 * hedged signing) over one domain-separated message, in the manner of
 * draft-ietf-lamps-pq-composite-sigs:
 *
 *   M' = LABEL || u32be(len(ctx)) || ctx || SHA-384(message)
 *   signature = 0x01 || Ed25519.sign(M') (64) || ML-DSA-87.sign(M', ctx = "") (4627)
 *
 * The message is pre-hashed so a large manifest is read once, at native speed on Node, whatever the
 * two schemes do internally. The signature is valid only when BOTH halves verify against the two
 * halves of the same public key over the same M': an attacker must break both schemes to forge.
 */
import { ed25519 } from '@noble/curves/ed25519.js';
import { ml_dsa87 } from '@noble/post-quantum/ml-dsa.js';
import { CryptoError } from '../errors.ts';
import { ascii, concatBytes, u32be, utf8 } from './bytes.ts';
import { parseSignerPublic, parseSignerSecret } from './keys.ts';
import type { Platform } from './platform.ts';

/** Fixed domain-separation label of version-1 hybrid signatures. */
export const SIGNATURE_LABEL = ascii('coffer-signature-v1 Ed25519+ML-DSA-87');

export const SIGNATURE_VERSION = 1;
export const ED25519_SIGNATURE_BYTES = 64;
export const MLDSA87_SIGNATURE_BYTES = 4627;
/** Length of a version-1 hybrid signature: 1 + 64 + 4627. */
export const SIGNATURE_BYTES = 1 + ED25519_SIGNATURE_BYTES + MLDSA87_SIGNATURE_BYTES;

const EMPTY = new Uint8Array(0);

/** M' for `message` under `context` (throws ERR_CRYPTO_MALFORMED for a non-well-formed context). */
export function signedMessage(platform: Platform, message: Uint8Array, context: string): Uint8Array {
  if (!(message instanceof Uint8Array))
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'message must be a Uint8Array');
  const ctx = utf8(context);
  return concatBytes(SIGNATURE_LABEL, u32be(ctx.length), ctx, platform.sha384(message));
}

/**
 * Signs (internal form). `deterministic` turns off ML-DSA hedging; only the golden-vector
 * generator uses it. Throws MALFORMED / UNSUPPORTED_VERSION / WRONG_KIND for a bad secret key.
 */
export function signWith(
  platform: Platform,
  secretKey: Uint8Array,
  message: Uint8Array,
  context: string,
  deterministic = false,
): Uint8Array {
  const signer = parseSignerSecret(secretKey);
  const m = signedMessage(platform, message, context);
  try {
    const edSig = ed25519.sign(m, signer.ed25519Seed);
    const dsaSig = ml_dsa87.sign(m, signer.mldsaSecret, deterministic ? { extraEntropy: false } : {});
    const out = new Uint8Array(SIGNATURE_BYTES);
    out[0] = SIGNATURE_VERSION;
    out.set(edSig, 1);
    out.set(dsaSig, 1 + ED25519_SIGNATURE_BYTES);
    return out;
  } catch {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'signing failed in the underlying primitive');
  } finally {
    signer.mldsaSecret.fill(0);
  }
}

/**
 * True only when both halves verify. False for any bad, truncated, unknown-version, swapped or
 * stripped signature or a non-well-formed context. Throws only for a malformed public key.
 */
export function verifyWith(
  platform: Platform,
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
  context: string,
): boolean {
  const { ed25519Public, mldsaPublic } = parseSignerPublic(publicKey);
  if (!(signature instanceof Uint8Array) || signature.length !== SIGNATURE_BYTES) return false;
  if (signature[0] !== SIGNATURE_VERSION) return false;
  let m: Uint8Array;
  try {
    m = signedMessage(platform, message, context);
  } catch {
    return false;
  }
  const edSig = signature.subarray(1, 1 + ED25519_SIGNATURE_BYTES);
  const dsaSig = signature.subarray(1 + ED25519_SIGNATURE_BYTES);
  try {
    // Both must pass; ML-DSA first only because most forgeries fail it sooner.
    if (!ml_dsa87.verify(dsaSig, m, mldsaPublic, { context: EMPTY })) return false;
    // zip215: false = RFC 8032 strict (canonical encodings only), so signatures are not malleable.
    return ed25519.verify(edSig, m, ed25519Public, { zip215: false });
  } catch {
    return false;
  }
}
