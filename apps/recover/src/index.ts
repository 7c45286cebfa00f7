/**
 * @coffer/recover: the offline recovery CLI `coffer-recover` (bin: dist/cli.js) and, for tools that
 * embed it, its entry point, exit codes, errors and the extraction-path encoding.
 *
 * Security: record names from an archive are mapped to paths that cannot leave the target
 * directory (see recordPath); key material and credentials never appear in output.
 */

export { isRecoverError, RECOVER_ERROR_CODES, RecoverError, type RecoverErrorCode } from './errors.ts';
export { EXIT, type ExitCode } from './exit-codes.ts';
export type { Io } from './internal/output.ts';
export { encodeSegment, recordPath } from './internal/safe-name.ts';
export { main, version } from './main.ts';
