/**
 * Reads the secret key given with `--key FILE` (or `--key -` for stdin): a break-glass or
 * operational recipient secret key file as written by `keygen` (@coffer/crypto encodeKeyFile).
 *
 * Security: every failure exits 4 with a message naming the file and the problem, never the file's
 * content (a partly pasted key must not be echoed). A key file readable by group or others draws a
 * one-line warning. The returned secret bytes should be wiped by the caller when done.
 */
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { type Digest, decodeKeyFile, fingerprint, recipientPublicKeyFromSecret } from '@coffer/crypto';
import { RecoverError } from '../errors.ts';
import type { Io, Reporter } from './output.ts';

const MAX_KEY_FILE_BYTES = 1024 * 1024;

export interface LoadedKey {
  secretKey: Uint8Array;
  /** Fingerprint of the key's public half (safe to print; matches the .pub file). */
  publicFingerprint: Digest;
}

const KIND_HINT: Record<string, string> = {
  'recipient-public': 'is a public key; pass the secret key file (the one without .pub)',
  'signer-public': 'is a signer public key, not a recipient secret key',
  'signer-secret': 'is a signer secret key, not a recipient secret key',
};

/** Loads and decodes the recipient secret key at `path` ('-' = stdin). Throws RecoverError ERR_RECOVER_KEY. */
export async function loadSecretKey(path: string, io: Io, report: Reporter): Promise<LoadedKey> {
  const label = path === '-' ? 'key from stdin' : `key file ${resolve(path)}`;
  const fail = (why: string): RecoverError =>
    new RecoverError('ERR_RECOVER_KEY', `${label}: ${why}`, {
      object: path === '-' ? 'stdin' : resolve(path),
    });
  let text: string;
  if (path === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of io.stdin) {
      const b = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk);
      size += b.byteLength;
      if (size > MAX_KEY_FILE_BYTES) throw fail('too large to be a key file');
      chunks.push(b);
    }
    text = Buffer.concat(chunks).toString('utf8');
  } else {
    try {
      const st = await stat(path);
      if (!st.isFile()) throw fail('not a regular file');
      if (st.size > MAX_KEY_FILE_BYTES) throw fail('too large to be a key file');
      if (process.platform !== 'win32' && (st.mode & 0o077) !== 0) {
        report.note(
          `warning: ${label} is readable by other users (mode ${(st.mode & 0o777).toString(8)}); chmod 600 it`,
        );
      }
      text = await readFile(path, 'utf8');
    } catch (e) {
      if (e instanceof RecoverError) throw e;
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') throw fail('no such file');
      if (code === 'EACCES' || code === 'EPERM') throw fail('permission denied');
      throw fail(`cannot read (${code ?? 'I/O error'})`);
    }
  }
  let decoded: ReturnType<typeof decodeKeyFile>;
  try {
    decoded = decodeKeyFile(text);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ERR_CRYPTO_UNSUPPORTED_VERSION')
      throw fail('key file version not supported by this reader');
    throw fail('not a readable Coffer key file (damaged, truncated or another format)');
  }
  if (decoded.kind !== 'recipient-secret')
    throw fail(KIND_HINT[decoded.kind] ?? 'not a recipient secret key');
  let publicFingerprint: Digest;
  try {
    publicFingerprint = fingerprint(recipientPublicKeyFromSecret(decoded.key));
  } catch {
    throw fail('not a usable recipient secret key');
  }
  return { secretKey: decoded.key, publicFingerprint };
}
