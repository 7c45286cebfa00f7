/**
 * Typed errors of @coffer/crypto.
 *
 * Every failure leaving the public API is a {@link CryptoError} with a stable string `code`;
 * callers switch on `code`, never on the message. Messages are fixed English sentences chosen by
 * this package: they never contain key material, plaintext, shared secrets or any input bytes, and
 * no exception raised by a dependency (noble, node:crypto, WebCrypto) is passed through.
 */

/** Every code a {@link CryptoError} can carry (listed in docs/errors.md). */
export const CRYPTO_ERROR_CODES = [
  'ERR_CRYPTO_MALFORMED',
  'ERR_CRYPTO_UNSUPPORTED_VERSION',
  'ERR_CRYPTO_WRONG_KEY',
  'ERR_CRYPTO_TAMPERED',
  'ERR_CRYPTO_WRONG_KIND',
  'ERR_CRYPTO_BAD_SIGNATURE',
] as const;

/** A stable error code; see docs/errors.md for the meaning of each. */
export type CryptoErrorCode = (typeof CRYPTO_ERROR_CODES)[number];

/** The one error class of this package. `code` says what went wrong; `message` is for people. */
export class CryptoError extends Error {
  readonly code: CryptoErrorCode;

  constructor(code: CryptoErrorCode, message: string) {
    super(message);
    this.name = 'CryptoError';
    this.code = code;
  }
}

/** Type guard for callers that catch unknown values. */
export function isCryptoError(value: unknown): value is CryptoError {
  return value instanceof CryptoError;
}
