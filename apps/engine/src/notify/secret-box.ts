/**
 * The box that seals a notification channel's write-only fields (URLs that are credentials, API
 * keys, routing keys, signing secrets) before they reach the state store: AES-256-GCM under a key
 * derived from the engine's operational secret key (HKDF-SHA384, info `coffer/notify-secret-box/v1`).
 * A copy of the state store alone (a backup of the database, a control-plane export) holds only
 * sealed text; only an engine with the operational key opens it. Format: `cnb1.` + base64url of
 * nonce (12) | ciphertext | tag (16).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { SecretBox } from '@coffer/notify';

const PREFIX = 'cnb1.';
const INFO = 'coffer/notify-secret-box/v1';

export function notifySecretBox(operationalSecretKey: Uint8Array): SecretBox {
  const key = Buffer.from(hkdfSync('sha384', operationalSecretKey, Buffer.alloc(0), INFO, 32));
  return {
    seal(plain: string): string {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return PREFIX + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url');
    },
    open(sealed: string): string {
      if (!sealed.startsWith(PREFIX)) throw new Error('not a sealed value');
      const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64url');
      if (raw.length < 28) throw new Error('sealed value too short');
      const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString(
        'utf8',
      );
    },
  };
}
