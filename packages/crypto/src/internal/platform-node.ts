/**
 * Bulk primitives on node:crypto (OpenSSL): SHA-384 and AES-256-GCM at native speed.
 *
 * Encryption is fed in 64 KiB pieces, each copied at once (while still in cache) into one
 * unzeroed, exactly sized ciphertext || tag buffer: the contract wants one contiguous result and
 * node:crypto cannot write into a caller's buffer, so one copy is unavoidable. (On Node 24 the
 * piece size, 32 KiB to 1 MiB, made no difference beyond noise; see bench/crypto-bench.ts.)
 * Decryption makes one update call and returns node's own output buffer without a copy when it is
 * a dedicated allocation (copying only small, pool-backed results so no caller ever holds a view on
 * Node's shared buffer pool). Plaintext is returned only after the tag verifies, and is wiped when
 * it does not.
 */
import { Buffer } from 'node:buffer';
import { createCipheriv, createDecipheriv, createHash, type Hash } from 'node:crypto';
import { CryptoError } from '../errors.ts';
import type { Hasher, Platform } from './platform.ts';

const PIECE = 64 * 1024;
const TAG_BYTES = 16;

function copyOut(buffer: Uint8Array): Uint8Array {
  // A plain Uint8Array (not a Buffer view on a shared pool) so results look the same on every platform.
  return new Uint8Array(buffer);
}

class NodeHasher implements Hasher {
  #hash: Hash;
  #done = false;

  constructor() {
    this.#hash = createHash('sha384');
  }

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
    return copyOut(this.#hash.digest());
  }
}

function encrypt(
  key: Uint8Array,
  nonce: Uint8Array,
  plaintext: Uint8Array,
  aad: Uint8Array,
): Promise<Uint8Array> {
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  // Not zero-filled: every byte is overwritten below (ciphertext, then tag) before it is returned.
  const slow = Buffer.allocUnsafeSlow(plaintext.length + TAG_BYTES);
  const out = new Uint8Array(slow.buffer, slow.byteOffset, slow.length);
  let offset = 0;
  for (let start = 0; start < plaintext.length; start += PIECE) {
    const piece = cipher.update(plaintext.subarray(start, Math.min(plaintext.length, start + PIECE)));
    out.set(piece, offset);
    offset += piece.length;
  }
  const last = cipher.final();
  out.set(last, offset);
  offset += last.length;
  out.set(cipher.getAuthTag(), offset);
  return Promise.resolve(out);
}

function decrypt(
  key: Uint8Array,
  nonce: Uint8Array,
  sealed: Uint8Array,
  aad: Uint8Array,
): Promise<Uint8Array | null> {
  const bodyLength = sealed.length - TAG_BYTES;
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(bodyLength));
  const out = decipher.update(sealed.subarray(0, bodyLength));
  try {
    decipher.final();
  } catch {
    out.fill(0);
    return Promise.resolve(null);
  }
  if (out.byteOffset === 0 && out.buffer.byteLength === out.length) {
    return Promise.resolve(new Uint8Array(out.buffer, 0, out.length));
  }
  const copy = new Uint8Array(out);
  out.fill(0);
  return Promise.resolve(copy);
}

/** The node:crypto platform bound by the `node` entry point (src/index.ts). */
export const nodePlatform: Platform = {
  name: 'node',
  sha384(data: Uint8Array): Uint8Array {
    return copyOut(createHash('sha384').update(data).digest());
  },
  createSha384(): Hasher {
    return new NodeHasher();
  },
  aesGcmEncrypt: encrypt,
  aesGcmDecrypt: decrypt,
};
