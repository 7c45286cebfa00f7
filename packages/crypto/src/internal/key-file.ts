/**
 * Armoured key files: the text a person copies, mails or prints (in the manner of age and
 * minisign, with PEM-style boundaries). Normative format: docs/crypto.md, "Key files".
 *
 *   -----BEGIN COFFER SIGNER PUBLIC KEY-----
 *   Version: 1
 *   Fingerprint: sha384:<96 hex>
 *
 *   <standard padded base64 of the binary key encoding, 64 characters a line>
 *   -----END COFFER SIGNER PUBLIC KEY-----
 *
 * The Fingerprint line is the fingerprint of the PUBLIC key of the pair (in a secret key file too,
 * so a person can match the two files). Decoding recomputes it: it doubles as a checksum that
 * catches a mistyped or altered character in either kind of file.
 */
import { CryptoError } from '../errors.ts';
import { fromBase64, toBase64 } from './bytes.ts';
import { isKeyKind, KEY_VERSION, type KeyKind, keyBody, keyKindOf } from './key-encoding.ts';
import { fingerprint, parseRecipientSecret, parseSignerPublic, parseSignerSecret } from './keys.ts';

const LABELS: Readonly<Record<KeyKind, string>> = {
  'signer-public': 'SIGNER PUBLIC KEY',
  'signer-secret': 'SIGNER SECRET KEY',
  'recipient-public': 'RECIPIENT PUBLIC KEY',
  'recipient-secret': 'RECIPIENT SECRET KEY',
};

const LINE = 64;
const BEGIN_RE = /^-----BEGIN COFFER ([A-Z ]+)-----$/;

function publicFingerprint(kind: KeyKind, key: Uint8Array): string {
  switch (kind) {
    case 'signer-public':
      parseSignerPublic(key);
      return fingerprint(key);
    case 'recipient-public':
      return fingerprint(key);
    case 'signer-secret':
      return fingerprint(parseSignerSecret(key).publicKey);
    case 'recipient-secret':
      return fingerprint(parseRecipientSecret(key).publicKey);
  }
}

/**
 * The armoured text of `key`, which must be a well-formed key of `kind`.
 * Throws ERR_CRYPTO_WRONG_KIND when `key` is another kind, ERR_CRYPTO_MALFORMED /
 * ERR_CRYPTO_UNSUPPORTED_VERSION for a bad encoding or an unknown `kind`.
 */
export function encodeKeyFile(kind: KeyKind, key: Uint8Array): string {
  if (!isKeyKind(kind)) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'unknown key kind');
  keyBody(key, kind);
  const label = LABELS[kind];
  const b64 = toBase64(key);
  const lines = [
    `-----BEGIN COFFER ${label}-----`,
    `Version: ${KEY_VERSION}`,
    `Fingerprint: ${publicFingerprint(kind, key)}`,
    '',
  ];
  for (let i = 0; i < b64.length; i += LINE) lines.push(b64.slice(i, i + LINE));
  lines.push(`-----END COFFER ${label}-----`, '');
  return lines.join('\n');
}

/**
 * The kind and binary key of an armoured key file. Text before the BEGIN line and after the END
 * line is ignored; line endings may be LF or CRLF; unknown `Name: value` header lines are ignored.
 * Throws ERR_CRYPTO_MALFORMED (no or broken armour, bad base64, fingerprint mismatch),
 * ERR_CRYPTO_UNSUPPORTED_VERSION (Version header or version byte not 1) and
 * ERR_CRYPTO_WRONG_KIND (a valid file of another kind than `expected`).
 */
export function decodeKeyFile(text: string, expected?: KeyKind): { kind: KeyKind; key: Uint8Array } {
  if (typeof text !== 'string') throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file must be text');
  if (expected !== undefined && !isKeyKind(expected))
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'unknown key kind');
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const begin = lines.findIndex((l) => BEGIN_RE.test(l));
  if (begin < 0) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'no "-----BEGIN COFFER ... KEY-----" line');
  const label = BEGIN_RE.exec(lines[begin]!)![1]!;
  const kind = (Object.keys(LABELS) as KeyKind[]).find((k) => LABELS[k] === label);
  if (kind === undefined) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file names an unknown key kind');
  const endLine = `-----END COFFER ${label}-----`;
  const end = lines.indexOf(endLine, begin + 1);
  if (end < 0) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file has no matching END line');

  const headers = new Map<string, string>();
  let i = begin + 1;
  for (; i < end && lines[i] !== ''; i++) {
    const m = /^([A-Za-z][A-Za-z0-9-]*):\s*(.*)$/.exec(lines[i]!);
    if (m === null) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file has a malformed header line');
    const name = m[1]!.toLowerCase();
    if (headers.has(name)) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file repeats a header line');
    headers.set(name, m[2]!);
  }
  const version = headers.get('version');
  if (version === undefined) throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file has no Version header');
  if (version !== String(KEY_VERSION)) {
    throw new CryptoError('ERR_CRYPTO_UNSUPPORTED_VERSION', 'key file has an unsupported version');
  }
  if (expected !== undefined && kind !== expected) {
    throw new CryptoError('ERR_CRYPTO_WRONG_KIND', `expected a ${expected} key file, got a ${kind} key file`);
  }
  const claimed = headers.get('fingerprint');
  if (claimed === undefined)
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file has no Fingerprint header');

  const body = lines.slice(i, end).join('');
  if (body === '') throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key file has no key data');
  const key = fromBase64(body);
  if (keyKindOf(key) !== kind) {
    throw new CryptoError('ERR_CRYPTO_MALFORMED', 'key data does not match the kind named in the key file');
  }
  if (publicFingerprint(kind, key) !== claimed) {
    throw new CryptoError(
      'ERR_CRYPTO_MALFORMED',
      'key file fingerprint does not match its key data (altered or mistyped)',
    );
  }
  return { kind, key };
}
