/**
 * `coffer-recover keygen --out FILE`: makes a break-glass key pair (hybrid X25519 + ML-KEM-1024
 * recipient, from @coffer/crypto) on the operator's machine.
 *
 * Writes the secret key to FILE (created exclusively with mode 0600) and the public key to
 * FILE.pub (mode 0644), and prints the public key's fingerprint as the only line on stdout.
 * Refuses (exit 7) when FILE or FILE.pub already exists, even as a dangling symlink, so a key that
 * may be the only way into old archives is never replaced. If writing FILE.pub fails, the new FILE
 * is removed again, so a failure never leaves half a key pair behind.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  lstatSync,
  openSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { resolve } from 'node:path';
import { encodeKeyFile, fingerprint, generateRecipient } from '@coffer/crypto';
import { RecoverError } from '../errors.ts';
import type { Reporter } from './output.ts';
import { fsError } from './translate.ts';

/** Runs keygen; returns the exit code (0) or throws RecoverError. */
export function keygen(out: string, report: Reporter): number {
  const secretPath = resolve(out);
  const publicPath = `${secretPath}.pub`;
  for (const p of [secretPath, publicPath]) {
    if (exists(p)) {
      throw new RecoverError('ERR_RECOVER_EXISTS', `${p} already exists; refusing to overwrite a key file`, {
        object: p,
      });
    }
  }
  const pair = generateRecipient();
  const secretText = encodeKeyFile('recipient-secret', pair.secretKey);
  const publicText = encodeKeyFile('recipient-public', pair.publicKey);
  const print = fingerprint(pair.publicKey);

  writeExclusive(secretPath, secretText, 0o600);
  try {
    writeExclusive(publicPath, publicText, 0o644);
  } catch (e) {
    try {
      unlinkSync(secretPath);
    } catch {
      // Best effort: the original failure is what the operator needs to see.
    }
    throw e;
  }
  pair.secretKey.fill(0);
  report.result({ secretKeyFile: secretPath, publicKeyFile: publicPath, fingerprint: print }, [print]);
  if (!report.json) {
    report.note(
      `wrote the break-glass secret key to ${secretPath} (mode 0600) and its public key to ${publicPath}`,
    );
    report.note('keep the secret key offline; give the engine only the .pub file or the fingerprint above');
  }
  return 0;
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw fsError(e, path, 'cannot check');
  }
}

/** O_CREAT|O_EXCL|O_NOFOLLOW: never replaces a file and never writes through a symlink. */
function writeExclusive(path: string, text: string, mode: number): void {
  let fd: number;
  try {
    fd = openSync(
      path,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0),
      mode,
    );
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new RecoverError(
        'ERR_RECOVER_EXISTS',
        `${path} already exists; refusing to overwrite a key file`,
        {
          object: path,
        },
      );
    }
    throw fsError(e, path, 'cannot create');
  }
  try {
    // The umask can only clear bits; fchmod makes the mode exactly what we promise.
    fchmodSync(fd, mode);
    writeSync(fd, text);
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    try {
      unlinkSync(path);
    } catch {
      // Best effort cleanup.
    }
    throw fsError(e, path, 'cannot write');
  }
  closeSync(fd);
}
