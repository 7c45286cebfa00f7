/**
 * Byte helpers shared by every module: hex, base64/base64url, concatenation, big-endian integers,
 * constant-time comparison and random bytes. Pure code, identical on Node and in browsers.
 *
 * Decoders are strict (no whitespace, no mixed alphabets, canonical padding only) so that one
 * encoded form maps to exactly one byte string; errors never echo the input.
 */
import { CryptoError } from '../errors.ts';

const HEX = '0123456789abcdef';

/** Lower-case hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += HEX[b >> 4]! + HEX[b & 15]!;
  return out;
}

function hexNibble(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 102) return code - 87;
  if (code >= 65 && code <= 70) return code - 55;
  return -1;
}

/** Bytes of a hex string (either case). Throws ERR_CRYPTO_MALFORMED on odd length or a non-hex character. */
export function fromHex(text: string): Uint8Array {
  if (typeof text !== 'string' || text.length % 2 !== 0) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hex text must have an even number of characters');
  }
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) {
    const hi = hexNibble(text.charCodeAt(2 * i));
    const lo = hexNibble(text.charCodeAt(2 * i + 1));
    if (hi < 0 || lo < 0)
      throw new CryptoError('ERR_CRYPTO_MALFORMED', 'hex text contains a non-hex character');
    out[i] = (hi << 4) | lo;
  }
  return out;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const DECODE_B64 = makeDecodeTable(B64);
const DECODE_B64URL = makeDecodeTable(B64URL);

function makeDecodeTable(alphabet: string): Int16Array {
  const table = new Int16Array(128).fill(-1);
  for (let i = 0; i < alphabet.length; i++) table[alphabet.charCodeAt(i)] = i;
  return table;
}

function encode64(bytes: Uint8Array, alphabet: string, pad: boolean): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + alphabet[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + (pad ? '==' : '');
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += alphabet[n >> 18]! + alphabet[(n >> 12) & 63]! + alphabet[(n >> 6) & 63]! + (pad ? '=' : '');
  }
  return out;
}

function decode64(text: string, table: Int16Array, padded: boolean, what: string): Uint8Array {
  if (typeof text !== 'string') throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} must be a string`);
  let body = text;
  if (padded) {
    if (text.length % 4 !== 0) throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} has a bad length`);
    if (body.endsWith('==')) body = body.slice(0, -2);
    else if (body.endsWith('=')) body = body.slice(0, -1);
  }
  const rem = body.length % 4;
  if (rem === 1) throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} has a bad length`);
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    const v = c < 128 ? table[c]! : -1;
    if (v < 0)
      throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} contains a character outside its alphabet`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 255;
    }
    acc &= (1 << bits) - 1;
  }
  // Non-zero leftover bits mean a non-canonical encoding: two texts for one byte string.
  if (acc !== 0) throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} is not canonically encoded`);
  return out;
}

/** Unpadded base64url (RFC 4648 section 5) of `bytes`. */
export function toBase64Url(bytes: Uint8Array): string {
  return encode64(bytes, B64URL, false);
}

/** Bytes of unpadded canonical base64url text. Throws ERR_CRYPTO_MALFORMED. */
export function fromBase64Url(text: string): Uint8Array {
  return decode64(text, DECODE_B64URL, false, 'base64url text');
}

/** Padded standard base64 (RFC 4648 section 4), used inside armoured key files. */
export function toBase64(bytes: Uint8Array): string {
  return encode64(bytes, B64, true);
}

/** Bytes of padded canonical standard base64. Throws ERR_CRYPTO_MALFORMED. */
export function fromBase64(text: string): Uint8Array {
  return decode64(text, DECODE_B64, true, 'base64 text');
}

/** Concatenation of `parts` into a fresh array. */
export function concatBytes(...parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/** 4-byte big-endian encoding of an unsigned 32-bit integer. */
export function u32be(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n, false);
  return out;
}

const encoder = new TextEncoder();
// With the `u` flag a surrogate pair is one code point, so this matches only lone surrogates.
const LONE_SURROGATE = /\p{Cs}/u;

/** UTF-8 bytes of an ASCII label (for fixed domain-separation strings). */
export function ascii(text: string): Uint8Array {
  return encoder.encode(text);
}

/** UTF-8 bytes of `text`; throws ERR_CRYPTO_MALFORMED for lone surrogates (which would encode ambiguously). */
export function utf8(text: string): Uint8Array {
  if (typeof text !== 'string' || LONE_SURROGATE.test(text)) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'text must be a well-formed Unicode string');
  }
  return encoder.encode(text);
}

/**
 * True when `a` and `b` hold the same bytes. The running time depends only on the length, not on
 * where the arrays differ; different lengths return false at once (lengths are not secret here).
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (!(a instanceof Uint8Array) || !(b instanceof Uint8Array) || a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** `n` bytes from the platform CSPRNG (globalThis.crypto.getRandomValues on Node 22+ and browsers). */
export function randomBytes(n: number): Uint8Array {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'randomBytes needs a non-negative integer length');
  }
  const out = new Uint8Array(n);
  // getRandomValues fills at most 65536 bytes per call.
  for (let offset = 0; offset < n; offset += 65536) {
    globalThis.crypto.getRandomValues(out.subarray(offset, Math.min(n, offset + 65536)));
  }
  return out;
}

/** Throws ERR_CRYPTO_MALFORMED unless `value` is a Uint8Array (of `length` bytes when given). */
export function checkBytes(value: unknown, what: string, length?: number): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array))
    throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} must be a Uint8Array`);
  if (length !== undefined && value.length !== length) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', `${what} must be ${length} bytes`);
  }
}
