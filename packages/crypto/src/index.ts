/**
 * @coffer/crypto, `node` build: SHA-384 digests, canonical JSON (RFC 8785), AES-256-GCM,
 * hybrid Ed25519 + ML-DSA-87 signatures, hybrid X25519 + ML-KEM-1024 sealing and multi-recipient
 * key wrapping, versioned key encodings and armoured key files (normative layouts: docs/crypto.md).
 *
 * This entry binds the node:crypto platform (native SHA-384 and AES-GCM). Its twin, browser.ts,
 * binds WebCrypto + @noble and is this file with the platform swapped (a test checks it, and that
 * both export the same names); package.json's `exports` picks one by the `node` / `default`
 * conditions. Every failure is a CryptoError with a stable `code`; no message carries key,
 * plaintext or other input bytes, and no dependency's exception escapes.
 */
import { bindPlatform } from './internal/api.ts';
import { nodePlatform as platform } from './internal/platform-node.ts';

export * from './internal/pure.ts';

const api = bindPlatform(platform);

/** Which bulk implementation this build uses: 'node' (node:crypto) or 'web' (WebCrypto + @noble). */
export const platformName: 'node' | 'web' = platform.name;

/** SHA-384 of `data` (48 bytes). Throws ERR_CRYPTO_MALFORMED when `data` is not a Uint8Array. */
export const sha384: (data: Uint8Array) => Uint8Array = api.sha384;

/** `sha384:<96 hex>` of `data`. Throws ERR_CRYPTO_MALFORMED when `data` is not a Uint8Array. */
export const sha384Digest: typeof api.sha384Digest = api.sha384Digest;

/**
 * A streaming SHA-384 hasher: `update(chunk)` as often as needed, then `digest()` once.
 * Its methods throw ERR_CRYPTO_MALFORMED for a non-Uint8Array chunk or use after `digest()`.
 */
export const createSha384: typeof api.createSha384 = api.createSha384;

/**
 * AES-256-GCM: resolves to ciphertext || 16-byte tag. Never reuse a (key, nonce) pair.
 * Rejects with ERR_CRYPTO_MALFORMED for a key that is not 32 bytes or a nonce that is not 12.
 */
export const aeadEncrypt: typeof api.aeadEncrypt = api.aeadEncrypt;

/**
 * AES-256-GCM decryption of ciphertext || tag: resolves to the plaintext, released only after the
 * tag verifies. Rejects with ERR_CRYPTO_TAMPERED (bad tag, wrong key, nonce or aad, input shorter
 * than the tag) or ERR_CRYPTO_MALFORMED (bad key or nonce length).
 */
export const aeadDecrypt: typeof api.aeadDecrypt = api.aeadDecrypt;

/**
 * Hybrid Ed25519 + ML-DSA-87 signature (4692 bytes) of `message` under `context`, a fixed name of
 * what is signed (e.g. 'coffer/manifest/v1'). Throws ERR_CRYPTO_MALFORMED,
 * ERR_CRYPTO_UNSUPPORTED_VERSION or ERR_CRYPTO_WRONG_KIND for a bad secret key, and
 * ERR_CRYPTO_MALFORMED for a context that is not well-formed Unicode.
 */
export const sign: typeof api.sign = api.sign;

/**
 * True only when both halves of `signature` verify over `message` and `context` against the two
 * halves of `publicKey`; false for any bad, forged, truncated, unknown-version, swapped or stripped
 * signature. Throws only for a malformed, unsupported-version or wrong-kind public key.
 */
export const verify: typeof api.verify = api.verify;

/** As {@link verify}, but throws ERR_CRYPTO_BAD_SIGNATURE instead of returning false. */
export const assertSignature: typeof api.assertSignature = api.assertSignature;

/**
 * Seals `plaintext` to one recipient; resolves to the capsule bytes. `aad` is authenticated, not
 * stored: pass the same bytes to {@link open}. Rejects with ERR_CRYPTO_MALFORMED,
 * ERR_CRYPTO_UNSUPPORTED_VERSION or ERR_CRYPTO_WRONG_KIND for a bad public key.
 */
export const seal: typeof api.seal = api.seal;

/**
 * Opens a capsule made by {@link seal}; resolves to the plaintext once it is authenticated.
 * Rejects with ERR_CRYPTO_WRONG_KEY (sealed to another recipient), ERR_CRYPTO_TAMPERED (altered
 * capsule or different aad), ERR_CRYPTO_UNSUPPORTED_VERSION, ERR_CRYPTO_MALFORMED or
 * ERR_CRYPTO_WRONG_KIND.
 */
export const open: typeof api.open = api.open;

/**
 * Wraps one data key to each recipient public key (duplicates removed, order kept); resolves to
 * `{ recipient: fingerprint, capsule: base64url }[]`. Rejects with ERR_CRYPTO_MALFORMED for an
 * empty data key or recipient list, or as {@link seal} does for a bad key.
 */
export const wrapKey: typeof api.wrapKey = api.wrapKey;

/**
 * Resolves to the data key from the entry addressed to this secret key's public key. Rejects with
 * ERR_CRYPTO_WRONG_KEY when no entry is for this key, ERR_CRYPTO_TAMPERED, ERR_CRYPTO_MALFORMED
 * (bad entry or key), ERR_CRYPTO_UNSUPPORTED_VERSION or ERR_CRYPTO_WRONG_KIND.
 */
export const unwrapKey: typeof api.unwrapKey = api.unwrapKey;
