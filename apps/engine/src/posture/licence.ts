/**
 * The signed licence (docs/posture.md "Licence").
 *
 * A licence file is JSON `{ kind: 'coffer-licence', body, signature }`:
 *   body      = { v: 1, licensee, tier, seats?, issuedAt, notBefore, expiresAt, licenceId }
 *   signature = base64url( sign( vendorSecret, JCS(body), LICENCE_CONTEXT ) )   (hybrid Ed25519 + ML-DSA-87)
 * verified against the pinned vendor signer public key: the built-in pin (none in this release)
 * or ENGINE_LICENCE_VENDOR_PUBLIC_KEY. Both signature halves must verify (@coffer/crypto).
 *
 * The result is a report, never a gate: `checkLicence` does not throw, and nothing in the engine
 * refuses a backup, a restore or a drill because of it. Without a valid licence the effective tier
 * is `free`. An unverified body is never shown as fact: an `invalid` licence reports no licensee,
 * tier or dates.
 *
 * Security-relevant behaviour: the file and key are read with a size cap; error texts are fixed
 * reasons (no file content, no path, no key bytes).
 */
import { readFile } from 'node:fs/promises';
import {
  canonicalJsonBytes,
  decodeKeyFile,
  fingerprint,
  fromBase64Url,
  sign,
  toBase64Url,
  verify,
} from '@coffer/crypto';
import type { EngineConfig } from '../config.ts';

/** The signature context of a licence body. */
export const LICENCE_CONTEXT = 'coffer/licence/v1';
export const LICENCE_KIND = 'coffer-licence';
/** The tier reported without a valid licence. */
export const FREE_TIER = 'free';
/**
 * The vendor's licence signer public key (armoured), pinned in the build. None yet: no vendor key
 * exists, so without ENGINE_LICENCE_VENDOR_PUBLIC_KEY every licence is `invalid`.
 */
export const BUILT_IN_VENDOR_PUBLIC_KEY: string | null = null;
/** The largest licence or key file read (both are a few KiB). */
export const LICENCE_MAX_BYTES = 64 * 1024;

export interface LicenceBody {
  v: 1;
  licensee: string;
  tier: string;
  seats?: number;
  issuedAt: string;
  notBefore: string;
  expiresAt: string;
  licenceId: string;
}

export interface LicenceFile {
  kind: typeof LICENCE_KIND;
  body: LicenceBody;
  signature: string;
}

export type LicenceStatus = 'valid' | 'absent' | 'lapsed' | 'invalid' | 'not-yet-valid';

export interface LicenceReport {
  /** The effective tier: the licence's while `valid`, else `free`. */
  tier: string;
  status: LicenceStatus;
  /** Fixed reason text for every status but `valid`. */
  reason: string | null;
  /** From the verified body (null when absent or invalid). */
  licensee: string | null;
  licensedTier: string | null;
  seats: number | null;
  licenceId: string | null;
  issuedAt: string | null;
  notBefore: string | null;
  expiresAt: string | null;
  /** Which vendor key the engine trusts. */
  vendorKey: { source: 'built-in' | 'variable' | 'none'; fingerprint: string | null };
  /** A licence never gates these (stated so a reader need not guess). */
  gates: { backups: false; restores: false; drills: false };
  checkedAt: string;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const TEXT = /^\P{Cc}{1,200}$/u;
const TIER = /^[a-z][a-z0-9-]{0,31}$/;
const LICENCE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const BODY_FIELDS = new Set([
  'v',
  'licensee',
  'tier',
  'seats',
  'issuedAt',
  'notBefore',
  'expiresAt',
  'licenceId',
]);

/** The body's shape, or a fixed reason. */
export function checkLicenceBody(body: unknown): LicenceBody | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body is not an object';
  const b = body as Record<string, unknown>;
  if (Object.keys(b).some((k) => !BODY_FIELDS.has(k))) return 'the body has an unknown field';
  if (b.v !== 1) return 'unsupported licence version';
  if (typeof b.licensee !== 'string' || !TEXT.test(b.licensee)) return 'licensee is missing or malformed';
  if (typeof b.tier !== 'string' || !TIER.test(b.tier)) return 'tier is missing or malformed';
  if (b.seats !== undefined && (!Number.isSafeInteger(b.seats) || (b.seats as number) < 1))
    return 'seats must be a positive whole number';
  if (typeof b.licenceId !== 'string' || !LICENCE_ID.test(b.licenceId))
    return 'licenceId is missing or malformed';
  for (const f of ['issuedAt', 'notBefore', 'expiresAt'] as const) {
    const v = b[f];
    if (typeof v !== 'string' || !RFC3339.test(v) || Number.isNaN(Date.parse(v)))
      return `${f} is not an RFC 3339 time`;
  }
  if (Date.parse(b.expiresAt as string) <= Date.parse(b.notBefore as string))
    return 'expiresAt is not after notBefore';
  return b as unknown as LicenceBody;
}

/** Signs `body` with the vendor's signer secret key (the vendor's tool: scripts/sign-licence.mjs). */
export function signLicence(body: LicenceBody, vendorSecretKey: Uint8Array): LicenceFile {
  const checked = checkLicenceBody(body);
  if (typeof checked === 'string') throw new TypeError(`not a licence body: ${checked}`);
  const signature = toBase64Url(sign(vendorSecretKey, canonicalJsonBytes(checked), LICENCE_CONTEXT));
  return { kind: LICENCE_KIND, body: checked, signature };
}

/** Verifies `file` (parsed JSON) against `vendorPublicKey`: the body, or a fixed reason. */
export function verifyLicence(file: unknown, vendorPublicKey: Uint8Array): LicenceBody | string {
  if (typeof file !== 'object' || file === null) return 'the licence file is not a licence';
  const f = file as Record<string, unknown>;
  if (f.kind !== LICENCE_KIND || typeof f.signature !== 'string') return 'the licence file is not a licence';
  const body = checkLicenceBody(f.body);
  if (typeof body === 'string') return body;
  let signature: Uint8Array;
  try {
    signature = fromBase64Url(f.signature);
  } catch {
    return 'the signature is not base64url';
  }
  let ok: boolean;
  try {
    ok = verify(vendorPublicKey, canonicalJsonBytes(body), signature, LICENCE_CONTEXT);
  } catch {
    ok = false;
  }
  return ok ? body : 'the signature does not verify against the pinned vendor key';
}

async function readCapped(path: string): Promise<string | 'missing' | 'unreadable' | 'too-large'> {
  try {
    const bytes = await readFile(path);
    if (bytes.length > LICENCE_MAX_BYTES) return 'too-large';
    return bytes.toString('utf8');
  } catch (e) {
    return (e as { code?: string }).code === 'ENOENT' ? 'missing' : 'unreadable';
  }
}

/** The trusted vendor key: the variable's when set (even when unusable), else the built-in pin. */
async function vendorKey(
  config: EngineConfig['licence'],
): Promise<{ source: LicenceReport['vendorKey']['source']; key: Uint8Array | null }> {
  const v = config.vendorPublicKey;
  const text = v === undefined ? BUILT_IN_VENDOR_PUBLIC_KEY : 'text' in v ? v.text : await readCapped(v.path);
  const source = v !== undefined ? 'variable' : text === null ? 'none' : 'built-in';
  if (text === null || text === 'missing' || text === 'unreadable' || text === 'too-large')
    return { source, key: null };
  try {
    return { source, key: decodeKeyFile(text, 'signer-public').key };
  } catch {
    return { source, key: null };
  }
}

/** The licence as `GET /admin/licence` reports it. Never throws. */
export async function checkLicence(
  config: EngineConfig['licence'],
  now: Date = new Date(),
): Promise<LicenceReport> {
  const vendor = await vendorKey(config);
  const base = {
    tier: FREE_TIER,
    reason: null as string | null,
    licensee: null,
    licensedTier: null,
    seats: null,
    licenceId: null,
    issuedAt: null,
    notBefore: null,
    expiresAt: null,
    vendorKey: { source: vendor.source, fingerprint: vendor.key ? fingerprint(vendor.key) : null },
    gates: { backups: false, restores: false, drills: false } as const,
    checkedAt: now.toISOString(),
  };
  if (config.file === undefined)
    return { ...base, status: 'absent', reason: 'no licence file is configured (ENGINE_LICENCE_FILE)' };
  const text = await readCapped(config.file);
  if (text === 'missing') return { ...base, status: 'absent', reason: 'the licence file does not exist' };
  if (text === 'unreadable') return { ...base, status: 'invalid', reason: 'the licence file cannot be read' };
  if (text === 'too-large') return { ...base, status: 'invalid', reason: 'the licence file is too large' };
  if (vendor.key === null)
    return {
      ...base,
      status: 'invalid',
      reason:
        vendor.source === 'none'
          ? 'no vendor key is pinned in this build: set ENGINE_LICENCE_VENDOR_PUBLIC_KEY to check licences'
          : 'the vendor key (ENGINE_LICENCE_VENDOR_PUBLIC_KEY) is not a readable signer public key',
    };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ...base, status: 'invalid', reason: 'the licence file is not JSON' };
  }
  const body = verifyLicence(parsed, vendor.key);
  if (typeof body === 'string') return { ...base, status: 'invalid', reason: body };
  const facts = {
    licensee: body.licensee,
    licensedTier: body.tier,
    seats: body.seats ?? null,
    licenceId: body.licenceId,
    issuedAt: body.issuedAt,
    notBefore: body.notBefore,
    expiresAt: body.expiresAt,
  };
  const t = now.getTime();
  if (t < Date.parse(body.notBefore))
    return {
      ...base,
      ...facts,
      status: 'not-yet-valid',
      reason: 'the licence is not valid before notBefore',
    };
  if (t >= Date.parse(body.expiresAt))
    return { ...base, ...facts, status: 'lapsed', reason: 'the licence expired: the free tier applies' };
  return { ...base, ...facts, tier: body.tier, status: 'valid' };
}
