/**
 * The platform-independent half of the public API, re-exported unchanged by both entry points.
 */

export { CRYPTO_ERROR_CODES, CryptoError, type CryptoErrorCode, isCryptoError } from '../errors.ts';
export { AEAD_KEY_BYTES, AEAD_NONCE_BYTES, AEAD_TAG_BYTES, type WrappedKey } from './api.ts';
export {
  constantTimeEqual,
  fromBase64Url,
  fromHex,
  randomBytes,
  toBase64Url,
  toHex,
} from './bytes.ts';
export { canonicalJson, canonicalJsonBytes } from './canonical-json.ts';
export { type Digest, formatDigest, isDigest, parseDigest } from './digest.ts';
export { KEY_LENGTHS, type KeyKind } from './key-encoding.ts';
export { decodeKeyFile, encodeKeyFile } from './key-file.ts';
export {
  fingerprint,
  generateRecipient,
  generateSigner,
  type RecipientKeyPair,
  recipientPublicKeyFromSecret,
  type SignerKeyPair,
  signerPublicKeyFromSecret,
} from './keys.ts';
export type { Hasher } from './platform.ts';
export { CAPSULE_MIN_BYTES } from './seal.ts';
export { SIGNATURE_BYTES } from './signature.ts';
