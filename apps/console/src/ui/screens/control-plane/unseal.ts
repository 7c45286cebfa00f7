/**
 * Opens a sealed control-plane export in the browser with the break-glass secret key (the
 * specification's "sealed artefact plus browser-recovered plaintext"), following
 * docs/control-plane.md "Sealed artefact" step by step as `coffer-recover open-export` does
 * (apps/recover/src/open-export.ts): kind and version, the embedded signer key against the
 * header's fingerprint, the header signature, the recipient, the capsule opened with JCS(header)
 * as associated data, the body hash, and the inner signature. The secret key is decoded here,
 * used once and its bytes zeroed; it is never sent anywhere. Only the opened body (the signed
 * envelope, which carries no secret) goes to the engine beside the artefact.
 */
import { SEALED_KIND, SIGNED_KIND } from './types.ts';

const HEADER_CONTEXT = 'coffer/control-plane-sealed-header/v1';
const EXPORT_CONTEXT = 'coffer/control-plane-export/v1';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface Unsealed {
  /** The signed envelope (the capsule's body), to send as `plaintext`. */
  plaintext: Json;
  signerFingerprint: string;
  recipient: string;
}

export async function unsealInBrowser(sealed: Json, keyText: string): Promise<Unsealed> {
  // Loaded only when a sealed export is opened: the post-quantum code stays out of other screens.
  const c = await import('@coffer/crypto');
  if (sealed.kind !== SEALED_KIND) throw new Error('This is not a sealed control-plane export.');
  if (sealed.v !== 1) throw new Error(`Sealed export version ${JSON.stringify(sealed.v)} is not supported.`);
  const header = sealed.header;
  if (
    !isObject(header) ||
    typeof header.signerFingerprint !== 'string' ||
    typeof header.recipient !== 'string' ||
    typeof header.bodyHash !== 'string' ||
    typeof sealed.headerSignature !== 'string' ||
    typeof sealed.signerPublicKey !== 'string' ||
    typeof sealed.capsule !== 'string'
  )
    throw new Error('The sealed export lacks its header, signature, signer or capsule.');
  const aad = c.canonicalJsonBytes(header);
  let signerKey: Uint8Array;
  let headerOk = false;
  try {
    signerKey = c.fromBase64Url(sealed.signerPublicKey);
    headerOk =
      c.fingerprint(signerKey) === header.signerFingerprint &&
      c.verify(signerKey, aad, c.fromBase64Url(sealed.headerSignature), HEADER_CONTEXT);
  } catch {
    headerOk = false;
  }
  if (!headerOk)
    throw new Error('The sealed header signature does not verify: the file is damaged or altered.');

  let decoded: { kind: string; key: Uint8Array };
  try {
    decoded = c.decodeKeyFile(keyText);
  } catch {
    throw new Error('The key file is not a readable Coffer key file (damaged, truncated or another format).');
  }
  if (decoded.kind !== 'recipient-secret') {
    decoded.key.fill(0);
    throw new Error(
      decoded.kind === 'recipient-public'
        ? 'That is the public half: choose the break-glass SECRET key file (the one without .pub).'
        : 'That key file is not a break-glass secret key.',
    );
  }
  let body: Uint8Array;
  try {
    const mine = c.fingerprint(c.recipientPublicKeyFromSecret(decoded.key));
    if (mine !== header.recipient)
      throw new Error(
        `This export is sealed to ${header.recipient.slice(0, 23)}…, not to this key (${mine.slice(0, 23)}…).`,
      );
    try {
      body = await c.open(decoded.key, c.fromBase64Url(sealed.capsule), aad);
    } catch {
      throw new Error('The capsule failed to open: the file is damaged or altered.');
    }
  } finally {
    decoded.key.fill(0);
  }
  if (c.sha384Digest(body) !== header.bodyHash)
    throw new Error('The opened body does not match the hash the header signs.');
  let signed: unknown;
  try {
    signed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body));
  } catch {
    throw new Error('The opened body is not JSON.');
  }
  if (
    !isObject(signed) ||
    signed.kind !== SIGNED_KIND ||
    typeof signed.export !== 'string' ||
    typeof signed.signature !== 'string'
  )
    throw new Error('The opened body is not a signed control-plane export.');
  let innerOk = false;
  try {
    innerOk = c.verify(
      signerKey!,
      new TextEncoder().encode(signed.export),
      c.fromBase64Url(signed.signature),
      EXPORT_CONTEXT,
    );
  } catch {
    innerOk = false;
  }
  if (!innerOk) throw new Error('The export inside does not verify under the signer named in its header.');
  return { plaintext: signed, signerFingerprint: header.signerFingerprint, recipient: header.recipient };
}
