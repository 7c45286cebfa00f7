/**
 * The signed report (docs/reports.md "Signed form"): the body
 * `{ v: 1, kind, generatedAt, engineVersion, period, signerFingerprint, data }` as canonical JSON
 * (RFC 8785, @coffer/crypto `canonicalJson`), and a detached hybrid Ed25519 + ML-DSA-87 signature
 * by the engine's signer over the body's UTF-8 bytes under the context `coffer/report/v1`, so a
 * report signature is never valid as any other Coffer signature (docs/crypto.md "Signatures").
 *
 * The reply carries the canonical text itself (a string), so what was signed reaches the reader
 * byte for byte, whatever JSON library parses the outer document. The signer's fingerprint is
 * inside the signed body: a report cannot be passed off as another signer's.
 */
import { canonicalJson, encodeKeyFile, fingerprint, sign, toBase64Url } from '@coffer/crypto';
import type { ReportPeriod } from './period.ts';

export const REPORT_CONTEXT = 'coffer/report/v1';
export const REPORT_VERSION = 1;

export interface ReportBody<D = unknown> {
  v: 1;
  kind: string;
  generatedAt: string;
  engineVersion: string;
  period: ReportPeriod;
  signerFingerprint: string;
  data: D;
}

/** The JSON reply of `GET /admin/reports/<kind>` (the file `coffer-recover verify-report` reads). */
export interface SignedReport {
  /** The signed body: canonical JSON text of a ReportBody. */
  report: string;
  /** base64url of the 4,692-byte hybrid signature over UTF-8(report) under REPORT_CONTEXT. */
  signature: string;
  /** The signer public key as an armoured `.pub` file (`encodeKeyFile('signer-public')`). */
  signerPublicKey: string;
  /** Its fingerprint (also inside the signed body): compare with your own record before trusting. */
  signerFingerprint: string;
  /** How a third party checks this document, in words and commands. */
  verification: string;
}

export interface Signer {
  secretKey: Uint8Array;
  publicKey: Uint8Array;
}

/** The verification recipe carried in every signed reply (docs/reports.md "Verifying a report"). */
export function verificationRecipe(kind: string, signerFingerprint: string): string {
  return [
    `Save this whole JSON reply unchanged, e.g. as ${kind}.json.`,
    `The signer is the engine's signer key, fingerprint ${signerFingerprint}. Check it against your own`,
    "record (GET /admin/status shows fingerprints.signer; every destination bucket holds the engine's",
    'signer public key as _RECOVERY/signer.pub), then save the signerPublicKey field, or that file, as',
    'engine-signer.pub and run, offline:',
    `  coffer-recover verify-report --report ${kind}.json --signer engine-signer.pub`,
    'or pin the fingerprint alone (the public key in the reply is then checked against it):',
    `  coffer-recover verify-report --report ${kind}.json --pin-signer ${signerFingerprint}`,
    'By hand: the report field is the signed message, canonical JSON (RFC 8785) of itself; signature is',
    `base64url of a hybrid Ed25519 + ML-DSA-87 signature over its UTF-8 bytes under the context ${REPORT_CONTEXT}`,
    '(docs/crypto.md "Signatures"); both halves must verify, and report.signerFingerprint must equal the',
    'fingerprint of the key you verify with. A PDF of this report carries no checkable signature.',
  ].join('\n');
}

/**
 * Signs a report body (a ReportBody whose signerFingerprint is the signer's). Throws what
 * @coffer/crypto throws.
 */
export function signReport(body: ReportBody<unknown>, signer: Signer): SignedReport {
  const text = canonicalJson(body);
  const signature = sign(signer.secretKey, new TextEncoder().encode(text), REPORT_CONTEXT);
  const fpr = fingerprint(signer.publicKey);
  return {
    report: text,
    signature: toBase64Url(signature),
    signerPublicKey: encodeKeyFile('signer-public', signer.publicKey),
    signerFingerprint: fpr,
    verification: verificationRecipe(body.kind, fpr),
  };
}
