/**
 * Typed errors of `coffer-recover`. Every failure the CLI reports is a RecoverError with a stable
 * `code` (callers and `--json` consumers switch on it), the process exit code it maps to, and,
 * where one is involved, the object it concerns (an object key, a record name, a file path).
 *
 * Security: messages name objects and say what failed; they never carry key material, credential
 * values or record bytes. Errors from dependencies are translated here (see toRecoverError in
 * internal/translate.ts) so no raw dependency message escapes with unknown content.
 */
import { EXIT, type ExitCode } from './exit-codes.ts';

export const RECOVER_ERROR_CODES = {
  ERR_RECOVER_USAGE: EXIT.USAGE,
  ERR_RECOVER_FAILED: EXIT.FAILURE,
  ERR_RECOVER_IO: EXIT.FAILURE,
  ERR_RECOVER_RUNTIME: EXIT.FAILURE,
  ERR_RECOVER_VERIFY_FAILED: EXIT.VERIFY_FAILED,
  ERR_RECOVER_KEY: EXIT.KEY,
  ERR_RECOVER_NOT_FOUND: EXIT.NOT_FOUND,
  ERR_RECOVER_UNSUPPORTED_VERSION: EXIT.UNSUPPORTED_VERSION,
  ERR_RECOVER_EXISTS: EXIT.REFUSED_WRITE,
  ERR_RECOVER_UNSAFE_PATH: EXIT.REFUSED_WRITE,
  ERR_RECOVER_SIGNER_NOT_PINNED: EXIT.SIGNER_NOT_PINNED,
  ERR_RECOVER_STORE: EXIT.STORE,
  ERR_RECOVER_SIGNER_UNPINNED: EXIT.SIGNER_UNPINNED,
  ERR_RECOVER_INTERRUPTED: EXIT.INTERRUPTED,
} as const satisfies Record<string, ExitCode>;

export type RecoverErrorCode = keyof typeof RECOVER_ERROR_CODES;

/** Base (and only) error class: `code` says what failed, `exitCode` what the process returns. */
export class RecoverError extends Error {
  readonly code: RecoverErrorCode;
  readonly exitCode: ExitCode;
  /** The object concerned (object key, record name, file path), when there is one. */
  readonly object: string | undefined;
  /** The code of the underlying library error (e.g. ERR_ARCHIVE_TAMPERED), when there is one. */
  readonly causeCode: string | undefined;

  constructor(
    code: RecoverErrorCode,
    message: string,
    options: { object?: string; causeCode?: string } = {},
  ) {
    super(message);
    this.name = 'RecoverError';
    this.code = code;
    this.exitCode = RECOVER_ERROR_CODES[code];
    this.object = options.object;
    this.causeCode = options.causeCode;
  }
}

/** True when `e` is a RecoverError (checked by shape, so it survives bundling and realms). */
export function isRecoverError(e: unknown): e is RecoverError {
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof (e as { code?: unknown }).code === 'string' &&
    (e as { code: string }).code in RECOVER_ERROR_CODES &&
    typeof (e as { exitCode?: unknown }).exitCode === 'number'
  );
}
