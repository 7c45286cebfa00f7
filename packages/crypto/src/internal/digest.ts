/**
 * The `sha384:<hex>` digest text used for content addresses and key fingerprints.
 * Exactly 96 lower-case hex characters after the prefix; anything else is refused so that one
 * digest has exactly one spelling.
 */
import { CryptoError } from '../errors.ts';
import { fromHex, toHex } from './bytes.ts';

/** A SHA-384 digest as text: `sha384:` then 96 lower-case hex characters. */
export type Digest = `sha384:${string}`;

/** Byte length of a SHA-384 digest. */
export const SHA384_BYTES = 48;

const DIGEST_RE = /^sha384:[0-9a-f]{96}$/;

/** `sha384:<hex>` text of a 48-byte digest. Throws ERR_CRYPTO_MALFORMED for another length. */
export function formatDigest(bytes: Uint8Array): Digest {
  if (!(bytes instanceof Uint8Array) || bytes.length !== SHA384_BYTES) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'a SHA-384 digest is 48 bytes');
  }
  return `sha384:${toHex(bytes)}`;
}

/** The 48 bytes of a `sha384:<96 lower-case hex>` text. Throws ERR_CRYPTO_MALFORMED otherwise. */
export function parseDigest(text: string): Uint8Array {
  if (typeof text !== 'string' || !DIGEST_RE.test(text)) {
    throw new CryptoError(
      'ERR_CRYPTO_MALFORMED',
      'digest must be "sha384:" followed by 96 lower-case hex characters',
    );
  }
  return fromHex(text.slice(7));
}

/** True when `text` is a well-formed Digest. */
export function isDigest(text: unknown): text is Digest {
  return typeof text === 'string' && DIGEST_RE.test(text);
}
