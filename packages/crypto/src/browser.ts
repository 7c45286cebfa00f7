/**
 * @coffer/crypto, browser (`default`) build: SHA-384 digests, canonical JSON (RFC 8785), AES-256-GCM,
 * hybrid Ed25519 + ML-DSA-87 signatures, hybrid X25519 + ML-KEM-1024 sealing and multi-recipient
 * key wrapping, versioned key encodings and armoured key files.
 *
 * This entry binds WebCrypto (AES-GCM) and @noble (SHA-384) and imports no Node built-in. Its twin, index.ts,
 * binds node:crypto and exports exactly the same names (a test checks it); package.json's
 * `exports` picks one by the `node` / `default` conditions. Every failure is a CryptoError with a
 * stable `code`; no message carries key or plaintext bytes.
 */
import { bindPlatform } from './internal/api.ts';
import { webPlatform } from './internal/platform-web.ts';

export * from './internal/pure.ts';

export const {
  sha384,
  sha384Digest,
  createSha384,
  aeadEncrypt,
  aeadDecrypt,
  sign,
  verify,
  assertSignature,
  seal,
  open,
  wrapKey,
  unwrapKey,
} = bindPlatform(webPlatform);

/** Which bulk implementation this build uses: 'web' here, 'node' in the Node build. */
export const platformName: 'node' | 'web' = webPlatform.name;
