/**
 * The engine's keys at start-up (ARCHITECTURE.md "Keys"):
 *
 * 1. signer (hybrid Ed25519 + ML-DSA-87) and operational (hybrid X25519 + ML-KEM-1024) secret
 *    keys: read from ENGINE_SIGNER_KEY_FILE / ENGINE_OPERATIONAL_KEY_FILE when set, otherwise from
 *    `<data dir>/keys/`, where they are created on first start (armoured files, mode 0600, created
 *    exclusively so two processes starting at once never overwrite each other's key). Several
 *    replicas share one pair made ahead of the first start by `coffer-engine keys init`
 *    (keys-init.ts), through the same `createKeyFile`;
 * 2. the break-glass PUBLIC key from ENGINE_BREAK_GLASS_PUBLIC_KEY (armoured text or the `.pub`
 *    file written by `coffer-recover keygen`), or else the one an owner sent once from the console
 *    (`POST /admin/setup/break-glass-key`, kept in the state store under BREAK_GLASS_SETTING and
 *    adopted at start); a secret key given either way is refused, because the private half must
 *    never reach the engine;
 * 3. the optional vendor support public key from ENGINE_SUPPORT_PUBLIC_KEY.
 *
 * Without a break-glass key the engine still serves its API, but `ready` is false and `missing`
 * names the variable: runs refuse to seal (`engine not fully configured`), so no archive ever
 * exists that only the engine's own disk could open.
 */

import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fchmodSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  generateSigner,
  type KeyKind,
  recipientPublicKeyFromSecret,
  signerPublicKeyFromSecret,
} from '@coffer/crypto';
import type { EngineConfig, KeyTextSource } from './config.ts';
import { ConfigError, EngineError } from './errors.ts';

export interface SecretKeyHolder {
  secretKey: Uint8Array;
  publicKey: Uint8Array;
  fingerprint: string;
  file: string;
  /** True when this start created the key. */
  created: boolean;
}

export interface PublicKeyHolder {
  publicKey: Uint8Array;
  fingerprint: string;
}

export interface EngineKeys {
  signer: SecretKeyHolder;
  operational: SecretKeyHolder;
  breakGlass: PublicKeyHolder | null;
  support: PublicKeyHolder | null;
  /** Variables whose absence keeps the engine from sealing runs. */
  missing: string[];
  /** True when every key a run needs is present. */
  ready: boolean;
  /** Non-fatal findings (for example a key file readable by others). */
  warnings: string[];
}

function decodeAs(text: string, kind: KeyKind, variable: string, what: string): Uint8Array {
  let decoded: { kind: KeyKind; key: Uint8Array };
  try {
    decoded = decodeKeyFile(text);
  } catch {
    throw new ConfigError(variable, `does not hold a readable ${what}`);
  }
  if (decoded.kind !== kind) {
    if (kind === 'recipient-public' && decoded.kind === 'recipient-secret') {
      throw new ConfigError(
        variable,
        'holds a SECRET key; give the public half (the .pub file), never the secret',
      );
    }
    throw new ConfigError(variable, `must hold a ${what}`);
  }
  return decoded.key;
}

function secretFromFile(
  path: string,
  kind: 'signer-secret' | 'recipient-secret',
  variable: string,
  warnings: string[],
): Uint8Array {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
    if ((statSync(path).mode & 0o077) !== 0)
      warnings.push(`${variable}: key file is readable by group or others`);
  } catch {
    throw new ConfigError(variable, 'names a key file that cannot be read');
  }
  return decodeAs(
    text,
    kind,
    variable,
    kind === 'signer-secret' ? 'signer secret key' : 'recipient secret key',
  );
}

/**
 * Creates the key file `path` holding `secretKey` in the engine's armoured format
 * (@coffer/crypto `encodeKeyFile`), mode 0600 whatever the umask, without ever replacing
 * anything: the text is written and flushed to a temporary file beside `path` (created
 * exclusively, never through a symlink), which is then hard-linked to `path` and removed.
 * link(2) fails rather than replace, even a dangling symlink, so `path` appears whole or not at
 * all and two processes creating it at once keep one key. The first start (`loadKeys`) and
 * `coffer-engine keys init` (keys-init.ts) both create key files only through this.
 * Returns false when `path` already exists; throws the file-system error otherwise.
 */
export function createKeyFile(
  path: string,
  kind: 'signer-secret' | 'recipient-secret',
  secretKey: Uint8Array,
): boolean {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0),
    0o600,
  );
  try {
    try {
      // The umask can only clear bits; fchmod makes the mode exactly 0600.
      fchmodSync(fd, 0o600);
      writeSync(fd, encodeKeyFile(kind, secretKey));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      linkSync(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw err;
    }
    return true;
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // Already gone: nothing of the key is left behind under the temporary name.
    }
  }
}

function createInDataDir(path: string, kind: 'signer-secret' | 'recipient-secret', secretKey: Uint8Array) {
  try {
    return createKeyFile(path, kind, secretKey);
  } catch (err) {
    throw new EngineError('ERR_ENGINE_KEYS', 'cannot create a key file in the data directory', {
      cause: err,
    });
  }
}

function engineSecret(
  explicit: string | undefined,
  variable: string,
  defaultPath: string,
  kind: 'signer-secret' | 'recipient-secret',
  warnings: string[],
): SecretKeyHolder {
  const toPublic = kind === 'signer-secret' ? signerPublicKeyFromSecret : recipientPublicKeyFromSecret;
  const path = explicit ?? defaultPath;
  let created = false;
  if (explicit === undefined) {
    let exists = true;
    try {
      statSync(path);
    } catch {
      exists = false;
    }
    if (!exists) {
      const pair = kind === 'signer-secret' ? generateSigner() : generateRecipient();
      created = createInDataDir(path, kind, pair.secretKey);
    }
  }
  const secretKey = secretFromFile(
    path,
    kind,
    explicit === undefined ? 'ENGINE_DATA_DIR' : variable,
    warnings,
  );
  const publicKey = toPublic(secretKey);
  return { secretKey, publicKey, fingerprint: fingerprint(publicKey), file: path, created };
}

/** The state-store setting holding a break-glass public key sent from the console (armoured text). */
export const BREAK_GLASS_SETTING = 'keys.break-glass-public';

/** Why a break-glass public key sent to the engine was refused. */
export type BreakGlassRefusal = 'secret-key' | 'wrong-kind' | 'unreadable';

/**
 * Reads an armoured break-glass PUBLIC key; returns the refusal instead of throwing, so a route can
 * answer without echoing the text (a secret key pasted by mistake must not reach a log).
 */
export function readBreakGlassPublicKey(text: string): PublicKeyHolder | BreakGlassRefusal {
  let decoded: { kind: KeyKind; key: Uint8Array };
  try {
    decoded = decodeKeyFile(text);
  } catch {
    return 'unreadable';
  }
  if (decoded.kind === 'recipient-secret') return 'secret-key';
  if (decoded.kind !== 'recipient-public') return 'wrong-kind';
  return { publicKey: decoded.key, fingerprint: fingerprint(decoded.key) };
}

/** Makes `holder` the engine's break-glass key (in memory): runs seal from now on. */
export function adoptBreakGlassKey(keys: EngineKeys, holder: PublicKeyHolder): void {
  keys.breakGlass = holder;
  keys.missing = keys.missing.filter((m) => m !== 'ENGINE_BREAK_GLASS_PUBLIC_KEY');
  keys.ready = keys.missing.length === 0;
}

function publicKey(source: KeyTextSource | undefined, what: string): PublicKeyHolder | null {
  if (!source) return null;
  const key = decodeAs(source.text, 'recipient-public', source.variable, what);
  return { publicKey: key, fingerprint: fingerprint(key) };
}

/**
 * Loads (and on first start creates) the engine's keys. Returns them with what is missing;
 * throws ConfigError naming the variable for an unreadable or wrong-kind key, EngineError
 * ERR_ENGINE_KEYS when the data directory cannot hold a new key.
 */
export function loadKeys(config: EngineConfig): EngineKeys {
  const warnings: string[] = [];
  const dir = join(config.dataDir, 'keys');
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new EngineError('ERR_ENGINE_KEYS', 'cannot create the key directory in the data directory', {
      cause: err,
    });
  }
  const signer = engineSecret(
    config.signerKeyFile,
    'ENGINE_SIGNER_KEY_FILE',
    join(dir, 'signer.key'),
    'signer-secret',
    warnings,
  );
  const operational = engineSecret(
    config.operationalKeyFile,
    'ENGINE_OPERATIONAL_KEY_FILE',
    join(dir, 'operational.key'),
    'recipient-secret',
    warnings,
  );
  const breakGlass = publicKey(config.breakGlassPublicKey, 'break-glass public key');
  const support = publicKey(config.supportPublicKey, 'support public key');
  const missing = breakGlass ? [] : ['ENGINE_BREAK_GLASS_PUBLIC_KEY'];
  return { signer, operational, breakGlass, support, missing, ready: missing.length === 0, warnings };
}

/**
 * A box for secrets the engine stores (notification channel secrets, identity-provider client
 * secrets): AES-256-GCM under a key derived from the operational secret key with HKDF-SHA384 and
 * the purpose's own `info` label, text `<prefix>` + base64url(nonce 12 | ciphertext | tag 16). A
 * copy of the state store alone holds only sealed text, and a value sealed for one purpose never
 * opens as another (each label gives its own key).
 */
export function operationalSecretBox(
  operationalSecretKey: Uint8Array,
  label: { info: string; prefix: string },
): { seal(plain: string): string; open(sealed: string): string } {
  const { info, prefix } = label;
  const key = Buffer.from(hkdfSync('sha384', operationalSecretKey, Buffer.alloc(0), info, 32));
  return {
    seal(plain: string): string {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return prefix + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url');
    },
    open(sealed: string): string {
      if (!sealed.startsWith(prefix)) throw new Error('not a sealed value');
      const raw = Buffer.from(sealed.slice(prefix.length), 'base64url');
      if (raw.length < 28) throw new Error('sealed value too short');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
        'utf8',
      );
    },
  };
}
