/**
 * Canonical JSON per RFC 8785 (JSON Canonicalization Scheme), via the maintained `canonicalize`
 * package (by one of the RFC's authors' collaborators, erdtman/canonicalize). It sorts object
 * members by UTF-16 code units, serialises numbers with ECMAScript's Number-to-String (which
 * RFC 8785 section 3.2.2.3 adopts) and strings with JSON.stringify escaping, and rejects lone
 * surrogates, NaN and Infinity.
 *
 * This wrapper adds what the RFC leaves to the caller: values with no JSON form (undefined,
 * functions, symbols, BigInt at the top level) and cycles become ERR_CRYPTO_MALFORMED instead of a
 * raw exception or an `undefined` result.
 */
import canonicalize from 'canonicalize';
import { CryptoError } from '../errors.ts';

/** RFC 8785 text of `value`. Throws ERR_CRYPTO_MALFORMED for values with no canonical JSON form. */
export function canonicalJson(value: unknown): string {
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch {
    throw new CryptoError(
      'ERR_CRYPTO_MALFORMED',
      'value has no canonical JSON form (cycle, BigInt, NaN, Infinity or lone surrogate)',
    );
  }
  if (typeof text !== 'string') {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'value has no JSON representation');
  }
  return text;
}

const encoder = new TextEncoder();

/** UTF-8 bytes of {@link canonicalJson}(value). Throws as canonicalJson does. */
export function canonicalJsonBytes(value: unknown): Uint8Array {
  return encoder.encode(canonicalJson(value));
}
