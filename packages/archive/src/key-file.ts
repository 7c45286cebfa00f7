/**
 * Reading a key file from disk for the reader: `openRun` and `verifyRun` take the binary recipient
 * secret key, and a person holds an armoured key file (what `coffer-recover keygen` or the engine
 * wrote; @coffer/crypto `decodeKeyFile` is the format). This is the one step between the two, so a
 * reader needs no knowledge of the decoded shape.
 *
 * Security: the key bytes are returned to the caller only; no error carries the file's content (a
 * half-pasted key must not be echoed), only its kind or the file system's error code.
 */
import { readFile, stat } from 'node:fs/promises';
import { decodeKeyFile, type KeyKind } from '@coffer/crypto';
import { ArchiveError } from './errors.ts';

/** A key file is a few kilobytes; anything much larger is the wrong file, refused before reading it. */
const MAX_KEY_FILE_BYTES = 64 * 1024;

/**
 * The key in the armoured key file at `path`, checked to be of `kind`: by default a recipient
 * secret key (the break-glass or operational key), as `openRun` / `verifyRun` take it as
 * `secretKey`; `'signer-public'` reads a signer public key (such as `_RECOVERY/signer.pub`) for
 * `signerPublicKey`. The fingerprint line of the file is checked against its key data.
 *
 * Throws the file system's error (`code` ENOENT, EACCES, ...) when the file cannot be read,
 * ArchiveError ERR_ARCHIVE_INVALID_ARGUMENT when it is not a regular file or too large to be a key
 * file, and the CryptoError of `decodeKeyFile` when its content is not a key file of `kind`:
 * ERR_CRYPTO_WRONG_KIND (for example a `.pub` file where the secret key was expected),
 * ERR_CRYPTO_MALFORMED (damaged, truncated, fingerprint mismatch) or ERR_CRYPTO_UNSUPPORTED_VERSION.
 */
export async function readKeyFile(
  path: string | URL,
  kind: KeyKind = 'recipient-secret',
): Promise<Uint8Array> {
  const st = await stat(path);
  if (!st.isFile())
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'key file is not a regular file' });
  if (st.size > MAX_KEY_FILE_BYTES) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'key file is too large to be a key file',
    });
  }
  return decodeKeyFile(await readFile(path, 'utf8'), kind).key;
}
