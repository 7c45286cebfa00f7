/**
 * The record index of format 0.1 (docs/archive-format.md "Record index"): UTF-8 lines, each one
 * canonical JSON document; the first line is the index header, then one line per record in write
 * order. The lines are cut into chunks of at most 1 MiB (never inside a line), and each chunk is a
 * sealed frame (nonce domain 1) of index.bin.
 */
import { canonicalJson, type Digest } from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import { FORMAT_VERSION, type IndexEntry, type RecordMetadata } from '../types.ts';
import { utf8 } from './bytes.ts';
import { isCount, isDigest, isObject } from './json-checks.ts';

export const INDEX_FORMAT = 'coffer-archive-index';
export const INDEX_CHUNK_BYTES = 1024 * 1024;

export interface EntryFields {
  name: string;
  size: number;
  sha384: Digest;
  shard: number;
  offset: number;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: RecordMetadata;
}

const LONE_SURROGATE = /\p{Cs}/u;

/** JSON text of a string as RFC 8785 writes it (JSON.stringify escaping), or null for a lone surrogate. */
export function jcsString(s: string): string | null {
  return LONE_SURROGATE.test(s) ? null : JSON.stringify(s);
}

/**
 * The canonical (RFC 8785) line of one record. Built directly rather than through the generic
 * canonicalizer because it runs once per record on the writer's hot path (a run of small files
 * spends more time there than hashing them): members in UTF-16 code-unit order, strings with
 * JSON.stringify escaping, numbers with ECMAScript Number-to-String, exactly as RFC 8785
 * specifies. Anything outside that (a lone surrogate, a non-finite or non-scalar metadata value)
 * goes through the generic canonicalizer, which decides. A test checks both agree.
 */
export function entryLine(e: EntryFields): string {
  // The writer keeps every line until `finish`. As built, a line is a rope of the ~20 pieces it was
  // concatenated from (about 1.1 KB of heap for ~300 characters); a copy is one flat string, about
  // 340 bytes, so a run's index lines take a third of the old space and its major collections. V8
  // flattening in place (charCodeAt, indexOf) keeps more than that; a UTF-8 round trip is exact
  // here because every line is well-formed (lone surrogates are escaped, see jcsString).
  return flatLine(fastEntryLine(e) ?? canonicalEntryLine(e));
}

/** A line as one flat string (see entryLine). */
export function flatLine(line: string): string {
  return Buffer.from(line, 'utf8').toString('utf8');
}

/**
 * The members of a record's metadata object in canonical form (without the braces), or null when
 * a key or value is outside what the direct build handles (the generic canonicalizer decides).
 */
export function fastMetadata(metadata: RecordMetadata): string | null {
  const keys = Object.keys(metadata).sort();
  let meta = '';
  for (const k of keys) {
    const v = metadata[k];
    let text: string | null;
    if (typeof v === 'string') text = jcsString(v);
    else if (typeof v === 'number') text = Number.isFinite(v) ? JSON.stringify(v) : null;
    else if (typeof v === 'boolean' || v === null) text = JSON.stringify(v);
    else text = null;
    const key = jcsString(k);
    if (text === null || key === null) return null;
    meta += `${meta === '' ? '' : ','}${key}:${text}`;
  }
  return meta;
}

function fastEntryLine(e: EntryFields): string | null {
  const meta = fastMetadata(e.metadata);
  if (meta === null) return null;
  const binding = jcsString(e.binding);
  const name = jcsString(e.name);
  const namespace = jcsString(e.namespace);
  const sha = jcsString(e.sha384);
  const sourceType = jcsString(e.sourceType);
  if (binding === null || name === null || namespace === null || sha === null || sourceType === null)
    return null;
  if (![e.offset, e.shard, e.size].every(Number.isSafeInteger)) return null;
  return `{"binding":${binding},"metadata":{${meta}},"name":${name},"namespace":${namespace},"offset":${e.offset},"sha384":${sha},"shard":${e.shard},"size":${e.size},"sourceType":${sourceType}}`;
}

/** The same line through the generic RFC 8785 canonicalizer. */
export function canonicalEntryLine(e: EntryFields): string {
  return canonicalJson({
    name: e.name,
    size: e.size,
    sha384: e.sha384,
    shard: e.shard,
    offset: e.offset,
    sourceType: e.sourceType,
    binding: e.binding,
    namespace: e.namespace,
    metadata: e.metadata,
  });
}

export function headerLine(job: string, runId: string, records: number): string {
  return canonicalJson({ format: INDEX_FORMAT, formatVersion: FORMAT_VERSION, job, runId, records });
}

/**
 * Cuts header + entry lines into chunk plaintexts of at most INDEX_CHUNK_BYTES, whole lines only,
 * one at a time (a sealer holds one or two, not the whole index's plaintext at once).
 */
export function* indexChunks(lines: Iterable<string>): Generator<Uint8Array> {
  let parts: string[] = [];
  let bytes = 0;
  for (const line of lines) {
    const n = Buffer.byteLength(line, 'utf8') + 1;
    if (bytes + n > INDEX_CHUNK_BYTES && parts.length > 0) {
      yield utf8(parts.join(''));
      parts = [];
      bytes = 0;
    }
    parts.push(line, '\n');
    bytes += n;
  }
  if (parts.length > 0) yield utf8(parts.join(''));
}

/**
 * The fields 0.1 and 0.2 record lines share (name, size, digest, source fields, metadata), checked;
 * throws `bad(what)`.
 */
export function commonEntryFields(
  value: unknown,
  bad: (what: string) => ArchiveError,
): Record<string, unknown> & {
  name: string;
  size: number;
  sha384: Digest;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: RecordMetadata;
} {
  if (!isObject(value)) throw bad('not an object');
  const { name, size, sha384, sourceType, binding, namespace, metadata } = value;
  if (typeof name !== 'string' || name.length === 0) throw bad('bad name');
  if (!isCount(size)) throw bad('bad size or location');
  if (!isDigest(sha384)) throw bad('bad digest');
  if (typeof sourceType !== 'string' || typeof binding !== 'string' || typeof namespace !== 'string') {
    throw bad('bad source fields');
  }
  if (!isObject(metadata)) throw bad('bad metadata');
  for (const v of Object.values(metadata)) {
    if (v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
      throw bad('bad metadata');
  }
  return value as ReturnType<typeof commonEntryFields>;
}

/** Validates one parsed entry line; throws ERR_ARCHIVE_INDEX_TAMPERED naming the index object. */
export function toEntry(value: unknown, seq: number, object: string): IndexEntry {
  const bad = (what: string) =>
    new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: `record ${seq}: ${what}` });
  const v = commonEntryFields(value, bad);
  if (!isCount(v.shard) || !isCount(v.offset)) throw bad('bad size or location');
  return {
    seq,
    name: v.name,
    size: v.size,
    sha384: v.sha384,
    shard: v.shard,
    offset: v.offset,
    sourceType: v.sourceType,
    binding: v.binding,
    namespace: v.namespace,
    metadata: v.metadata,
  };
}
