/**
 * The platform-specific bulk primitives. Two implementations exist: platform-node.ts
 * (node:crypto, native speed) and platform-web.ts (WebCrypto AES-GCM, @noble SHA-384). Each
 * entry point (index.ts for the `node` condition, browser.ts for `default`) binds one of them;
 * everything else is shared pure code that receives the platform as an argument.
 */

/** A streaming SHA-384 computation. `digest()` may be called once. */
export interface Hasher {
  update(chunk: Uint8Array): Hasher;
  digest(): Uint8Array;
}

/** What an entry point provides to the shared code. */
export interface Platform {
  readonly name: 'node' | 'web';
  sha384(data: Uint8Array): Uint8Array;
  createSha384(): Hasher;
  /** AES-256-GCM; arguments already validated; returns ciphertext || 16-byte tag. */
  aesGcmEncrypt(
    key: Uint8Array,
    nonce: Uint8Array,
    plaintext: Uint8Array,
    aad: Uint8Array,
  ): Promise<Uint8Array>;
  /** AES-256-GCM open; resolves to null when the tag does not verify (never throws for that). */
  aesGcmDecrypt(
    key: Uint8Array,
    nonce: Uint8Array,
    sealed: Uint8Array,
    aad: Uint8Array,
  ): Promise<Uint8Array | null>;
}
