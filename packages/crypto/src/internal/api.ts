/**
 * The platform-bound half of the public API. Each entry point calls {@link bindPlatform} once with
 * its platform (node:crypto or WebCrypto) and re-exports the result, so both builds expose the same
 * functions with the same behaviour and only the bulk primitives differ.
 */
import { CryptoError } from '../errors.ts';
import { checkBytes, fromBase64Url, toBase64Url } from './bytes.ts';
import { type Digest, formatDigest, isDigest } from './digest.ts';
import { fingerprint, parseRecipientSecret } from './keys.ts';
import type { Hasher, Platform } from './platform.ts';
import { asCryptoError, openExpanded, openWith, PURPOSE_SEAL, PURPOSE_WRAP_KEY, sealWith } from './seal.ts';
import { signWith, verifyWith } from './signature.ts';

/** AES-256-GCM key length. */
export const AEAD_KEY_BYTES = 32;
/** AES-256-GCM nonce length. */
export const AEAD_NONCE_BYTES = 12;
/** AES-256-GCM tag length (appended to the ciphertext). */
export const AEAD_TAG_BYTES = 16;

/** One data key sealed to one recipient: `recipient` is the fingerprint of its public key. */
export interface WrappedKey {
  recipient: Digest;
  capsule: string;
}

function checkAeadArgs(key: Uint8Array, nonce: Uint8Array, data: Uint8Array, aad: Uint8Array): void {
  checkBytes(key, 'AEAD key', AEAD_KEY_BYTES);
  checkBytes(nonce, 'AEAD nonce', AEAD_NONCE_BYTES);
  checkBytes(data, 'AEAD input');
  checkBytes(aad, 'AEAD associated data');
}

/** The platform-bound functions of the public API (documented where src/index.ts exports them). */
export function bindPlatform(platform: Platform) {
  return {
    sha384(data: Uint8Array): Uint8Array {
      checkBytes(data, 'hash input');
      return platform.sha384(data);
    },

    sha384Digest(data: Uint8Array): Digest {
      checkBytes(data, 'hash input');
      return formatDigest(platform.sha384(data));
    },

    createSha384(): Hasher {
      return platform.createSha384();
    },

    async aeadEncrypt(
      key: Uint8Array,
      nonce: Uint8Array,
      plaintext: Uint8Array,
      aad: Uint8Array,
    ): Promise<Uint8Array> {
      checkAeadArgs(key, nonce, plaintext, aad);
      try {
        return await platform.aesGcmEncrypt(key, nonce, plaintext, aad);
      } catch (e) {
        throw asCryptoError(e, 'AES-256-GCM encryption could not run');
      }
    },

    async aeadDecrypt(
      key: Uint8Array,
      nonce: Uint8Array,
      sealed: Uint8Array,
      aad: Uint8Array,
    ): Promise<Uint8Array> {
      checkAeadArgs(key, nonce, sealed, aad);
      if (sealed.length < AEAD_TAG_BYTES)
        throw new CryptoError('ERR_CRYPTO_TAMPERED', 'AEAD input is shorter than its tag');
      let out: Uint8Array | null;
      try {
        out = await platform.aesGcmDecrypt(key, nonce, sealed, aad);
      } catch (e) {
        throw asCryptoError(e, 'AES-256-GCM decryption could not run');
      }
      if (out === null) throw new CryptoError('ERR_CRYPTO_TAMPERED', 'AEAD authentication failed');
      return out;
    },

    sign(secretKey: Uint8Array, message: Uint8Array, context: string): Uint8Array {
      return signWith(platform, secretKey, message, context);
    },

    verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array, context: string): boolean {
      return verifyWith(platform, publicKey, message, signature, context);
    },

    assertSignature(
      publicKey: Uint8Array,
      message: Uint8Array,
      signature: Uint8Array,
      context: string,
    ): void {
      if (!verifyWith(platform, publicKey, message, signature, context)) {
        throw new CryptoError('ERR_CRYPTO_BAD_SIGNATURE', 'signature does not verify');
      }
    },

    seal(recipientPublicKey: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): Promise<Uint8Array> {
      return sealWith(platform, recipientPublicKey, plaintext, aad, PURPOSE_SEAL);
    },

    open(recipientSecretKey: Uint8Array, capsule: Uint8Array, aad: Uint8Array): Promise<Uint8Array> {
      return openWith(platform, recipientSecretKey, capsule, aad, PURPOSE_SEAL);
    },

    async wrapKey(
      dataKey: Uint8Array,
      recipientPublicKeys: Uint8Array[],
      aad: Uint8Array,
    ): Promise<WrappedKey[]> {
      checkBytes(dataKey, 'data key');
      if (dataKey.length === 0) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'data key is empty');
      if (!Array.isArray(recipientPublicKeys) || recipientPublicKeys.length === 0) {
        throw new CryptoError('ERR_CRYPTO_MALFORMED', 'wrapKey needs at least one recipient');
      }
      const out: WrappedKey[] = [];
      const seen = new Set<string>();
      for (const pk of recipientPublicKeys) {
        const recipient = fingerprint(pk);
        if (seen.has(recipient)) continue;
        seen.add(recipient);
        const capsule = await sealWith(platform, pk, dataKey, aad, PURPOSE_WRAP_KEY);
        out.push({ recipient, capsule: toBase64Url(capsule) });
      }
      return out;
    },

    async unwrapKey(
      recipientSecretKey: Uint8Array,
      wrapped: WrappedKey[],
      aad: Uint8Array,
    ): Promise<Uint8Array> {
      if (!Array.isArray(wrapped))
        throw new CryptoError('ERR_CRYPTO_MALFORMED', 'wrapped keys must be an array');
      checkBytes(aad, 'aad');
      const recipient = parseRecipientSecret(recipientSecretKey);
      const wipe = () => {
        recipient.mlkemDecapsulationKey.fill(0);
        recipient.x25519Secret.fill(0);
      };
      const mine = fingerprint(recipient.publicKey);
      const entry = wrapped.find((w) => w !== null && typeof w === 'object' && w.recipient === mine);
      if (entry === undefined) {
        wipe();
        for (const w of wrapped) {
          if (w === null || typeof w !== 'object' || !isDigest(w.recipient)) {
            throw new CryptoError('ERR_CRYPTO_MALFORMED', 'a wrapped key entry is malformed');
          }
        }
        throw new CryptoError('ERR_CRYPTO_WRONG_KEY', 'no wrapped key is addressed to this recipient');
      }
      let capsule: Uint8Array;
      try {
        if (typeof entry.capsule !== 'string') {
          throw new CryptoError('ERR_CRYPTO_MALFORMED', 'wrapped key capsule must be text');
        }
        capsule = fromBase64Url(entry.capsule);
      } catch (e) {
        wipe();
        throw e;
      }
      // openExpanded wipes the recipient's secret material when it is done.
      return openExpanded(platform, recipient, capsule, aad, PURPOSE_WRAP_KEY);
    },
  };
}
