/**
 * The two envelopes of a control-plane export (docs/control-plane.md "Signed download" and
 * "Sealed artefact"):
 *
 * - signed: `{ v: 1, kind: 'coffer-control-plane-signed-export', signerFingerprint, export,
 *   signature }`, where `export` is the RFC 8785 canonical JSON text of the document and
 *   `signature` the base64url hybrid signature of its UTF-8 bytes under EXPORT_CONTEXT;
 * - sealed: `{ v: 1, kind: 'coffer-control-plane-sealed-export', header, headerSignature, capsule }`,
 *   where the capsule seals the canonical bytes of the signed envelope (the BODY) to the
 *   break-glass public key with `aad = JCS(header)`, and the header, signed by the engine's
 *   signer under SEALED_HEADER_CONTEXT, carries the body's SHA-384. The engine never holds the
 *   break-glass secret key; it checks a body opened elsewhere by its hash.
 *
 * Every check returns a refusal sentence instead of throwing; no sentence carries input bytes.
 */
import {
  canonicalJson,
  canonicalJsonBytes,
  fingerprint,
  fromBase64Url,
  seal,
  sha384Digest,
  sign,
  toBase64Url,
  verify,
} from '@coffer/crypto';
import { type ControlPlaneExport, EXPORT_KIND } from './document.ts';

export const EXPORT_CONTEXT = 'coffer/control-plane-export/v1';
export const SEALED_HEADER_CONTEXT = 'coffer/control-plane-sealed-header/v1';
export const SIGNED_KIND = 'coffer-control-plane-signed-export';
export const SEALED_KIND = 'coffer-control-plane-sealed-export';
export const HEADER_KIND = 'coffer-control-plane-sealed-header';

export interface SignedExport {
  v: 1;
  kind: typeof SIGNED_KIND;
  signerFingerprint: string;
  /** The canonical JSON text of the export document. */
  export: string;
  /** base64url hybrid signature over UTF-8(export). */
  signature: string;
}

export interface SealedHeader {
  v: 1;
  kind: typeof HEADER_KIND;
  createdAt: string;
  signerFingerprint: string;
  /** Fingerprint of the break-glass public key the capsule is sealed to. */
  recipient: string;
  /** `sha384:<hex>` of the body: JCS of the signed envelope. */
  bodyHash: string;
  bodyBytes: number;
}

export interface SealedExport {
  v: 1;
  kind: typeof SEALED_KIND;
  header: SealedHeader;
  /** base64url hybrid signature over JCS(header). */
  headerSignature: string;
  /**
   * base64url of the signer's public key, for offline readers (`coffer-recover open-export`);
   * bound by the header's `signerFingerprint`. The engine ignores it and uses the key it pins.
   */
  signerPublicKey: string;
  /** base64url capsule (docs/crypto.md section 7). */
  capsule: string;
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: string };

const utf8 = new TextEncoder();

export function signExport(doc: ControlPlaneExport, signerSecretKey: Uint8Array): SignedExport {
  const text = canonicalJson(doc);
  return {
    v: 1,
    kind: SIGNED_KIND,
    signerFingerprint: doc.signerFingerprint,
    export: text,
    signature: toBase64Url(sign(signerSecretKey, utf8.encode(text), EXPORT_CONTEXT)),
  };
}

/** The body a sealed artefact carries and hashes: the canonical bytes of the signed envelope. */
export function bodyOf(signed: Pick<SignedExport, 'export' | 'signature' | 'signerFingerprint'>): Uint8Array {
  return canonicalJsonBytes({
    v: 1,
    kind: SIGNED_KIND,
    signerFingerprint: signed.signerFingerprint,
    export: signed.export,
    signature: signed.signature,
  });
}

export async function sealExport(
  signed: SignedExport,
  keys: { signerSecretKey: Uint8Array; signerPublicKey: Uint8Array; breakGlassPublicKey: Uint8Array },
  now = new Date(),
): Promise<SealedExport> {
  const body = bodyOf(signed);
  const header: SealedHeader = {
    v: 1,
    kind: HEADER_KIND,
    createdAt: now.toISOString(),
    signerFingerprint: signed.signerFingerprint,
    recipient: fingerprint(keys.breakGlassPublicKey),
    bodyHash: sha384Digest(body),
    bodyBytes: body.byteLength,
  };
  const aad = canonicalJsonBytes(header);
  const capsule = await seal(keys.breakGlassPublicKey, body, aad);
  return {
    v: 1,
    kind: SEALED_KIND,
    header,
    headerSignature: toBase64Url(sign(keys.signerSecretKey, aad, SEALED_HEADER_CONTEXT)),
    signerPublicKey: toBase64Url(keys.signerPublicKey),
    capsule: toBase64Url(capsule),
  };
}

function safeVerify(publicKey: Uint8Array, message: Uint8Array, signature: string, context: string): boolean {
  try {
    return verify(publicKey, message, fromBase64Url(signature), context);
  } catch {
    return false;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Verifies a signed envelope's signature against `signerPublicKey`, then parses the document and
 * checks its form: canonical text, `v: 1`, the export kind, slices present, and the fingerprint it
 * names equal to the verifying key's.
 */
export function openSigned(
  signed: { export: string; signature: string },
  signerPublicKey: Uint8Array,
): Outcome<ControlPlaneExport> {
  if (typeof signed.export !== 'string' || typeof signed.signature !== 'string')
    return { ok: false, error: 'export and signature must be strings' };
  if (!safeVerify(signerPublicKey, utf8.encode(signed.export), signed.signature, EXPORT_CONTEXT))
    return { ok: false, error: 'the export signature does not verify against the expected signer' };
  let doc: unknown;
  try {
    doc = JSON.parse(signed.export);
  } catch {
    return { ok: false, error: 'the export is not JSON' };
  }
  if (canonicalJson(doc) !== signed.export)
    return { ok: false, error: 'the export is not in canonical form' };
  if (!isObject(doc) || doc.kind !== EXPORT_KIND) return { ok: false, error: 'not a control-plane export' };
  if (doc.v !== 1) return { ok: false, error: 'unsupported export version' };
  const s = doc.slices;
  if (!isObject(s) || !isObject(s.configuration) || !isObject(s.resume) || !isObject(s.authority))
    return { ok: false, error: 'the export lacks its slices' };
  if (doc.signerFingerprint !== fingerprint(signerPublicKey))
    return { ok: false, error: 'the export names another signer' };
  return { ok: true, value: doc as unknown as ControlPlaneExport };
}

/**
 * Checks a sealed artefact's header against `signerPublicKey` and that `plaintext` (the signed
 * envelope opened off-engine) is the body the header hashes. Returns the signed envelope.
 */
export function crossCheckSealed(
  sealed: unknown,
  plaintext: unknown,
  signerPublicKey: Uint8Array,
): Outcome<{ export: string; signature: string; signerFingerprint: string }> {
  if (!isObject(sealed) || sealed.kind !== SEALED_KIND || sealed.v !== 1 || !isObject(sealed.header))
    return { ok: false, error: 'not a sealed control-plane export' };
  const header = sealed.header;
  if (header.kind !== HEADER_KIND || header.v !== 1 || typeof header.bodyHash !== 'string')
    return { ok: false, error: 'the sealed header is malformed' };
  if (typeof sealed.headerSignature !== 'string')
    return { ok: false, error: 'the sealed header is unsigned' };
  let aad: Uint8Array;
  try {
    aad = canonicalJsonBytes(header);
  } catch {
    return { ok: false, error: 'the sealed header is malformed' };
  }
  if (!safeVerify(signerPublicKey, aad, sealed.headerSignature, SEALED_HEADER_CONTEXT))
    return { ok: false, error: 'the sealed header signature does not verify against the expected signer' };
  if (
    !isObject(plaintext) ||
    plaintext.kind !== SIGNED_KIND ||
    typeof plaintext.export !== 'string' ||
    typeof plaintext.signature !== 'string' ||
    typeof plaintext.signerFingerprint !== 'string'
  )
    return { ok: false, error: 'the plaintext is not a signed control-plane export' };
  const body = bodyOf(plaintext as unknown as SignedExport);
  if (sha384Digest(body) !== header.bodyHash)
    return { ok: false, error: 'the plaintext does not match the body hash the sealed header signs' };
  return {
    ok: true,
    value: {
      export: plaintext.export,
      signature: plaintext.signature,
      signerFingerprint: plaintext.signerFingerprint,
    },
  };
}
