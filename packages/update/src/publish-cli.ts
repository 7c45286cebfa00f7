#!/usr/bin/env node
/**
 * coffer-update-publish: run your own update channel (docs/updates.md, "Publishing a channel").
 *
 *   coffer-update-publish keygen --out-dir DIR
 *   coffer-update-publish --key FILE --sequence N --version V --engine FILE [--engine-url URL]
 *       [--console FILE --console-version V [--console-url URL]] [--channel NAME]
 *       [--expires-in 30d | --expires-at TIME] [--issued-at TIME] [--risk routine|security|breaking]
 *       [--min-engine V] [--step TEXT]... [--schema-epoch N] [--migration] [--out FILE]
 *
 * Exit codes: 0 done; 1 refused (a bad artefact, document or key; the message says which);
 * 2 usage. The signed envelope goes to --out (default: standard output); a summary line
 * (`signed <channel> sequence <n> version <v> by <fingerprint>`) goes to standard error. No key
 * byte is ever printed.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  generateSigner,
  signerPublicKeyFromSecret,
} from '@coffer/crypto';
import { RISKS, type Risk, signChannel } from './channel.ts';
import { isUpdateError, UpdateError } from './errors.ts';
import { buildChannelDocument } from './publish.ts';

const usage = (message: string): never => {
  process.stderr.write(`coffer-update-publish: ${message}\n(see docs/updates.md, "Publishing a channel")\n`);
  process.exit(2);
};

function duration(text: string): number {
  const m = /^(\d+)([dhm])$/.exec(text);
  if (!m) return usage(`--expires-in takes a number with d, h or m (e.g. 30d), not ${JSON.stringify(text)}`);
  return Number(m[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[m[2] as 'd' | 'h' | 'm'];
}

function date(text: string, flag: string): Date {
  const d = new Date(text);
  if (Number.isNaN(d.getTime())) return usage(`${flag} is not a time`);
  return d;
}

async function keygen(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { 'out-dir': { type: 'string' } }, strict: true });
  const dir = values['out-dir'] ?? usage('keygen needs --out-dir');
  const pair = generateSigner();
  await writeFile(join(dir, 'channel-signer.key'), encodeKeyFile('signer-secret', pair.secretKey), {
    mode: 0o600,
    flag: 'wx',
  });
  await writeFile(join(dir, 'channel-signer.pub'), encodeKeyFile('signer-public', pair.publicKey), {
    flag: 'wx',
  });
  process.stdout.write(`${fingerprint(pair.publicKey)}\n`);
}

async function publish(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      key: { type: 'string' },
      sequence: { type: 'string' },
      version: { type: 'string' },
      engine: { type: 'string' },
      'engine-url': { type: 'string' },
      console: { type: 'string' },
      'console-version': { type: 'string' },
      'console-url': { type: 'string' },
      channel: { type: 'string' },
      'expires-in': { type: 'string' },
      'expires-at': { type: 'string' },
      'issued-at': { type: 'string' },
      risk: { type: 'string' },
      'min-engine': { type: 'string' },
      step: { type: 'string', multiple: true },
      'schema-epoch': { type: 'string' },
      migration: { type: 'boolean' },
      out: { type: 'string' },
    },
  });
  const keyFile = values.key ?? usage('--key FILE (a signer secret key file) is required');
  const sequence = Number(values.sequence ?? usage('--sequence N is required'));
  if (!Number.isSafeInteger(sequence) || sequence < 1) usage('--sequence must be a positive integer');
  const version = values.version ?? usage('--version V is required');
  const engine = values.engine ?? usage('--engine FILE is required');
  if (values.console !== undefined && values['console-version'] === undefined)
    usage('--console needs --console-version');
  if (values.risk !== undefined && !RISKS.includes(values.risk as Risk))
    usage(`--risk is one of ${RISKS.join(', ')}`);
  const epoch = values['schema-epoch'] === undefined ? 0 : Number(values['schema-epoch']);
  if (!Number.isSafeInteger(epoch) || epoch < 0) usage('--schema-epoch must be a non-negative integer');
  const issuedAt = values['issued-at'] ? date(values['issued-at'], '--issued-at') : new Date();
  const expiresAt = values['expires-at']
    ? date(values['expires-at'], '--expires-at')
    : new Date(issuedAt.getTime() + duration(values['expires-in'] ?? '30d'));

  let secretKey: Uint8Array;
  try {
    secretKey = decodeKeyFile(await readFile(keyFile, 'utf8'), 'signer-secret').key;
  } catch {
    throw new UpdateError('ERR_UPDATE_TRUST_CONFIG', 'the --key file is not a readable signer secret key');
  }
  const document = await buildChannelDocument({
    ...(values.channel !== undefined ? { channel: values.channel } : {}),
    sequence,
    issuedAt,
    expiresAt,
    ...(values.risk !== undefined ? { risk: values.risk as Risk } : {}),
    ...(values['min-engine'] !== undefined ? { minEngineVersion: values['min-engine'] } : {}),
    requiredSteps: values.step ?? [],
    schemaEpoch: epoch,
    migration: values.migration ?? false,
    engine: { file: engine, version, ...(values['engine-url'] ? { url: values['engine-url'] } : {}) },
    ...(values.console !== undefined
      ? {
          console: {
            file: values.console,
            version: values['console-version']!,
            ...(values['console-url'] ? { url: values['console-url'] } : {}),
          },
        }
      : {}),
  });
  const envelope = signChannel(document, secretKey);
  if (values.out) await writeFile(values.out, envelope);
  else process.stdout.write(envelope);
  process.stderr.write(
    `signed ${document.channel} sequence ${document.sequence} version ${document.recommended.version} by ${fingerprint(signerPublicKeyFromSecret(secretKey))}\n`,
  );
}

const [first, ...rest] = process.argv.slice(2);
try {
  if (first === 'keygen') await keygen(rest);
  else await publish(first === undefined ? [] : [first, ...rest]);
} catch (e) {
  if (isUpdateError(e)) {
    process.stderr.write(`coffer-update-publish: ${e.code}: ${e.message}\n`);
    process.exit(1);
  }
  if ((e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) usage((e as Error).message);
  process.stderr.write(`coffer-update-publish: ${(e as { code?: string }).code ?? 'error'}\n`);
  process.exit(1);
}
