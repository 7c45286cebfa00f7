/**
 * The box that seals a notification channel's write-only fields (URLs that are credentials, API
 * keys, routing keys, signing secrets) before they reach the state store: AES-256-GCM under a key
 * derived from the engine's operational secret key (HKDF-SHA384, info `coffer/notify-secret-box/v1`).
 * A copy of the state store alone (a backup of the database, a control-plane export) holds only
 * sealed text; only an engine with the operational key opens it. Format: `cnb1.` + base64url of
 * nonce (12) | ciphertext | tag (16).
 */
import type { SecretBox } from '@coffer/notify';
import { operationalSecretBox } from '../keys.ts';

const PREFIX = 'cnb1.';
const INFO = 'coffer/notify-secret-box/v1';

export function notifySecretBox(operationalSecretKey: Uint8Array): SecretBox {
  return operationalSecretBox(operationalSecretKey, { info: INFO, prefix: PREFIX });
}
