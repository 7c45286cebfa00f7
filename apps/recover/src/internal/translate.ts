/**
 * Translates errors from dependencies (@coffer/archive, @coffer/crypto, @coffer/objectstore,
 * node:fs) into RecoverError, so the CLI's exit code follows the documented contract and no raw
 * dependency exception escapes.
 *
 * Security: the messages of coded Coffer errors are kept (their packages promise they hold no
 * secrets, and they name the object), flattened to one line. Errors without a Coffer code are never
 * echoed verbatim: a JSON.parse or decoder message can quote the bytes it choked on, which may be
 * decrypted backup content; only the error's class and errno-style code are printed.
 */
import { isRecoverError, RecoverError, type RecoverErrorCode } from '../errors.ts';
import { oneLine } from './output.ts';

interface Coded {
  code: string;
  message: string;
  key?: unknown;
  objectKey?: unknown;
  object?: unknown;
}

function coded(e: unknown): Coded | null {
  if (typeof e !== 'object' || e === null) return null;
  const code = (e as { code?: unknown }).code;
  if (typeof code !== 'string') return null;
  return e as Coded;
}

/**
 * Every code of @coffer/crypto, @coffer/objectstore and @coffer/archive, mapped to ours (a test
 * checks the table covers each package's exported code list). An unknown future ERR_ARCHIVE_ code
 * counts as a verification failure: refusing is the safe reading of an archive fault.
 */
export const CODE_MAP: Record<string, RecoverErrorCode> = {
  ERR_CRYPTO_MALFORMED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_CRYPTO_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_CRYPTO_BAD_SIGNATURE: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_CRYPTO_WRONG_KEY: 'ERR_RECOVER_KEY',
  ERR_CRYPTO_WRONG_KIND: 'ERR_RECOVER_KEY',
  ERR_CRYPTO_UNSUPPORTED_VERSION: 'ERR_RECOVER_UNSUPPORTED_VERSION',
  ERR_OBJECTSTORE_NOT_FOUND: 'ERR_RECOVER_NOT_FOUND',
  ERR_OBJECTSTORE_ACCESS_DENIED: 'ERR_RECOVER_STORE',
  ERR_OBJECTSTORE_THROTTLED: 'ERR_RECOVER_STORE',
  ERR_OBJECTSTORE_REJECTED: 'ERR_RECOVER_STORE',
  ERR_OBJECTSTORE_TOO_LARGE: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_OBJECTSTORE_FAULT: 'ERR_RECOVER_STORE',
  ERR_OBJECTSTORE_PRECONDITION_FAILED: 'ERR_RECOVER_STORE',
  ERR_OBJECTSTORE_INVALID_KEY: 'ERR_RECOVER_FAILED',
  ERR_OBJECTSTORE_INVALID_CONFIG: 'ERR_RECOVER_USAGE',
  ERR_ARCHIVE_INVALID_ARGUMENT: 'ERR_RECOVER_USAGE',
  ERR_ARCHIVE_INVALID_STATE: 'ERR_RECOVER_FAILED',
  ERR_ARCHIVE_UNSUPPORTED_VERSION: 'ERR_RECOVER_UNSUPPORTED_VERSION',
  ERR_ARCHIVE_NOT_FOUND: 'ERR_RECOVER_NOT_FOUND',
  ERR_ARCHIVE_AMBIGUOUS_RUN: 'ERR_RECOVER_USAGE',
  ERR_ARCHIVE_MANIFEST_MALFORMED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_MANIFEST_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_MANIFEST_REPLAYED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SIGNATURE_MISSING: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_BAD_SIGNATURE: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SIGNER_NOT_PINNED: 'ERR_RECOVER_SIGNER_NOT_PINNED',
  ERR_ARCHIVE_WRONG_KEY: 'ERR_RECOVER_KEY',
  ERR_ARCHIVE_SHARD_MISSING: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SHARD_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SHARD_TRANSPLANTED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SHARD_MISPLACED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_INDEX_MISSING: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_INDEX_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_INDEX_INCONSISTENT: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_RECORD_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_PACK_MISSING: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_CHUNK_MISSING: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_CHUNK_TAMPERED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_TRUNCATED: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_SHARD_ID_OVERFLOW: 'ERR_RECOVER_VERIFY_FAILED',
  ERR_ARCHIVE_CHECKPOINT_UNREADABLE: 'ERR_RECOVER_FAILED',
  ERR_ARCHIVE_RESUME_DIVERGENT: 'ERR_RECOVER_FAILED',
  ERR_ARCHIVE_SOURCE_READ: 'ERR_RECOVER_FAILED',
  ERR_ARCHIVE_DESTINATION: 'ERR_RECOVER_STORE',
  ERR_ARCHIVE_INTERNAL: 'ERR_RECOVER_FAILED',
  ERR_ARCHIVE_UNSUPPORTED_RUNTIME: 'ERR_RECOVER_RUNTIME',
};

/** Our code for a dependency's error code (and, for store errors wrapped by the archive, the store's). */
export function mapCode(code: string, storeErrorCode?: string): RecoverErrorCode | undefined {
  if (code === 'ERR_ARCHIVE_DESTINATION' && storeErrorCode !== undefined) {
    const inner = CODE_MAP[storeErrorCode];
    if (inner !== undefined) return inner;
  }
  const exact = CODE_MAP[code];
  if (exact !== undefined) return exact;
  if (code.startsWith('ERR_ARCHIVE_')) return 'ERR_RECOVER_VERIFY_FAILED';
  return undefined;
}

/**
 * The hint added to a missing pack or chunk: a 0.2 run reads packs stored by earlier runs of its
 * job, so a copy of one run's folder (rather than the job's whole prefix) fails this way.
 */
export function chainHint(code: string, job?: string | null): string {
  if (code !== 'ERR_ARCHIVE_PACK_MISSING' && code !== 'ERR_ARCHIVE_CHUNK_MISSING') return '';
  const prefix = job ? `jobs/${oneLine(job, 200)}/` : 'jobs/<job>/';
  return ` (a format 0.2 run reads packs stored by earlier runs of its job: the whole ${prefix} prefix, packs included, must be present)`;
}

/** The job named by an object key `jobs/<job>/...`, when it is one. */
function jobOfObject(object: string | undefined): string | null {
  const m = object === undefined ? null : /^jobs\/([^/]+)\//.exec(object);
  return m ? m[1]! : null;
}

/** The object a coded error concerns, when it says. */
function objectOf(e: Coded): string | undefined {
  for (const v of [e.objectKey, e.key, e.object]) if (typeof v === 'string' && v !== '') return v;
  return undefined;
}

/**
 * Maps any thrown value to a RecoverError. `context` is prefixed to the message ("run R", "key
 * file F") so the line names what was being worked on.
 */
export function toRecoverError(e: unknown, context?: string): RecoverError {
  if (isRecoverError(e)) return e;
  const prefix = context ? `${context}: ` : '';
  const c = coded(e);
  if (c?.code.startsWith('ERR_')) {
    const storeErrorCode = (e as { storeErrorCode?: unknown }).storeErrorCode;
    const target = mapCode(c.code, typeof storeErrorCode === 'string' ? storeErrorCode : undefined);
    if (target !== undefined) {
      const object = objectOf(c);
      let message = oneLine(c.message || c.code, 600);
      if (object !== undefined && !message.includes(object)) message = `${object}: ${message}`;
      if (c.code === 'ERR_ARCHIVE_AMBIGUOUS_RUN') message += ' (name the job with --job JOB)';
      message += chainHint(c.code, jobOfObject(object));
      return new RecoverError(target, `${prefix}${message}`, {
        causeCode: c.code,
        ...(object ? { object } : {}),
      });
    }
  }
  if (c && /^E[A-Z]+$/.test(c.code)) {
    const path = (e as { path?: unknown }).path;
    return fsError(e, typeof path === 'string' ? path : (context ?? 'file'), 'cannot access');
  }
  if ((e as { name?: unknown })?.name === 'AbortError') {
    return new RecoverError('ERR_RECOVER_INTERRUPTED', `${prefix}interrupted`);
  }
  const kind = e instanceof Error ? e.name : typeof e;
  const code = c ? ` ${oneLine(c.code, 64)}` : '';
  return new RecoverError(
    'ERR_RECOVER_FAILED',
    `${prefix}unexpected ${kind}${code} (details withheld: they may quote archive bytes)`,
  );
}

/** Maps a node:fs error about `path` to a RecoverError naming the path and the errno code. */
export function fsError(e: unknown, path: string, what: string): RecoverError {
  const errno = (e as NodeJS.ErrnoException)?.code ?? 'EIO';
  const reason: Record<string, string> = {
    ENOENT: 'no such file or directory',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    EEXIST: 'already exists',
    ENOTDIR: 'a path component is not a directory',
    EISDIR: 'is a directory',
    ENOSPC: 'no space left on the device',
    ENAMETOOLONG: 'path too long',
    ELOOP: 'is a symbolic link (not followed)',
    EROFS: 'read-only file system',
  };
  const text = `${what} ${path}: ${reason[errno] ?? 'I/O error'} (${errno})`;
  if (errno === 'EEXIST')
    return new RecoverError('ERR_RECOVER_EXISTS', text, { object: path, causeCode: errno });
  return new RecoverError('ERR_RECOVER_IO', text, { object: path, causeCode: errno });
}
