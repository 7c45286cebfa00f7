/**
 * The channel document (normative layout: docs/updates.md, "Channel document") and its signed
 * envelope: `{ signed, signer, signature }`, where `signature` is the hybrid Ed25519 + ML-DSA-87
 * signature (@coffer/crypto) over the RFC 8785 canonical JSON of `signed` under the context
 * `coffer/update-channel/v1`.
 *
 * Security-relevant behaviour, in the manner of TUF: the signer must be the pinned one and both
 * signature halves must verify before any field is believed; the document must not be expired
 * (freeze attack) nor issued in the future, within a bounded clock skew; its sequence must not be
 * lower than the last sequence the caller accepted (replay and rollback of the channel), and an
 * equal sequence must carry the same document. Every component comes from this one document, so
 * an artefact is only ever checked against the document that names the recommended version.
 */
import {
  canonicalJsonBytes,
  decodeKeyFile,
  fingerprint,
  fromBase64Url,
  isDigest,
  sha384Digest,
  sign,
  signerPublicKeyFromSecret,
  toBase64Url,
  verify,
} from '@coffer/crypto';
import semver from 'semver';
import { UpdateError } from './errors.ts';

/** The signature context of a channel document. */
export const CHANNEL_CONTEXT = 'coffer/update-channel/v1';
/** The `kind` of a channel document. */
export const CHANNEL_KIND = 'coffer-update-channel';
/** Default tolerated clock difference when checking issuedAt and expiresAt: five minutes. */
export const DEFAULT_CLOCK_SKEW_MS = 5 * 60_000;

/** The components a channel can name; `engine` is required, `console` optional. */
export const COMPONENTS = ['engine', 'console'] as const;
export type ComponentName = (typeof COMPONENTS)[number];

/** The risk class of a release. */
export const RISKS = ['routine', 'security', 'breaking'] as const;
export type Risk = (typeof RISKS)[number];

/** One artefact the channel names. */
export interface ChannelComponent {
  /** Semantic version of this artefact (the engine's must equal `recommended.version`). */
  version: string;
  /** Absolute https URL, or a relative reference resolved against the channel's own location. */
  url: string;
  /** `sha384:<96 hex>` of the artefact bytes. */
  sha384: string;
  /** Exact size in bytes; the download is bounded by it before and while reading. */
  size: number;
}

/** The recommended release. */
export interface RecommendedRelease {
  version: string;
  /** Lowest engine version that may apply this release; absent means any. */
  minEngineVersion?: string;
  risk: Risk;
  /** Steps the operator must take, in order (shown, never executed). */
  requiredSteps: string[];
  /** The state schema epoch this release runs on; rollback never crosses an epoch. */
  schemaEpoch: number;
  /** True when the release migrates the state store: no one-click apply, no ramp. */
  migration: boolean;
}

/** The signed channel document, version 1. */
export interface ChannelDocument {
  kind: typeof CHANNEL_KIND;
  v: 1;
  /** Channel name (`stable`, `beta`, ...); a verifier can require one. */
  channel: string;
  /** Monotonically increasing across the documents of one channel. */
  sequence: number;
  /** RFC 3339 UTC times, `YYYY-MM-DDTHH:MM:SS[.fff]Z`. */
  issuedAt: string;
  expiresAt: string;
  recommended: RecommendedRelease;
  components: { engine: ChannelComponent; console?: ChannelComponent };
}

/** The envelope as served: the document, the signer's fingerprint and the signature. */
export interface SignedChannel {
  signed: ChannelDocument;
  signer: string;
  signature: string;
}

/** The pinned signer: its public key and, optionally, the fingerprint it must have. */
export interface ChannelTrust {
  publicKey: Uint8Array;
  fingerprint?: string;
}

/** A channel document that passed every check. */
export interface VerifiedChannel {
  document: ChannelDocument;
  /** `sha384:` of the canonical JSON of the document: names this exact document. */
  digest: string;
  /** The signer's fingerprint. */
  signer: string;
  /** Where it came from: the final https URL, or the absolute file path. */
  source: string;
  /** The envelope bytes as received (what a caller caches or persists). */
  bytes: Uint8Array;
}

export interface VerifyChannelOptions {
  trust: ChannelTrust;
  /** The current time (ms since the epoch or a Date); default Date.now(). */
  now?: number | Date;
  /** Tolerated clock difference; default {@link DEFAULT_CLOCK_SKEW_MS}, at most one hour. */
  maxClockSkewMs?: number;
  /** The highest sequence accepted before (persisted by the caller); undefined on first use. */
  lastSequence?: number;
  /** The digest of the document accepted at `lastSequence`; an equal sequence must match it. */
  lastDigest?: string;
  /** When set, the document's `channel` must equal it. */
  channel?: string;
  /** Recorded as `source` in the result. */
  source?: string;
}

const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z$/;
const CHANNEL_NAME_RE = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const MAX_STEPS = 32;
const MAX_STEP_CHARS = 500;
const MAX_URL_CHARS = 2048;

const malformed = (what: string): UpdateError =>
  new UpdateError('ERR_UPDATE_MALFORMED_CHANNEL', `channel document: ${what}`);

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function onlyKeys(o: Record<string, unknown>, allowed: readonly string[], where: string): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) throw malformed(`unknown field ${where}.${k}`);
}

/** True when `v` is a semantic version in its normal form (`1.2.3`, `1.2.3-rc.1`; no `v`). */
export function isVersion(v: unknown): v is string {
  return typeof v === 'string' && v.length <= 64 && semver.valid(v) === v;
}

function version(o: Record<string, unknown>, key: string, where: string): string {
  const v = o[key];
  if (!isVersion(v)) throw malformed(`${where}.${key} is not a semantic version`);
  return v;
}

function time(o: Record<string, unknown>, key: string): string {
  const v = o[key];
  if (typeof v !== 'string' || !TIME_RE.test(v) || Number.isNaN(Date.parse(v)))
    throw malformed(`${key} is not an RFC 3339 UTC time`);
  return v;
}

function integer(o: Record<string, unknown>, key: string, where: string, min: number): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw malformed(`${where}.${key} is not an integer >= ${min}`);
  return v;
}

/** Checks a component URL: an absolute https URL, or a relative path without `..` or `\`. */
export function checkComponentUrl(url: unknown, where: string): string {
  if (typeof url !== 'string' || url.length === 0 || url.length > MAX_URL_CHARS)
    throw malformed(`${where}.url is missing or too long`);
  if (/^[a-z][a-z0-9+.-]*:/i.test(url)) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw malformed(`${where}.url is not a URL`);
    }
    if (u.protocol !== 'https:') throw malformed(`${where}.url must be https or relative`);
    if (u.username || u.password) throw malformed(`${where}.url carries credentials`);
    return url;
  }
  const segments = url.split('/');
  if (
    url.startsWith('/') ||
    url.includes('\\') ||
    url.includes('?') ||
    url.includes('#') ||
    url.includes('%') ||
    segments.some((s) => s === '' || s === '.' || s === '..')
  )
    throw malformed(`${where}.url is not a plain relative path`);
  return url;
}

function component(x: unknown, where: string): ChannelComponent {
  if (!isRecord(x)) throw malformed(`${where} is not an object`);
  onlyKeys(x, ['version', 'url', 'sha384', 'size'], where);
  const sha = x.sha384;
  if (!isDigest(sha)) throw malformed(`${where}.sha384 is not sha384:<96 hex>`);
  return {
    version: version(x, 'version', where),
    url: checkComponentUrl(x.url, where),
    sha384: sha,
    size: integer(x, 'size', where, 1),
  };
}

function recommended(x: unknown): RecommendedRelease {
  const where = 'recommended';
  if (!isRecord(x)) throw malformed(`${where} is not an object`);
  onlyKeys(x, ['version', 'minEngineVersion', 'risk', 'requiredSteps', 'schemaEpoch', 'migration'], where);
  if (!RISKS.includes(x.risk as Risk)) throw malformed(`${where}.risk is not one of ${RISKS.join(', ')}`);
  const steps = x.requiredSteps;
  if (
    !Array.isArray(steps) ||
    steps.length > MAX_STEPS ||
    !steps.every((s) => typeof s === 'string' && s.length > 0 && s.length <= MAX_STEP_CHARS)
  )
    throw malformed(`${where}.requiredSteps is not a list of at most ${MAX_STEPS} short texts`);
  if (typeof x.migration !== 'boolean') throw malformed(`${where}.migration is not a boolean`);
  const out: RecommendedRelease = {
    version: version(x, 'version', where),
    risk: x.risk as Risk,
    requiredSteps: [...(steps as string[])],
    schemaEpoch: integer(x, 'schemaEpoch', where, 0),
    migration: x.migration,
  };
  if (x.minEngineVersion !== undefined) out.minEngineVersion = version(x, 'minEngineVersion', where);
  return out;
}

/**
 * Checks the shape of a channel document (every rule of docs/updates.md "Channel document") and
 * returns a clean copy. Throws ERR_UPDATE_MALFORMED_CHANNEL naming the first field at fault.
 * It checks no signature and no time: use {@link verifyChannel} for a document from a channel.
 */
export function parseChannelDocument(x: unknown): ChannelDocument {
  if (!isRecord(x)) throw malformed('not an object');
  onlyKeys(
    x,
    ['kind', 'v', 'channel', 'sequence', 'issuedAt', 'expiresAt', 'recommended', 'components'],
    'document',
  );
  if (x.kind !== CHANNEL_KIND) throw malformed(`kind is not ${CHANNEL_KIND}`);
  if (x.v !== 1) throw malformed('v is not 1 (this reader implements version 1 only)');
  if (typeof x.channel !== 'string' || !CHANNEL_NAME_RE.test(x.channel))
    throw malformed('channel is not a short lower-case name');
  const issuedAt = time(x, 'issuedAt');
  const expiresAt = time(x, 'expiresAt');
  if (Date.parse(expiresAt) <= Date.parse(issuedAt)) throw malformed('expiresAt is not after issuedAt');
  const rec = recommended(x.recommended);
  if (!isRecord(x.components)) throw malformed('components is not an object');
  onlyKeys(x.components, COMPONENTS, 'components');
  const components: ChannelDocument['components'] = {
    engine: component(x.components.engine, 'components.engine'),
  };
  if (x.components.console !== undefined)
    components.console = component(x.components.console, 'components.console');
  if (components.engine.version !== rec.version)
    throw malformed('components.engine.version differs from recommended.version');
  if (rec.minEngineVersion !== undefined && semver.gt(rec.minEngineVersion, rec.version))
    throw malformed('recommended.minEngineVersion is newer than the release itself');
  return {
    kind: CHANNEL_KIND,
    v: 1,
    channel: x.channel,
    sequence: integer(x, 'sequence', 'document', 1),
    issuedAt,
    expiresAt,
    recommended: rec,
    components,
  };
}

/**
 * Builds the trust anchor from an armoured signer public key file, checking it against a pinned
 * fingerprint when one is given. Throws ERR_UPDATE_TRUST_CONFIG for a key file that does not
 * decode as a signer public key or whose fingerprint differs from the pin.
 */
export function trustFromKeyFile(text: string, pin?: string): ChannelTrust {
  let key: Uint8Array;
  try {
    key = decodeKeyFile(text, 'signer-public').key;
  } catch {
    throw new UpdateError('ERR_UPDATE_TRUST_CONFIG', 'the channel key file is not a signer public key');
  }
  const fp = fingerprint(key);
  if (pin !== undefined && pin !== fp)
    throw new UpdateError(
      'ERR_UPDATE_TRUST_CONFIG',
      `the channel key's fingerprint is not the pinned ${pin}`,
    );
  return { publicKey: key, fingerprint: fp };
}

function trustedFingerprint(trust: ChannelTrust): string {
  let fp: string;
  try {
    fp = fingerprint(trust.publicKey);
  } catch {
    throw new UpdateError('ERR_UPDATE_TRUST_CONFIG', 'the pinned channel key is not a signer public key');
  }
  if (trust.fingerprint !== undefined && trust.fingerprint !== fp)
    throw new UpdateError(
      'ERR_UPDATE_TRUST_CONFIG',
      `the pinned channel key's fingerprint is not ${trust.fingerprint}`,
    );
  return fp;
}

/**
 * Signs a channel document with a signer secret key (@coffer/crypto `generateSigner`, or a
 * `signer-secret` key file) and returns the envelope bytes (JSON text, UTF-8, newline at the end).
 * Throws ERR_UPDATE_MALFORMED_CHANNEL for a document that breaks a rule, and
 * ERR_UPDATE_TRUST_CONFIG for a key that is not a signer secret key.
 */
export function signChannel(document: ChannelDocument, secretKey: Uint8Array): Uint8Array {
  const doc = parseChannelDocument(document);
  const message = canonicalJsonBytes(doc);
  let signature: Uint8Array;
  let signer: string;
  try {
    signature = sign(secretKey, message, CHANNEL_CONTEXT);
    signer = fingerprint(signerPublicKeyFromSecret(secretKey));
  } catch {
    throw new UpdateError('ERR_UPDATE_TRUST_CONFIG', 'the signing key is not a signer secret key');
  }
  const envelope: SignedChannel = { signed: doc, signer, signature: toBase64Url(signature) };
  return new TextEncoder().encode(`${JSON.stringify(envelope, null, 2)}\n`);
}

function toMs(now: number | Date | undefined): number {
  return now === undefined ? Date.now() : typeof now === 'number' ? now : now.getTime();
}

/**
 * Verifies envelope bytes as served by a channel, in this order: JSON envelope shape, signer
 * fingerprint equals the pinned one (ERR_UPDATE_WRONG_SIGNER), both signature halves over the
 * canonical document (ERR_UPDATE_BAD_SIGNATURE), the document's rules
 * (ERR_UPDATE_MALFORMED_CHANNEL), the channel name, issuedAt not in the future
 * (ERR_UPDATE_NOT_YET_VALID), not expired (ERR_UPDATE_EXPIRED), and the sequence against the last
 * accepted one (ERR_UPDATE_SEQUENCE_ROLLBACK). Returns the verified channel; the caller persists
 * `document.sequence` and `digest` as its new `lastSequence` / `lastDigest`.
 */
export function verifyChannel(bytes: Uint8Array, options: VerifyChannelOptions): VerifiedChannel {
  const pinned = trustedFingerprint(options.trust);
  let envelope: unknown;
  try {
    envelope = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw malformed('the envelope is not UTF-8 JSON');
  }
  if (!isRecord(envelope)) throw malformed('the envelope is not an object');
  onlyKeys(envelope, ['signed', 'signer', 'signature'], 'envelope');
  if (typeof envelope.signer !== 'string' || typeof envelope.signature !== 'string')
    throw malformed('the envelope lacks signer or signature');
  if (envelope.signer !== pinned)
    throw new UpdateError(
      'ERR_UPDATE_WRONG_SIGNER',
      `channel signed by ${isDigest(envelope.signer) ? envelope.signer : 'an unknown key'}, not the pinned ${pinned}`,
    );
  let message: Uint8Array;
  let signature: Uint8Array;
  try {
    message = canonicalJsonBytes(envelope.signed);
    signature = fromBase64Url(envelope.signature);
  } catch {
    throw malformed('the signed document or the signature cannot be decoded');
  }
  if (!verify(options.trust.publicKey, message, signature, CHANNEL_CONTEXT))
    throw new UpdateError(
      'ERR_UPDATE_BAD_SIGNATURE',
      'the channel signature does not verify (both halves must)',
    );
  const document = parseChannelDocument(envelope.signed);
  if (options.channel !== undefined && document.channel !== options.channel)
    throw malformed(`channel is ${document.channel}, not the configured ${options.channel}`);
  const now = toMs(options.now);
  const skew = Math.min(Math.max(options.maxClockSkewMs ?? DEFAULT_CLOCK_SKEW_MS, 0), 3_600_000);
  if (Date.parse(document.issuedAt) > now + skew)
    throw new UpdateError(
      'ERR_UPDATE_NOT_YET_VALID',
      `channel document issued in the future (${document.issuedAt})`,
    );
  if (Date.parse(document.expiresAt) <= now - skew)
    throw new UpdateError('ERR_UPDATE_EXPIRED', `channel document expired at ${document.expiresAt}`);
  const digest = sha384Digest(message);
  const last = options.lastSequence;
  if (last !== undefined) {
    if (document.sequence < last)
      throw new UpdateError(
        'ERR_UPDATE_SEQUENCE_ROLLBACK',
        `channel sequence ${document.sequence} is lower than the accepted ${last}`,
      );
    if (document.sequence === last && options.lastDigest !== undefined && options.lastDigest !== digest)
      throw new UpdateError(
        'ERR_UPDATE_SEQUENCE_ROLLBACK',
        `channel sequence ${last} was accepted before for another document`,
      );
  }
  return { document, digest, signer: pinned, source: options.source ?? '', bytes };
}

/** The named component of a verified channel; throws ERR_UPDATE_UNKNOWN_COMPONENT when absent. */
export function channelComponent(channel: VerifiedChannel, name: ComponentName): ChannelComponent {
  const c = (channel.document.components as Record<string, ChannelComponent | undefined>)[name];
  if (c === undefined || !COMPONENTS.includes(name))
    throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `the channel names no ${String(name)} artefact`);
  return c;
}
