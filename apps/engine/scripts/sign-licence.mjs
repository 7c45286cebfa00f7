#!/usr/bin/env node
// The vendor's licence tool (docs/posture.md "Licence"): makes the licence signer key pair and signs
// licences the engine's GET /admin/licence verifies (src/posture/licence.ts; the tests run this
// script, so the two cannot drift apart).
//
//   node apps/engine/scripts/sign-licence.mjs keygen <out>
//       writes <out>.key (signer SECRET key, mode 0600, created exclusively) and <out>.pub
//       (the PUBLIC key to pin: ENGINE_LICENCE_VENDOR_PUBLIC_KEY, or the built-in pin)
//   node apps/engine/scripts/sign-licence.mjs sign --key <vendor.key> --licensee <name>
//       --tier <tier> --expires <RFC 3339> [--not-before <RFC 3339>] [--issued <RFC 3339>]
//       [--seats <n>] [--id <licence id>] [--out <file>]
//       prints (or writes) the licence file: { kind: 'coffer-licence', body, signature }, where
//       signature = base64url(sign(secret, JCS(body), 'coffer/licence/v1')), hybrid Ed25519 + ML-DSA-87.
//
// Exit codes: 0 done, 2 usage or bad input, 1 anything else. The secret key never leaves its file.
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  canonicalJsonBytes,
  decodeKeyFile,
  encodeKeyFile,
  generateSigner,
  sign,
  toBase64Url,
} from '@coffer/crypto';

const CONTEXT = 'coffer/licence/v1';
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function usage(message) {
  process.stderr.write(`sign-licence: ${message}\n`);
  process.exit(2);
}

function time(name, value) {
  if (!RFC3339.test(value) || Number.isNaN(Date.parse(value))) usage(`--${name} must be an RFC 3339 time`);
  return value;
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'keygen') {
  const out = rest[0];
  if (!out) usage('keygen needs an output path prefix');
  const pair = generateSigner();
  writeFileSync(`${out}.key`, encodeKeyFile('signer-secret', pair.secretKey), { mode: 0o600, flag: 'wx' });
  writeFileSync(`${out}.pub`, encodeKeyFile('signer-public', pair.publicKey), { flag: 'wx' });
  process.stdout.write(`${out}.key\n${out}.pub\n`);
} else if (command === 'sign') {
  const { values } = parseArgs({
    args: rest,
    options: {
      key: { type: 'string' },
      licensee: { type: 'string' },
      tier: { type: 'string' },
      expires: { type: 'string' },
      'not-before': { type: 'string' },
      issued: { type: 'string' },
      seats: { type: 'string' },
      id: { type: 'string' },
      out: { type: 'string' },
    },
    strict: true,
  });
  for (const f of ['key', 'licensee', 'tier', 'expires']) if (!values[f]) usage(`--${f} is required`);
  const now = new Date().toISOString();
  const body = {
    v: 1,
    licensee: values.licensee,
    tier: values.tier,
    ...(values.seats === undefined ? {} : { seats: Number(values.seats) }),
    issuedAt: time('issued', values.issued ?? now),
    notBefore: time('not-before', values['not-before'] ?? values.issued ?? now),
    expiresAt: time('expires', values.expires),
    licenceId: values.id ?? `lic-${randomUUID()}`,
  };
  if (!/^[a-z][a-z0-9-]{0,31}$/.test(body.tier))
    usage('--tier must be lower-case letters, digits and hyphens');
  if (body.seats !== undefined && (!Number.isSafeInteger(body.seats) || body.seats < 1))
    usage('--seats must be a positive whole number');
  if (Date.parse(body.expiresAt) <= Date.parse(body.notBefore)) usage('--expires must be after --not-before');
  let secretKey;
  try {
    secretKey = decodeKeyFile(readFileSync(values.key, 'utf8'), 'signer-secret').key;
  } catch {
    usage('--key must be a signer SECRET key file (made by keygen)');
  }
  const signature = toBase64Url(sign(secretKey, canonicalJsonBytes(body), CONTEXT));
  const text = `${JSON.stringify({ kind: 'coffer-licence', body, signature }, null, 2)}\n`;
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
} else {
  usage(
    'usage: sign-licence.mjs keygen <out> | sign --key <file> --licensee <name> --tier <tier> --expires <time> [...]',
  );
}
