/**
 * `coffer-recover open-export --key FILE --in SEALED.json --out DIR [--pin-signer FP] [--force]
 * [--json]`: opens a sealed control-plane export (the engine's `GET
 * /admin/control-plane/export-download?sealed=1`; format: docs/control-plane.md "Sealed
 * artefact") offline with the break-glass secret key, and writes what
 * `POST /admin/control-plane/restore-sealed` needs as its `plaintext`.
 *
 * Steps:
 * 1. Read SEALED.json (at most 64 MiB); `kind` must be `coffer-control-plane-sealed-export`, `v: 1`
 *    (another `v` exits 6).
 * 2. The embedded signer public key must match the header's `signerFingerprint`, and the header's
 *    hybrid signature must verify under `coffer/control-plane-sealed-header/v1` (else exit 3).
 *    With `--pin-signer`, another signer exits 8; without it a note names the signer.
 * 3. Open the capsule with the break-glass secret key (`--key`, `-` for stdin), authenticating
 *    `JCS(header)`: sealed to another key exits 4, a damaged capsule exits 3.
 * 4. The body's SHA-384 must equal the header's `bodyHash`, the body must be a signed export
 *    whose signature verifies with the same signer under `coffer/control-plane-export/v1`
 *    (else exit 3).
 * 5. Write into DIR (created when absent; an existing file without `--force` exits 7), each file
 *    mode 0600: `signed-export.json` (the body bytes, which are the `plaintext` to send back),
 *    `export.json` (the canonical export document) and `export.sig` (its base64url signature).
 *
 * Security: the key file's content never reaches the output or an error; the break-glass secret
 * key never goes near the engine: only the opened plaintext is sent back, and the engine checks
 * it against the hash its own signer signed.
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { canonicalJsonBytes, fingerprint, fromBase64Url, open, sha384Digest, verify } from '@coffer/crypto';
import { RecoverError } from './errors.ts';
import { EXIT } from './exit-codes.ts';
import { parseOptionsOnly } from './internal/args.ts';
import { loadSecretKey } from './internal/key-file.ts';
import { type Io, Reporter } from './internal/output.ts';
import { toRecoverError } from './internal/translate.ts';

export const SEALED_KIND = 'coffer-control-plane-sealed-export';
export const HEADER_KIND = 'coffer-control-plane-sealed-header';
export const SIGNED_KIND = 'coffer-control-plane-signed-export';
export const HEADER_CONTEXT = 'coffer/control-plane-sealed-header/v1';
export const EXPORT_CONTEXT = 'coffer/control-plane-export/v1';
const MAX_ARTEFACT_BYTES = 64 * 1024 * 1024;

export const OPEN_EXPORT_HELP = `coffer-recover open-export --key FILE --in SEALED.json --out DIR [options]

Opens a sealed control-plane export with the break-glass secret key, offline, and writes
signed-export.json (send it as "plaintext" to POST /admin/control-plane/restore-sealed),
export.json and export.sig into DIR.

Options:
  --key FILE          break-glass secret key file (- reads it from stdin)
  --in FILE           the sealed artefact (.sealed.json)
  --out DIR           where to write (created when absent)
  --pin-signer FP     require this signer fingerprint (sha384:...)
  --force             overwrite files already in DIR
  --json              one JSON document on stdout
`;

interface Options {
  key: string;
  in: string;
  out: string;
  pinSigner: string | undefined;
  force: boolean;
  json: boolean;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function usage(message: string): RecoverError {
  return new RecoverError('ERR_RECOVER_USAGE', message);
}

function parse(argv: readonly string[]): Options | 'help' {
  const values = parseOptionsOnly(
    argv,
    {
      key: { type: 'string' },
      in: { type: 'string' },
      out: { type: 'string' },
      'pin-signer': { type: 'string' },
      force: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    'open-export',
  );
  if (values.help) return 'help';
  for (const o of ['key', 'in', 'out'] as const)
    if (typeof values[o] !== 'string' || values[o] === '') throw usage(`--${o} is required`);
  const pin = values['pin-signer'];
  if (pin !== undefined && !/^sha384:[0-9a-f]{96}$/.test(String(pin)))
    throw usage('--pin-signer must be sha384: and 96 lower-case hex characters');
  return {
    key: String(values.key),
    in: String(values.in),
    out: String(values.out),
    pinSigner: pin === undefined ? undefined : String(pin),
    force: values.force === true,
    json: values.json === true,
  };
}

function verifyFailed(message: string, object: string): RecoverError {
  return new RecoverError('ERR_RECOVER_VERIFY_FAILED', message, { object });
}

async function readArtefact(path: string): Promise<Json> {
  const object = resolve(path);
  let text: string;
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new RecoverError('ERR_RECOVER_NOT_FOUND', 'not a regular file', { object });
    if (st.size > MAX_ARTEFACT_BYTES) throw verifyFailed('too large to be a sealed export', object);
    text = await readFile(path, 'utf8');
  } catch (e) {
    if (e instanceof RecoverError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new RecoverError('ERR_RECOVER_NOT_FOUND', 'no such file', { object });
    throw new RecoverError('ERR_RECOVER_IO', `cannot read (${code ?? 'I/O error'})`, { object });
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw verifyFailed('not JSON', object);
  }
  if (!isObject(doc) || doc.kind !== SEALED_KIND)
    throw verifyFailed('not a sealed control-plane export', object);
  if (doc.v !== 1)
    throw new RecoverError(
      'ERR_RECOVER_UNSUPPORTED_VERSION',
      `sealed export version ${JSON.stringify(doc.v)} is not 1`,
      {
        object,
      },
    );
  return doc;
}

function checkHeader(doc: Json, object: string, pin: string | undefined, report: Reporter) {
  const header = doc.header;
  if (
    !isObject(header) ||
    header.kind !== HEADER_KIND ||
    header.v !== 1 ||
    typeof header.signerFingerprint !== 'string' ||
    typeof header.bodyHash !== 'string' ||
    typeof doc.headerSignature !== 'string' ||
    typeof doc.signerPublicKey !== 'string' ||
    typeof doc.capsule !== 'string'
  )
    throw verifyFailed('sealed export lacks its header, signature, signer or capsule', object);
  let signerKey: Uint8Array;
  let ok = false;
  const aad = canonicalJsonBytes(header);
  try {
    signerKey = fromBase64Url(doc.signerPublicKey);
    if (fingerprint(signerKey) !== header.signerFingerprint)
      throw verifyFailed('the signer public key does not match the header fingerprint', object);
    ok = verify(signerKey, aad, fromBase64Url(doc.headerSignature), HEADER_CONTEXT);
  } catch (e) {
    if (e instanceof RecoverError) throw e;
    throw verifyFailed('the sealed header signature does not verify', object);
  }
  if (!ok) throw verifyFailed('the sealed header signature does not verify', object);
  if (pin !== undefined && pin !== header.signerFingerprint)
    throw new RecoverError(
      'ERR_RECOVER_SIGNER_NOT_PINNED',
      `sealed export is signed by ${header.signerFingerprint}, not by the pinned signer`,
      { object },
    );
  if (pin === undefined)
    report.note(`note: signed by ${header.signerFingerprint} (not pinned; pass --pin-signer to require it)`);
  return { header, aad, signerKey: signerKey!, capsule: doc.capsule as string };
}

async function writeOut(
  dir: string,
  files: Array<[string, Uint8Array | string]>,
  force: boolean,
): Promise<string[]> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new RecoverError(
      'ERR_RECOVER_IO',
      `cannot create the output directory (${(e as NodeJS.ErrnoException).code ?? 'I/O error'})`,
      {
        object: resolve(dir),
      },
    );
  }
  const written: string[] = [];
  for (const [name, data] of files) {
    const path = join(dir, name);
    try {
      await writeFile(path, data, { mode: 0o600, flag: force ? 'w' : 'wx' });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'EEXIST')
        throw new RecoverError('ERR_RECOVER_EXISTS', 'the file exists (pass --force to overwrite)', {
          object: resolve(path),
        });
      throw new RecoverError('ERR_RECOVER_IO', `cannot write (${code ?? 'I/O error'})`, {
        object: resolve(path),
      });
    }
    written.push(resolve(path));
  }
  return written;
}

async function run(o: Options, report: Reporter, io: Io): Promise<number> {
  const object = resolve(o.in);
  const doc = await readArtefact(o.in);
  const { header, aad, signerKey, capsule } = checkHeader(doc, object, o.pinSigner, report);
  const key = await loadSecretKey(o.key, io, report);
  let body: Uint8Array;
  try {
    body = await open(key.secretKey, fromBase64Url(capsule), aad);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ERR_CRYPTO_WRONG_KEY' || key.publicFingerprint !== header.recipient)
      throw new RecoverError(
        'ERR_RECOVER_KEY',
        `sealed export is sealed to ${String(header.recipient).slice(0, 23)}..., not to this key`,
        { object, causeCode: code },
      );
    throw verifyFailed('the capsule failed to open (damaged or altered)', object);
  } finally {
    key.secretKey.fill(0);
  }
  if (sha384Digest(body) !== header.bodyHash)
    throw verifyFailed('the opened body does not match the hash the header signs', object);
  let signed: unknown;
  try {
    signed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw verifyFailed('the opened body is not JSON', object);
  }
  if (
    !isObject(signed) ||
    signed.kind !== SIGNED_KIND ||
    typeof signed.export !== 'string' ||
    typeof signed.signature !== 'string'
  )
    throw verifyFailed('the opened body is not a signed control-plane export', object);
  let ok = false;
  try {
    ok = verify(
      signerKey,
      new TextEncoder().encode(signed.export),
      fromBase64Url(signed.signature),
      EXPORT_CONTEXT,
    );
  } catch {
    ok = false;
  }
  if (!ok) throw verifyFailed('the export signature does not verify', object);
  const written = await writeOut(
    o.out,
    [
      ['signed-export.json', body],
      ['export.json', signed.export],
      ['export.sig', `${signed.signature}\n`],
    ],
    o.force,
  );
  report.result({ signer: header.signerFingerprint, bodyHash: header.bodyHash, files: written }, [
    `opened: signed by ${header.signerFingerprint}`,
    ...written.map((w) => `wrote ${w}`),
  ]);
  return EXIT.OK;
}

/** Runs `open-export` (`argv` starts with the command word); returns the exit code. */
export async function openExport(full: readonly string[], io: Io): Promise<number> {
  const argv = full[0] === 'open-export' ? full.slice(1) : full;
  const json = argv.includes('--json');
  let options: Options | 'help';
  try {
    options = parse(argv);
  } catch (e) {
    const err = toRecoverError(e);
    new Reporter(io, json, 'open-export').fail(err);
    return err.exitCode;
  }
  const report = new Reporter(io, options === 'help' ? json : options.json, 'open-export');
  if (options === 'help') {
    io.stdout.write(OPEN_EXPORT_HELP);
    return EXIT.OK;
  }
  try {
    return await run(options, report, io);
  } catch (e) {
    const err = toRecoverError(e);
    report.fail(err);
    return err.exitCode;
  }
}
