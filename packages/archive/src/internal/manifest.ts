/**
 * The root manifest (manifest.json) and its signature envelope (manifest.sig) of format 0.1.
 * docs/archive-format.md "Root manifest" and "Signature" are normative.
 */
import { canonicalJson, type Digest } from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import { isValidId } from '../layout.ts';
import {
  type ChunkedManifestDocument,
  FORMAT_NAME,
  type ManifestDocument,
  type ShardedManifestDocument,
} from '../types.ts';
import { concatBytes, lengthPrefixed, utf8 } from './bytes.ts';
import { isCount, isDigest, isObject } from './json-checks.ts';

/** Context string of the manifest signature (domain separation from every other signature). */
export const MANIFEST_SIGNATURE_CONTEXT = 'coffer/archive/manifest/v0.1';

/**
 * The most bytes a reader accepts for manifest.json, before its signature is checked (it is read
 * whole to be verified). Writers stay below it by sealing at most MANIFEST_MAX_SHARDS shards: a
 * shard entry is at most 175 bytes, the rest of a manifest a few KiB.
 */
export const MANIFEST_MAX_BYTES = 64 * 1024 * 1024;
export const MANIFEST_MAX_SHARDS = 350_000;
/** The most bytes a reader accepts for manifest.sig (about 6.4 KiB in practice). */
export const SIGNATURE_MAX_BYTES = 64 * 1024;
export const SIGNATURE_FORMAT = 'coffer-archive-signature';

/** The associated data under which the run's data key is wrapped for each recipient. */
export function dataKeyAad(job: string, runId: string): Uint8Array {
  return concatBytes(utf8('coffer/archive/v0.1/data-key'), lengthPrefixed(job), lengthPrefixed(runId));
}

/** The associated data under which a 0.2 run's chunk key is wrapped (docs/archive-format.md §12.2). */
export function chunkKeyAad(job: string, keyId: string): Uint8Array {
  return concatBytes(utf8('coffer/archive/v0.2/chunk-key'), lengthPrefixed(job), lengthPrefixed(keyId));
}

/** True when `v` is a format version this reader implements: 0.1 or 0.2 at any patch. */
export function isSupportedVersion(v: unknown): boolean {
  return typeof v === 'string' && /^0\.[12]\.(0|[1-9][0-9]{0,8})$/.test(v);
}

/** True for a 0.2 version string (the chunked line). */
export function isChunkedVersion(v: unknown): boolean {
  return typeof v === 'string' && /^0\.2\.(0|[1-9][0-9]{0,8})$/.test(v);
}

export interface SignatureDocument {
  format: typeof SIGNATURE_FORMAT;
  formatVersion: string;
  context: string;
  /** SHA-384 of the exact manifest.json bytes (a diagnostic: lets a reader say "manifest changed"). */
  manifest: Digest;
  signer: Digest;
  /** The hybrid signature, base64url. */
  signature: string;
}

function isTime(v: unknown): v is string {
  return typeof v === 'string' && !Number.isNaN(Date.parse(v));
}

/**
 * Checks every field of a parsed manifest (after its signature verified). Throws
 * ERR_ARCHIVE_MANIFEST_MALFORMED naming the field.
 */
export function validateManifest(v: unknown, object: string): ManifestDocument {
  const bad = (field: string) =>
    new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', { object, detail: `field ${field}` });
  if (!isObject(v)) throw bad('(root)');
  if (v.format !== FORMAT_NAME) throw bad('format');
  if (typeof v.formatVersion !== 'string') throw bad('formatVersion');
  if (typeof v.job !== 'string' || !isValidId(v.job)) throw bad('job');
  if (typeof v.runId !== 'string' || !isValidId(v.runId)) throw bad('runId');
  if (v.prevRunId !== null && (typeof v.prevRunId !== 'string' || !isValidId(v.prevRunId)))
    throw bad('prevRunId');
  if (!isTime(v.startedAt)) throw bad('startedAt');
  if (!isTime(v.sealedAt)) throw bad('sealedAt');
  const s = v.source;
  if (!isObject(s) || typeof s.type !== 'string') throw bad('source');
  for (const k of Object.keys(s)) if (typeof s[k] !== 'string') throw bad(`source.${k}`);
  const sg = v.signer;
  if (!isObject(sg) || !isDigest(sg.fingerprint) || typeof sg.publicKey !== 'string') throw bad('signer');
  if (!Array.isArray(v.recipients) || v.recipients.length === 0) throw bad('recipients');
  for (const r of v.recipients) {
    if (!isObject(r) || (r.role !== 'operational' && r.role !== 'break-glass')) throw bad('recipients.role');
    if (!isDigest(r.recipient) || typeof r.capsule !== 'string') throw bad('recipients');
  }
  if (isChunkedVersion(v.formatVersion)) return validateChunked(v, bad);
  if (!isCount(v.shardSize) || v.shardSize === 0) throw bad('shardSize');
  if (!Array.isArray(v.shards) || v.shards.length === 0) throw bad('shards');
  for (const sh of v.shards) {
    if (!isObject(sh) || !isCount(sh.size) || !isCount(sh.plainSize) || !isDigest(sh.sha384))
      throw bad('shards');
    if (sh.compression !== 'none' && sh.compression !== 'zstd') throw bad('shards.compression');
    if (sh.plainSize > v.shardSize) throw bad('shards.plainSize');
  }
  // Every shard but the last is full, so a record's location is a pure function of the index.
  for (let i = 0; i < v.shards.length - 1; i++) {
    if ((v.shards[i] as { plainSize: number }).plainSize !== v.shardSize) throw bad('shards.plainSize');
  }
  const ix = v.index;
  if (!isObject(ix) || !isCount(ix.size) || !isDigest(ix.sha384) || !isCount(ix.chunks) || ix.chunks === 0) {
    throw bad('index');
  }
  const t = v.totals;
  if (!isObject(t) || !isCount(t.records) || !isCount(t.bytes)) throw bad('totals');
  return v as unknown as ShardedManifestDocument;
}

const HEX32 = /^[0-9a-f]{32}$/;

/** The 0.2 fields (§12.6): no shards; the chunk key id, chunking parameters and chunk totals. */
function validateChunked(
  v: Record<string, unknown>,
  bad: (field: string) => ArchiveError,
): ChunkedManifestDocument {
  if ('shards' in v || 'shardSize' in v) throw bad('shards');
  if (typeof v.chunkKey !== 'string' || !HEX32.test(v.chunkKey)) throw bad('chunkKey');
  const c = v.chunking;
  if (!isObject(c) || ![c.minSize, c.avgSize, c.maxSize, c.packSize].every((n) => isCount(n) && n > 0))
    throw bad('chunking');
  const ix = v.index;
  if (!isObject(ix) || !isCount(ix.size) || !isDigest(ix.sha384) || !isCount(ix.chunks) || ix.chunks === 0) {
    throw bad('index');
  }
  const t = v.totals;
  if (
    !isObject(t) ||
    ![t.records, t.bytes, t.chunks, t.newChunks, t.newBytes, t.packs].every(isCount) ||
    (t.newChunks as number) > (t.chunks as number) ||
    (t.newBytes as number) > (t.bytes as number)
  )
    throw bad('totals');
  return v as unknown as ChunkedManifestDocument;
}

export function validateSignature(v: unknown, object: string): SignatureDocument {
  const bad = (field: string) =>
    new ArchiveError('ERR_ARCHIVE_BAD_SIGNATURE', { object, detail: `field ${field}` });
  if (!isObject(v)) throw bad('(root)');
  if (v.format !== SIGNATURE_FORMAT) throw bad('format');
  if (v.context !== MANIFEST_SIGNATURE_CONTEXT) throw bad('context');
  if (!isDigest(v.manifest)) throw bad('manifest');
  if (!isDigest(v.signer)) throw bad('signer');
  if (typeof v.signature !== 'string' || !/^[A-Za-z0-9_-]+$/.test(v.signature)) throw bad('signature');
  return v as unknown as SignatureDocument;
}

/** Parses a canonical JSON document; null when the bytes are not exactly canonical JSON. */
export function parseCanonical(bytes: Uint8Array): unknown {
  let text: string;
  let value: unknown;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return canonicalJson(value) === text ? value : undefined;
}
