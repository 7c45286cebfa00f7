/**
 * @coffer/crypto, `node` build: SHA-384 digests, canonical JSON (RFC 8785), AES-256-GCM,
 * hybrid Ed25519 + ML-DSA-87 signatures, hybrid X25519 + ML-KEM-1024 sealing and multi-recipient
 * key wrapping, versioned key encodings and armoured key files.
 *
 * This entry binds the node:crypto platform (native SHA-384 and AES-GCM). Its twin, browser.ts,
 * binds WebCrypto + @noble and exports exactly the same names (a test checks it); package.json's
 * `exports` picks one by the `node` / `default` conditions. Every failure is a CryptoError with a
 * stable `code`; no message carries key or plaintext bytes.
 */
import { bindPlatform } from './internal/api.ts';
import { nodePlatform } from './internal/platform-node.ts';

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
} = bindPlatform(nodePlatform);

/** Which bulk implementation this build uses: 'node' here, 'web' in the browser build. */
export const platformName: 'node' | 'web' = nodePlatform.name;
