/**
 * Typed errors of @coffer/update. Callers switch on `code`, never on messages or `instanceof`.
 *
 * Messages name the check that failed and, where useful, versions, sequence numbers, sizes and
 * fingerprints (all public facts of a signed channel). They never carry key bytes, a deploy token,
 * URL credentials or artefact bytes. The lifecycle machine reports a refused step with one of these
 * codes in its `stop` effect instead of throwing; see docs/updates.md "Update lifecycle".
 */

/** The stable codes of this package, in the order docs/errors.md lists them. */
export const UPDATE_ERROR_CODES = [
  // Channel document and signature.
  'ERR_UPDATE_MALFORMED_CHANNEL',
  'ERR_UPDATE_WRONG_SIGNER',
  'ERR_UPDATE_BAD_SIGNATURE',
  'ERR_UPDATE_EXPIRED',
  'ERR_UPDATE_NOT_YET_VALID',
  'ERR_UPDATE_SEQUENCE_ROLLBACK',
  'ERR_UPDATE_TRUST_CONFIG',
  // Fetching and artefacts.
  'ERR_UPDATE_INSECURE_URL',
  'ERR_UPDATE_REDIRECT',
  'ERR_UPDATE_FETCH',
  'ERR_UPDATE_TIMEOUT',
  'ERR_UPDATE_TOO_LARGE',
  'ERR_UPDATE_ARTEFACT_SIZE',
  'ERR_UPDATE_ARTEFACT_HASH',
  'ERR_UPDATE_UNKNOWN_COMPONENT',
  // Version guards.
  'ERR_UPDATE_BELOW_FLOOR',
  'ERR_UPDATE_FORWARD_ONLY',
  'ERR_UPDATE_MIGRATION_GUARD',
  'ERR_UPDATE_INCOMPATIBLE',
  'ERR_UPDATE_SCHEMA_EPOCH',
  // Lifecycle.
  'ERR_UPDATE_NO_ROLLBACK_TARGET',
  'ERR_UPDATE_NO_DESTINATION',
  'ERR_UPDATE_UPLOAD',
  'ERR_UPDATE_READ_BACK',
  'ERR_UPDATE_PROMOTE',
  'ERR_UPDATE_NO_PENDING',
  'ERR_UPDATE_RAMP_RECORD',
  'ERR_UPDATE_NOT_RAMP_RECORD',
  'ERR_UPDATE_RAMP_CONSOLE',
  'ERR_UPDATE_INVALID_TRANSITION',
  'ERR_UPDATE_DEPLOY',
  'ERR_UPDATE_INVALID_ARGUMENT',
] as const;

/** One of {@link UPDATE_ERROR_CODES}. */
export type UpdateErrorCode = (typeof UPDATE_ERROR_CODES)[number];

/** Every error this package throws; switch on `code`. */
export class UpdateError extends Error {
  readonly code: UpdateErrorCode;
  /** For ERR_UPDATE_FETCH: the HTTP status when the server answered, else undefined. */
  readonly status: number | undefined;

  constructor(code: UpdateErrorCode, message: string, options: { status?: number } = {}) {
    super(message);
    this.name = 'UpdateError';
    this.code = code;
    this.status = options.status;
  }
}

/** True when `e` is an UpdateError (by shape, so it survives bundling), optionally of `code`. */
export function isUpdateError(e: unknown, code?: UpdateErrorCode): e is UpdateError {
  const c = (e as { code?: unknown } | null)?.code;
  return (
    typeof c === 'string' &&
    (UPDATE_ERROR_CODES as readonly string[]).includes(c) &&
    (code === undefined || c === code)
  );
}
