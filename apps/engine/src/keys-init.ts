/**
 * `coffer-engine keys init --signer FILE --operational FILE [--json]`: makes the engine's signer
 * (hybrid Ed25519 + ML-DSA-87) and operational (hybrid X25519 + ML-KEM-1024) secret key files
 * ahead of the first start, so that a secret store can hand the same pair to every replica
 * (`ENGINE_SIGNER_KEY_FILE`, `ENGINE_OPERATIONAL_KEY_FILE`; docs/operations.md "Running several
 * replicas"). main.ts dispatches here before the launcher and the Node-flags re-execution, so
 * the command never starts an engine and never touches a data directory.
 *
 * - Both files are created by keys.ts `createKeyFile`, the format and the exclusive mode-0600
 *   creation of the engine's own first start: each file appears whole or not at all and is never
 *   put in place of an existing one.
 * - It refuses (exit 7, `ERR_ENGINE_KEYS_EXIST`) when either file exists, even as a dangling
 *   symlink, before generating anything; if the second file cannot be created, the first is
 *   removed again, so a failure never leaves half a pair.
 * - Standard output carries only the two PUBLIC fingerprints (`sha384:<hex>`): `signer <fp>` and
 *   `operational <fp>`, or one JSON document with `--json`. They are the fingerprints the engine
 *   reports (`GET /admin/setup-state` `fingerprints`) and the signer's is what
 *   `coffer-recover --pin-signer` takes. No secret byte is ever printed; messages name paths and
 *   system error codes only.
 *
 * Exit codes: 0 both files written; 1 a file could not be written (`ERR_ENGINE_KEYS`: missing
 * directory, permissions); 2 the command line is wrong (`ERR_ENGINE_USAGE`); 7 refused, a key
 * file already exists (`ERR_ENGINE_KEYS_EXIST`).
 */
import { lstatSync, unlinkSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fingerprint, generateRecipient, generateSigner } from '@coffer/crypto';
import { EngineError } from './errors.ts';
import { createKeyFile } from './keys.ts';

export const KEYS_EXIT = { OK: 0, FAILURE: 1, USAGE: 2, EXISTS: 7 } as const;

export const KEYS_USAGE = `coffer-engine keys init --signer FILE --operational FILE [--json]

Makes the engine's signer and operational secret key files before the first start, so every
replica can be given the same pair (ENGINE_SIGNER_KEY_FILE, ENGINE_OPERATIONAL_KEY_FILE).
Both files are created with mode 0600; an existing file is never replaced (exit 7). Prints the
public fingerprints: "signer sha384:..." (pin it: coffer-recover --pin-signer) and
"operational sha384:...". The directories must exist.

  --signer FILE        where to write the signer secret key
  --operational FILE   where to write the operational secret key
  --json               one JSON document on stdout (errors too)

Exit codes: 0 written, 1 could not write, 2 usage, 7 a key file exists.
`;

export interface KeysInitResult {
  signer: { file: string; fingerprint: string };
  operational: { file: string; fingerprint: string };
}

interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
}

const defaultIo: Io = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

function usage(message: string): EngineError {
  return new EngineError('ERR_ENGINE_USAGE', message);
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new EngineError('ERR_ENGINE_KEYS', `cannot check ${path} (${(err as { code?: string }).code})`);
  }
}

function refuseExisting(path: string): EngineError {
  return new EngineError('ERR_ENGINE_KEYS_EXIST', `${path} already exists; refusing to replace a key file`);
}

function create(path: string, kind: 'signer-secret' | 'recipient-secret', secretKey: Uint8Array): void {
  let created: boolean;
  try {
    created = createKeyFile(path, kind, secretKey);
  } catch (err) {
    throw new EngineError('ERR_ENGINE_KEYS', `cannot create ${path} (${(err as { code?: string }).code})`);
  }
  if (!created) throw refuseExisting(path);
}

/**
 * Creates both key files. Returns their paths and public fingerprints; throws EngineError
 * `ERR_ENGINE_KEYS_EXIST` (a file exists: nothing written) or `ERR_ENGINE_KEYS` (could not write:
 * nothing left behind).
 */
export function initKeyFiles(signerPath: string, operationalPath: string): KeysInitResult {
  for (const p of [signerPath, operationalPath]) if (exists(p)) throw refuseExisting(p);
  const signer = generateSigner();
  const operational = generateRecipient();
  try {
    create(signerPath, 'signer-secret', signer.secretKey);
    try {
      create(operationalPath, 'recipient-secret', operational.secretKey);
    } catch (err) {
      try {
        unlinkSync(signerPath);
      } catch {
        // Best effort: the original failure is what the operator needs to see.
      }
      throw err;
    }
  } finally {
    signer.secretKey.fill(0);
    operational.secretKey.fill(0);
  }
  return {
    signer: { file: signerPath, fingerprint: fingerprint(signer.publicKey) },
    operational: { file: operationalPath, fingerprint: fingerprint(operational.publicKey) },
  };
}

const OPTIONS = {
  signer: { type: 'string' },
  operational: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parseStrict(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    // parseArgs names the option, never a value.
    throw usage((err as Error).message.split('\n')[0] ?? 'bad arguments');
  }
}

function parse(argv: string[]): { help: true } | { signer: string; operational: string; json: boolean } {
  const { values, positionals } = parseStrict(argv);
  if (values.help || positionals[0] === 'help') return { help: true };
  if (positionals.length === 0) throw usage('missing the subcommand: coffer-engine keys init');
  if (positionals[0] !== 'init' || positionals.length > 1)
    throw usage('unknown subcommand: only `coffer-engine keys init` exists');
  if (values.signer === undefined || values.signer === '') throw usage('--signer FILE is required');
  if (values.operational === undefined || values.operational === '')
    throw usage('--operational FILE is required');
  const signer = resolve(values.signer);
  const operational = resolve(values.operational);
  if (signer === operational) throw usage('--signer and --operational must be two different files');
  return { signer, operational, json: values.json === true };
}

const EXIT_OF: Record<string, number> = {
  ERR_ENGINE_USAGE: KEYS_EXIT.USAGE,
  ERR_ENGINE_KEYS_EXIST: KEYS_EXIT.EXISTS,
};

/** Runs `coffer-engine keys ...` (argv after `keys`); returns the exit code. */
export function keysCommand(argv: string[], io: Io = defaultIo): number {
  const json = argv.includes('--json');
  try {
    const args = parse(argv);
    if ('help' in args) {
      io.out(KEYS_USAGE);
      return KEYS_EXIT.OK;
    }
    const result = initKeyFiles(args.signer, args.operational);
    if (args.json) io.out(`${JSON.stringify(result)}\n`);
    else {
      io.out(`signer ${result.signer.fingerprint}\noperational ${result.operational.fingerprint}\n`);
      io.err(
        `coffer-engine keys init: wrote ${result.signer.file} and ${result.operational.file} (mode 0600)\n` +
          'give both files to every replica (ENGINE_SIGNER_KEY_FILE, ENGINE_OPERATIONAL_KEY_FILE) and keep a copy offline;\n' +
          'pin the signer fingerprint above (coffer-recover --pin-signer)\n',
      );
    }
    return KEYS_EXIT.OK;
  } catch (err) {
    const code = err instanceof EngineError ? err.code : 'ERR_ENGINE_KEYS';
    const message = err instanceof EngineError ? err.message : 'unexpected failure';
    if (json) io.out(`${JSON.stringify({ error: { code, message } })}\n`);
    io.err(`coffer-engine keys: ${message}\n${code === 'ERR_ENGINE_USAGE' ? `\n${KEYS_USAGE}` : ''}`);
    return EXIT_OF[code] ?? KEYS_EXIT.FAILURE;
  }
}
