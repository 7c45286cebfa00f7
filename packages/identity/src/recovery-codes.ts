/**
 * Recovery codes: the way back in for a person whose passkeys are lost.
 *
 * A code is 20 Crockford base32 characters shown in five groups (`7K3M-9QX2-...`): the first four
 * are a public selector (which stored verifier to try), the other sixteen the secret (80 bits).
 * Only verifiers are stored: the selector and scrypt(secret) with a per-code salt (N = 2^15, r = 8,
 * p = 1, 32 bytes; about 50 ms and 32 MiB here), so a stolen state store does not hand out codes.
 * A presented code runs exactly one scrypt whether or not its selector matches, so the answer's
 * timing does not tell a wrong selector from a wrong secret. Input is forgiving: case, spaces and
 * dashes are ignored, and the letters Crockford maps (I, L -> 1; O -> 0) are accepted.
 */
import { randomBytes, randomInt, scrypt, timingSafeEqual } from 'node:crypto';
import { IdentityError } from './errors.ts';

export const RECOVERY_CODE_COUNT = 10;
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const SELECTOR_CHARS = 4;
const SECRET_CHARS = 16;
const SCRYPT = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;
const KEY_BYTES = 32;

/** What is stored for one code. */
export interface RecoveryVerifier {
  selector: string;
  /** `scrypt$15$8$1$<salt b64url>$<key b64url>` */
  hash: string;
}

function scryptAsync(secret: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(secret, salt, KEY_BYTES, { N: n, r, p, maxmem: SCRYPT.maxmem }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

function randomChars(n: number): string {
  let out = '';
  for (let i = 0; i < n; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

/** Upper-cases, drops spaces and dashes, maps I/L to 1 and O to 0; null when not 20 code characters. */
export function normaliseRecoveryCode(input: unknown): { selector: string; secret: string } | null {
  if (typeof input !== 'string' || input.length > 64) return null;
  const s = input.toUpperCase().replace(/[\s-]/g, '').replace(/[IL]/g, '1').replace(/O/g, '0');
  if (s.length !== SELECTOR_CHARS + SECRET_CHARS) return null;
  for (const ch of s) if (!ALPHABET.includes(ch)) return null;
  return { selector: s.slice(0, SELECTOR_CHARS), secret: s.slice(SELECTOR_CHARS) };
}

async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(secret, salt, SCRYPT.N, SCRYPT.r, SCRYPT.p);
  return `scrypt$${Math.log2(SCRYPT.N)}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

/**
 * Mints `count` codes (default 10, selectors distinct). Returns the codes to show once and the
 * verifiers to store; the codes themselves must not be stored or logged.
 */
export async function mintRecoveryCodes(
  count = RECOVERY_CODE_COUNT,
): Promise<{ codes: string[]; verifiers: RecoveryVerifier[] }> {
  if (!Number.isInteger(count) || count < 1 || count > 32)
    throw new IdentityError('ERR_IDENTITY_INVALID_ARGUMENT', 'recovery code count must be 1 to 32');
  const selectors = new Set<string>();
  while (selectors.size < count) selectors.add(randomChars(SELECTOR_CHARS));
  const codes: string[] = [];
  const verifiers: RecoveryVerifier[] = [];
  for (const selector of selectors) {
    const secret = randomChars(SECRET_CHARS);
    const raw = selector + secret;
    codes.push(raw.match(/.{4}/g)!.join('-'));
    verifiers.push({ selector, hash: await hashSecret(secret) });
  }
  return { codes, verifiers };
}

/** A verifier nobody's code matches, hashed once, so a miss costs the same scrypt as a hit. */
let decoy: Promise<string> | undefined;

/**
 * Which stored verifier `input` matches: its index, or -1. Runs one scrypt in every case. The
 * caller removes the matched verifier (a code works once) in the same state write that issues
 * the session.
 */
export async function matchRecoveryCode(
  input: unknown,
  verifiers: readonly RecoveryVerifier[],
): Promise<number> {
  const code = normaliseRecoveryCode(input);
  const index = code === null ? -1 : verifiers.findIndex((v) => v.selector === code.selector);
  decoy ??= hashSecret(randomChars(SECRET_CHARS));
  const stored = index >= 0 ? verifiers[index]!.hash : await decoy;
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return -1;
  const [lnText, rText, pText, saltText, keyText] = parts.slice(1) as [
    string,
    string,
    string,
    string,
    string,
  ];
  const ln = Number(lnText);
  const r = Number(rText);
  const p = Number(pText);
  // Only the parameters this package writes: a tampered row cannot make verification cost more.
  if (ln !== Math.log2(SCRYPT.N) || r !== SCRYPT.r || p !== SCRYPT.p) return -1;
  const want = Buffer.from(keyText, 'base64url');
  const got = await scryptAsync(
    code?.secret ?? randomChars(SECRET_CHARS),
    Buffer.from(saltText, 'base64url'),
    2 ** ln,
    r,
    p,
  );
  const same = want.length === got.length && timingSafeEqual(want, got);
  return index >= 0 && same ? index : -1;
}
