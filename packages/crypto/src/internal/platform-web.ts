/**
 * Bulk primitives for browsers (and any runtime with WebCrypto): AES-256-GCM on
 * `globalThis.crypto.subtle`, SHA-384 on @noble/hashes (WebCrypto's digest has no streaming form).
 * Imports no Node built-in; the browser-bundle test checks that.
 */
import { sha384 as nobleSha384 } from '@noble/hashes/sha2.js';
import { CryptoError } from '../errors.ts';
import type { Hasher, Platform } from './platform.ts';

const TAG_BITS = 128;

function subtle(): SubtleCrypto {
  const s = globalThis.crypto?.subtle;
  if (s === undefined) {
    // WebCrypto's subtle API exists only in secure contexts (https or localhost).
    throw new CryptoError(
      'ERR_CRYPTO_MALFORMED',
      'WebCrypto (crypto.subtle) is not available in this context',
    );
  }
  return s;
}

class WebHasher implements Hasher {
  #hash = nobleSha384.create();
  #done = false;

  update(chunk: Uint8Array): Hasher {
    if (this.#done) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hasher already produced its digest');
    if (!(chunk instanceof Uint8Array))
      throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hasher input must be a Uint8Array');
    this.#hash.update(chunk);
    return this;
  }

  digest(): Uint8Array {
    if (this.#done) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hasher already produced its digest');
    this.#done = true;
    return this.#hash.digest();
  }
}

async function importKey(key: Uint8Array, usage: KeyUsage): Promise<CryptoKey> {
  return subtle().importKey('raw', key as Uint8Array<ArrayBuffer>, { name: 'AES-GCM' }, false, [usage]);
}

async function encrypt(
  key: Uint8Array,
  nonce: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
): Promise<Uint8Array> {
  const k = await importKey(key, 'encrypt');
  const out = await subtle().encrypt(
    {
      name: 'AES-GCM',
      iv: nonce as Uint8Array<ArrayBuffer>,
      additionalData: aad as Uint8Array<ArrayBuffer>,
      tagLength: TAG_BITS,
    },
    k,
    plaintext as Uint8Array<ArrayBuffer>,
  );
  return new Uint8Array(out);
}

async function decrypt(
  key: Uint8Array,
  nonce: Uint8Array,
  sealed: Uint8Array,
  aad: Uint8Array,
): Promise<Uint8Array | null> {
  const k = await importKey(key, 'decrypt');
  try {
    const out = await subtle().decrypt(
      {
        name: 'AES-GCM',
        iv: nonce as Uint8Array<ArrayBuffer>,
        additionalData: aad as Uint8Array<ArrayBuffer>,
        tagLength: TAG_BITS,
      },
      k,
      sealed as Uint8Array<ArrayBuffer>,
    );
    return new Uint8Array(out);
  } catch {
    return null;
  }
}

/** The WebCrypto + @noble platform bound by the browser entry point (src/browser.ts). */
export const webPlatform: Platform = {
  name: 'web',
  sha384(data: Uint8Array): Uint8Array {
    if (!(data instanceof Uint8Array))
      throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hash input must be a Uint8Array');
    return nobleSha384(data);
  },
  createSha384(): Hasher {
    return new WebHasher();
  },
  aesGcmEncrypt: encrypt,
  aesGcmDecrypt: decrypt,
};
