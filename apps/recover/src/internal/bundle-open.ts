/**
 * `coffer-recover bundle open --key FILE [--pin-signer FP] BUNDLE.json`: opens an engine support
 * bundle (normative format: docs/support-bundle.md) on the vendor's machine.
 *
 * Steps:
 * 1. Read BUNDLE.json (at most 16 MiB) and parse it; `kind` must be `engine-support-bundle-sealed`
 *    or `engine-support-bundle-signed` with `v: 1` (another `v` exits 6).
 * 2. Sealed: open the capsule with the vendor secret key (`--key`, a recipient secret key file),
 *    authenticating `JCS({ kind, v, recipient })`; the plaintext is the inner signed-kind bundle.
 *    A capsule for another key exits 4; a damaged one exits 3.
 * 3. Signature: an empty signature with `signer: null` is an unsigned bundle (a note on stderr;
 *    with `--pin-signer` that is a failure, exit 3). Otherwise the embedded signer public key must
 *    match its fingerprint and verify the hybrid signature over
 *    `JCS({ kind, v, document, signer })` under `coffer/engine-support-bundle/v1` (else exit 3).
 * 4. Pin: with `--pin-signer`, a valid signature by another key exits 8. Without it the embedded
 *    signer is trusted on first use and a note says so.
 * 5. Print the document (pretty JSON), or with `--json` `{ ok, command, sealed, signed, signer,
 *    document }`.
 *
 * Security: the key file's content and the capsule never reach the output or an error message.
 */
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { canonicalJsonBytes, fingerprint, fromBase64Url, open, verify } from '@coffer/crypto';
import { RecoverError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import { loadSecretKey } from './key-file.ts';
import type { Io, Reporter } from './output.ts';

export const SIGNED_KIND = 'engine-support-bundle-signed';
export const SEALED_KIND = 'engine-support-bundle-sealed';
export const SIGN_CONTEXT = 'coffer/engine-support-bundle/v1';
const MAX_BUNDLE_BYTES = 16 * 1024 * 1024;

export interface BundleOpenCommand {
  file: string;
  key: string | undefined;
  pinSigner: string | undefined;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function verifyFailed(message: string, object: string): RecoverError {
  return new RecoverError('ERR_RECOVER_VERIFY_FAILED', message, { object });
}

function checkKind(doc: unknown, object: string): Json {
  if (!isObject(doc) || (doc.kind !== SIGNED_KIND && doc.kind !== SEALED_KIND)) {
    throw verifyFailed('not an engine support bundle', object);
  }
  if (doc.v !== 1) {
    throw new RecoverError(
      'ERR_RECOVER_UNSUPPORTED_VERSION',
      `support bundle version ${JSON.stringify(doc.v)} is not 1`,
      {
        object,
      },
    );
  }
  return doc;
}

async function readBundle(path: string): Promise<unknown> {
  const object = resolve(path);
  let text: string;
  try {
    const st = await stat(path);
    if (!st.isFile())
      throw new RecoverError('ERR_RECOVER_NOT_FOUND', 'bundle is not a regular file', { object });
    if (st.size > MAX_BUNDLE_BYTES)
      throw verifyFailed('bundle file is too large to be a support bundle', object);
    text = await readFile(path, 'utf8');
  } catch (e) {
    if (e instanceof RecoverError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new RecoverError('ERR_RECOVER_NOT_FOUND', 'no such bundle file', { object });
    throw new RecoverError('ERR_RECOVER_IO', `cannot read the bundle (${code ?? 'I/O error'})`, { object });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw verifyFailed('bundle is not JSON', object);
  }
}

/** Runs `bundle open`; returns the exit code. Throws RecoverError for every failure. */
export async function bundleOpen(command: BundleOpenCommand, report: Reporter, io: Io): Promise<number> {
  const object = resolve(command.file);
  let outer = checkKind(await readBundle(command.file), object);
  const sealed = outer.kind === SEALED_KIND;
  if (sealed) {
    if (command.key === undefined) {
      throw new RecoverError(
        'ERR_RECOVER_USAGE',
        'this bundle is sealed: give the vendor secret key with --key FILE',
      );
    }
    if (typeof outer.recipient !== 'string' || typeof outer.capsule !== 'string') {
      throw verifyFailed('sealed bundle lacks recipient or capsule', object);
    }
    const key = await loadSecretKey(command.key, io, report);
    let plain: Uint8Array;
    try {
      const aad = canonicalJsonBytes({ kind: SEALED_KIND, v: 1, recipient: outer.recipient });
      plain = await open(key.secretKey, fromBase64Url(outer.capsule), aad);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (code === 'ERR_CRYPTO_WRONG_KEY' || key.publicFingerprint !== outer.recipient) {
        throw new RecoverError(
          'ERR_RECOVER_KEY',
          `bundle is sealed to ${String(outer.recipient).slice(0, 23)}..., not to this key`,
          {
            object,
            causeCode: code,
          },
        );
      }
      throw verifyFailed('sealed bundle failed to open (damaged or altered)', object);
    } finally {
      key.secretKey.fill(0);
    }
    let inner: unknown;
    try {
      inner = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain));
    } catch {
      throw verifyFailed('sealed bundle holds no JSON', object);
    }
    outer = checkKind(inner, object);
    if (outer.kind !== SIGNED_KIND)
      throw verifyFailed('sealed bundle must hold a signed-kind bundle', object);
  }
  const { document, signer, signature } = outer;
  if (!isObject(document) || typeof signature !== 'string')
    throw verifyFailed('bundle lacks document or signature', object);
  let signerFingerprint: string | null = null;
  if (signature === '' && signer === null) {
    if (command.pinSigner !== undefined)
      throw verifyFailed('bundle is unsigned, but --pin-signer asks for a signature', object);
    report.note('note: this bundle is unsigned (the engine had no signer); its origin cannot be checked');
  } else {
    if (!isObject(signer) || typeof signer.publicKey !== 'string' || typeof signer.fingerprint !== 'string') {
      throw verifyFailed('bundle signature has no signer', object);
    }
    let ok = false;
    try {
      const pub = fromBase64Url(signer.publicKey);
      if (fingerprint(pub) !== signer.fingerprint)
        throw verifyFailed('signer public key does not match its fingerprint', object);
      ok = verify(
        pub,
        canonicalJsonBytes({ kind: outer.kind, v: outer.v, document, signer }),
        fromBase64Url(signature),
        SIGN_CONTEXT,
      );
    } catch (e) {
      if (e instanceof RecoverError) throw e;
      ok = false;
    }
    if (!ok) throw verifyFailed('bundle signature does not verify', object);
    signerFingerprint = signer.fingerprint;
    if (command.pinSigner !== undefined && command.pinSigner !== signerFingerprint) {
      throw new RecoverError(
        'ERR_RECOVER_SIGNER_NOT_PINNED',
        `bundle is signed by ${signerFingerprint}, not by the pinned signer`,
        {
          object,
        },
      );
    }
    if (command.pinSigner === undefined) {
      report.note(`note: signed by ${signerFingerprint} (not pinned; pass --pin-signer to require it)`);
    }
  }
  report.result({ sealed, signed: signerFingerprint !== null, signer: signerFingerprint, document }, [
    JSON.stringify(document, null, 2),
  ]);
  return EXIT.OK;
}
