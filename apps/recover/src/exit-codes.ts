/**
 * The process exit-code contract of `coffer-recover` (in the manner of restic's scripting
 * contract). Scripts switch on these numbers, so a number never changes meaning; new failures get
 * new numbers. Documented in apps/recover/README.md ("Exit codes"); a test keeps them in step.
 */
export const EXIT = {
  /** Every requested step succeeded (for `verify`: every check passed). */
  OK: 0,
  /** A failure that fits no narrower code (an I/O error on the local disk, an engine bug). */
  FAILURE: 1,
  /** The command line is wrong: unknown command or option, missing or conflicting options. */
  USAGE: 2,
  /** The archive failed verification: a signature, hash or AEAD check failed, or an object is missing or truncated. */
  VERIFY_FAILED: 3,
  /** The key is the problem: unreadable or malformed key file, wrong kind, or the run is not sealed to this key. */
  KEY: 4,
  /** The run, job, record or store location asked for does not exist. */
  NOT_FOUND: 5,
  /** The archive's format version is not one this reader implements (0.1.x, 0.2.x). Required by the specification. */
  UNSUPPORTED_VERSION: 6,
  /** Refused to write: the target exists (no `--force`), or writing would leave the target directory. */
  REFUSED_WRITE: 7,
  /** The archive is validly signed, but not by the signer pinned with `--pin-signer`. */
  SIGNER_NOT_PINNED: 8,
  /** The object store could not be reached or refused access (credentials, network, throttling). */
  STORE: 9,
  /**
   * `verify` / `extract` refused: no signer is pinned (`--pin-signer`) and `--trust-unpinned-signer`
   * was not given. The message names the run's signer fingerprint to pin.
   */
  SIGNER_UNPINNED: 10,
  /** Interrupted by SIGINT or SIGTERM before finishing. */
  INTERRUPTED: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];
