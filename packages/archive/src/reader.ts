/**
 * Archive reader (format 0.1; docs/archive-format.md "Read algorithm" is normative).
 *
 * Security-relevant behaviour: the format version is checked before anything else (a reader of
 * 0.1 refuses every other major.minor); the manifest's signature is verified, against a pinned
 * fingerprint or a supplied key when given, before any of its fields is trusted; the signed job
 * and run id must equal the ones in the object path (a manifest replayed under another job fails);
 * every object's SHA-384 is compared with the signed manifest before it is decrypted; a shard's
 * plaintext is released only after its digest and its AEAD tag verified; each record's plaintext
 * SHA-384 is checked as it streams.
 */
import { createHash } from 'node:crypto';
import {
  type Digest,
  fingerprint,
  formatDigest,
  fromBase64Url,
  parseDigest,
  sha384,
  unwrapKey,
  verify,
} from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { baseMapOf, ChunkedRunReader, unwrapChunkKey } from './chunked-reader.ts';
import { ArchiveError } from './errors.ts';
import { BufferPool } from './internal/buffer-pool.ts';
import { bytesEqual, utf8Decode } from './internal/bytes.ts';
import { type FrameCodec, frameCodec, inlineCodec } from './internal/codec-pool.ts';
import { INDEX_FORMAT, toEntry } from './internal/index-codec.ts';
import {
  dataKeyAad,
  isSupportedVersion,
  MANIFEST_MAX_BYTES,
  MANIFEST_SIGNATURE_CONTEXT,
  parseCanonical,
  SIGNATURE_MAX_BYTES,
  validateManifest,
  validateSignature,
} from './internal/manifest.ts';
import { BEGIN, END, type HashDigest, recordHasher } from './internal/record-hash.ts';
import { readRecordsPipelined } from './internal/record-stream.ts';
import { runBinding, runTag } from './internal/run-binding.ts';
import { assertRuntime } from './internal/runtime.ts';
import { FAILURE_DETAIL, ShardSource } from './internal/shard-source.ts';
import { readSignedIndex } from './internal/signed-index.ts';
import { getObject, listObjects } from './internal/store.ts';
import { checkWindowSize, isWindowed, RECORD_WINDOW } from './internal/streamed-index.ts';
import { assertId, isValidId, layout } from './layout.ts';
import type {
  IndexEntry,
  OpenedRun,
  OpenRunOptions,
  ReadManifestOptions,
  RecordRead,
  RecordsReadOptions,
  RunListing,
  VerifiedManifest,
  VerifyChecks,
} from './types.ts';
import { isChunkedManifest, type ShardedManifestDocument } from './types.ts';

const MANIFEST_PATH = /^jobs\/([^/]+)\/runs\/([^/]+)\/manifest\.json$/;

/** Runs (with a manifest) of one job or of every job, sorted by job then run id. Throws ERR_ARCHIVE_DESTINATION. */
export async function listRuns(store: ObjectStore, job?: string): Promise<RunListing[]> {
  if (job !== undefined) assertId('job', job);
  const prefix = job === undefined ? layout.jobsPrefix : `jobs/${job}/runs/`;
  const out: RunListing[] = [];
  for (const o of await listObjects(store, prefix)) {
    const m = MANIFEST_PATH.exec(o.key);
    if (!m || !isValidId(m[1]!) || !isValidId(m[2]!)) continue;
    out.push({
      job: m[1]!,
      runId: m[2]!,
      manifestKey: o.key,
      ...(o.lastModified ? { lastModified: o.lastModified } : {}),
    });
  }
  out.sort((a, b) => (a.job === b.job ? cmp(a.runId, b.runId) : cmp(a.job, b.job)));
  return out;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Job ids that have at least one run manifest, sorted. Throws ERR_ARCHIVE_DESTINATION. */
export async function listJobs(store: ObjectStore): Promise<string[]> {
  return [...new Set((await listRuns(store)).map((r) => r.job))];
}

async function resolveJob(store: ObjectStore, runId: string, job: string | undefined): Promise<string> {
  if (job !== undefined) {
    assertId('job', job);
    return job;
  }
  const jobs = (await listRuns(store)).filter((r) => r.runId === runId).map((r) => r.job);
  if (jobs.length === 0) throw new ArchiveError('ERR_ARCHIVE_NOT_FOUND', { detail: `run ${runId}` });
  if (jobs.length > 1)
    throw new ArchiveError('ERR_ARCHIVE_AMBIGUOUS_RUN', {
      detail: `run ${runId} under jobs ${jobs.join(', ')}`,
    });
  return jobs[0]!;
}

function lenientParse(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(utf8Decode(bytes));
  } catch {
    return undefined;
  }
}

/**
 * Reads and checks a run's manifest without any secret key: format version first
 * (ERR_ARCHIVE_UNSUPPORTED_VERSION), then the signature (ERR_ARCHIVE_SIGNATURE_MISSING,
 * ERR_ARCHIVE_MANIFEST_TAMPERED, ERR_ARCHIVE_BAD_SIGNATURE, ERR_ARCHIVE_SIGNER_NOT_PINNED), then
 * its fields (ERR_ARCHIVE_MANIFEST_MALFORMED), then that the signed job and run id match the path
 * (ERR_ARCHIVE_MANIFEST_REPLAYED). ERR_ARCHIVE_NOT_FOUND when the run has no manifest.
 */
export async function readRunManifest(
  store: ObjectStore,
  options: ReadManifestOptions,
): Promise<VerifiedManifest> {
  assertId('runId', options.runId);
  const runId = options.runId;
  const job = await resolveJob(store, runId, options.job);
  const key = layout.manifest(job, runId);
  const bytes = await getObject(store, key, {
    maxBytes: MANIFEST_MAX_BYTES,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', {
        object: key,
        detail: `larger than the ${MANIFEST_MAX_BYTES >> 20} MiB manifest ceiling`,
      }),
  });
  if (bytes === null) throw new ArchiveError('ERR_ARCHIVE_NOT_FOUND', { object: key });

  // 1. Format version, before anything else: a later format may sign differently.
  const loose = lenientParse(bytes) as { formatVersion?: unknown } | undefined;
  if (
    loose &&
    typeof loose === 'object' &&
    typeof loose.formatVersion === 'string' &&
    !isSupportedVersion(loose.formatVersion)
  ) {
    throw new ArchiveError('ERR_ARCHIVE_UNSUPPORTED_VERSION', {
      object: key,
      detail: `format ${JSON.stringify(loose.formatVersion.slice(0, 32))}; this reader implements 0.1 and 0.2`,
    });
  }

  // 2. Signature envelope.
  const sigKey = layout.signature(job, runId);
  const sigBytes = await getObject(store, sigKey, {
    maxBytes: SIGNATURE_MAX_BYTES,
    tooLarge: () =>
      new ArchiveError('ERR_ARCHIVE_BAD_SIGNATURE', {
        object: sigKey,
        detail: `larger than the ${SIGNATURE_MAX_BYTES >> 10} KiB signature ceiling`,
      }),
  });
  if (sigBytes === null) throw new ArchiveError('ERR_ARCHIVE_SIGNATURE_MISSING', { object: sigKey });
  const sigDoc = validateSignature(parseCanonical(sigBytes), sigKey);
  if (!isSupportedVersion(sigDoc.formatVersion)) {
    throw new ArchiveError('ERR_ARCHIVE_UNSUPPORTED_VERSION', { object: sigKey });
  }
  const digest = formatDigest(sha384(bytes));
  if (digest !== sigDoc.manifest) {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_TAMPERED', {
      object: key,
      detail: 'bytes differ from the signed digest',
    });
  }
  const parsed = parseCanonical(bytes);
  if (parsed === undefined) {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', { object: key, detail: 'not canonical JSON' });
  }
  const signerField = (parsed as { signer?: { fingerprint?: unknown; publicKey?: unknown } }).signer;
  let embedded: Uint8Array;
  try {
    embedded = fromBase64Url(String(signerField?.publicKey ?? ''));
    if (fingerprint(embedded) !== signerField?.fingerprint) throw new Error('fingerprint');
  } catch {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_MALFORMED', { object: key, detail: 'field signer' });
  }
  const signer = fingerprint(embedded);
  if (sigDoc.signer !== signer) {
    throw new ArchiveError('ERR_ARCHIVE_BAD_SIGNATURE', {
      object: sigKey,
      detail: 'signer differs from the manifest',
    });
  }

  // 3. Pinning: the signer must be the one the caller trusts, when it names one.
  let pinned = false;
  if (options.signerPublicKey !== undefined) {
    let trusted: Digest;
    try {
      trusted = fingerprint(options.signerPublicKey);
    } catch (e) {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
        detail: 'malformed signerPublicKey',
        cause: e,
      });
    }
    if (trusted !== signer) {
      throw new ArchiveError('ERR_ARCHIVE_SIGNER_NOT_PINNED', { object: key, detail: `signed by ${signer}` });
    }
    pinned = true;
  }
  if (options.pinSigner !== undefined) {
    const pin = options.pinSigner.trim().toLowerCase();
    if (!/^sha384:[0-9a-f]{96}$/.test(pin)) {
      throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
        detail: 'pinSigner must be sha384:<96 hex digits>',
      });
    }
    if (pin !== signer) {
      throw new ArchiveError('ERR_ARCHIVE_SIGNER_NOT_PINNED', {
        object: key,
        detail: `signed by ${signer}, pinned ${pin}`,
      });
    }
    pinned = true;
  }

  // 4. The hybrid signature (both halves must verify).
  let ok = false;
  try {
    ok = verify(embedded, bytes, fromBase64Url(sigDoc.signature), MANIFEST_SIGNATURE_CONTEXT);
  } catch {
    ok = false;
  }
  if (!ok) throw new ArchiveError('ERR_ARCHIVE_BAD_SIGNATURE', { object: sigKey });

  // 5. Fields, then location: the signed ids must be the ones in the path.
  const document = validateManifest(parsed, key);
  if (!isSupportedVersion(document.formatVersion))
    throw new ArchiveError('ERR_ARCHIVE_UNSUPPORTED_VERSION', { object: key });
  if (document.job !== job || document.runId !== runId) {
    throw new ArchiveError('ERR_ARCHIVE_MANIFEST_REPLAYED', {
      object: key,
      detail: `signed for ${document.job}/${document.runId}`,
    });
  }
  return { key, document, digest, signer, signerPinned: pinned };
}

class RunReader implements OpenedRun {
  readonly manifest: VerifiedManifest;
  readonly shards: ShardSource;
  private readonly store: ObjectStore;
  private readonly key: Uint8Array;
  private indexBytes: Uint8Array | null = null;

  /** The 0.1 manifest (openVerified hands 0.2 runs to ChunkedRunReader). */
  private readonly doc: ShardedManifestDocument;

  constructor(store: ObjectStore, manifest: VerifiedManifest, key: Uint8Array, codec: FrameCodec) {
    this.store = store;
    this.manifest = manifest;
    this.key = key;
    this.doc = manifest.document as ShardedManifestDocument;
    this.shards = new ShardSource(store, this.doc, key, codec);
  }

  private async loadIndex(): Promise<Uint8Array> {
    if (this.indexBytes) return this.indexBytes;
    this.indexBytes = await readSignedIndex(this.store, this.doc);
    return this.indexBytes;
  }

  async *records(): AsyncIterable<IndexEntry> {
    const doc = this.doc;
    const object = layout.index(doc.job, doc.runId);
    const bytes = await this.loadIndex();
    const tampered = (detail: string) => new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail });
    const inconsistent = (detail: string) =>
      new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', { object, detail });
    const binding = runBinding(doc.job, doc.runId);
    const tag = runTag(doc.job, doc.runId);
    let pos = 0;
    let seq = -1; // -1: the header line comes first
    let shard = 0;
    let offset = 0;
    let total = 0;
    for (let chunk = 0; chunk < doc.index.chunks; chunk++) {
      if (pos + 48 > bytes.length) throw tampered('truncated');
      const stored = new DataView(bytes.buffer, bytes.byteOffset + pos, 32).getUint32(16, false);
      const end = pos + 32 + stored + 16;
      if (end > bytes.length) throw tampered('truncated');
      const r = await inlineCodec.open({
        domain: 1,
        seq: chunk,
        final: chunk === doc.index.chunks - 1,
        frame: bytes.subarray(pos, end),
        key: this.key,
        binding,
        runTag: tag,
        digest: null,
        plainLength: null,
        out: null,
      });
      if (!r.ok) throw tampered(`chunk ${chunk}: ${FAILURE_DETAIL[r.failure]}`);
      pos = end;
      let text: string;
      try {
        text = utf8Decode(r.plain);
      } catch {
        throw tampered(`chunk ${chunk}: not UTF-8`);
      }
      if (!text.endsWith('\n')) throw tampered(`chunk ${chunk}: not whole lines`);
      // Lines are cut one at a time (not split into an array up front): an array of a chunk's
      // thousands of lines would stay alive across every await below.
      for (let at = 0; at < text.length; ) {
        const nl = text.indexOf('\n', at);
        const line = text.slice(at, nl);
        at = nl + 1;
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          throw tampered(`record ${seq}: not JSON`);
        }
        if (seq === -1) {
          const h = value as Record<string, unknown>;
          if (
            h?.format !== INDEX_FORMAT ||
            h.job !== doc.job ||
            h.runId !== doc.runId ||
            h.records !== doc.totals.records
          ) {
            throw inconsistent('index header does not match the manifest');
          }
          seq = 0;
          continue;
        }
        const e = toEntry(value, seq, object);
        // Records are packed back to back: each starts where the previous one ended.
        while (shard < doc.shards.length - 1 && offset === doc.shards[shard]!.plainSize) {
          shard++;
          offset = 0;
        }
        if (e.shard !== shard || e.offset !== offset)
          throw inconsistent(`record ${seq} is not where the previous one ended`);
        let left = e.size;
        while (left > 0) {
          const s = doc.shards[shard];
          if (s === undefined) throw inconsistent(`record ${seq} runs past the last shard`);
          const take = Math.min(left, s.plainSize - offset);
          left -= take;
          offset += take;
          if (left > 0) {
            shard++;
            offset = 0;
          }
        }
        total += e.size;
        seq++;
        yield e;
      }
    }
    if (pos !== bytes.length) throw tampered('trailing bytes');
    if (seq !== doc.totals.records || total !== doc.totals.bytes)
      throw inconsistent('record count or byte total differs from the manifest');
  }

  /**
   * Reads the whole run back and checks every shard (digest, tag, lengths) and every record's
   * plaintext SHA-384, in a pipeline: shards are fetched and opened on the codec workers a few
   * ahead, into a fixed pool of shared buffers, while the record-hash thread hashes the records of
   * the shards already open (one batched request per shard, whatever the record count). Failures
   * are reported in stream order, as reading the records one by one would: a record that fails in
   * shard i is reported before a fault in shard i + 1. Memory: `ahead + 1` shard buffers.
   */
  async verifyAll(checks: VerifyChecks): Promise<void> {
    const doc = this.doc;
    const shards = this.shards;
    const n = doc.shards.length;
    const ahead = shards.codec.parallel + 1;
    const hasher = recordHasher(shards.codec !== inlineCodec);
    // `ahead` shards opening plus two being hashed; acquisition is FIFO, so the oldest shard always
    // gets the next free buffer and the pipeline cannot deadlock.
    const pool = new BufferPool({ size: doc.shardSize + 48, count: ahead + 2, shared: hasher.offThread });
    const records = this.records()[Symbol.asyncIterator]();
    let pendingEntry: IndexEntry | null = null;
    const nextEntry = async (): Promise<IndexEntry | null> => {
      if (pendingEntry !== null) {
        const e = pendingEntry;
        pendingEntry = null;
        return e;
      }
      const step = await records.next();
      return step.done ? null : step.value;
    };
    // Shards being fetched and opened, in order; each holds one pool buffer once it has it.
    const opening: { index: number; buf: Promise<Uint8Array>; plain: Promise<Uint8Array> }[] = [];
    let nextOpen = 0;
    const startOpen = () => {
      const index = nextOpen++;
      const buf = pool.acquire();
      const plain = buf.then((b) => shards.openInto(index, b));
      plain.catch(() => undefined);
      opening.push({ index, buf, plain });
    };
    // Hash requests in flight, in order, with what to check when each settles.
    const hashing: { done: Promise<HashDigest[]>; buf: Uint8Array; ends: Map<number, IndexEntry> }[] = [];
    const settleHash = async () => {
      const h = hashing.shift()!;
      let replies: HashDigest[];
      try {
        replies = await h.done;
      } finally {
        pool.release(h.buf);
      }
      for (const r of replies) {
        const entry = h.ends.get(r.key)!;
        if (!bytesEqual(r.digest, parseDigest(entry.sha384))) {
          throw new ArchiveError('ERR_ARCHIVE_RECORD_TAMPERED', {
            object: layout.shard(doc.job, doc.runId, entry.shard),
            detail: `record ${entry.seq}`,
          });
        }
        checks.records++;
        checks.bytes += entry.size;
      }
    };
    // The record spanning into the next shard, with how many of its bytes are still to come.
    let spanning: { entry: IndexEntry; key: number; left: number } | null = null;
    const open: number[] = [];
    try {
      // The index first (its digest, then its first record), as reading record by record would.
      const first = await records.next();
      if (!first.done) pendingEntry = first.value;
      while (nextOpen < n && nextOpen < ahead) startOpen();
      for (let i = 0; i < n; i++) {
        const o = opening.shift()!;
        let plain: Uint8Array;
        try {
          plain = await o.plain;
        } catch (e) {
          // Earlier records' verdicts come first.
          while (hashing.length > 0) await settleHash();
          throw e;
        } finally {
          if (nextOpen < n) startOpen();
        }
        shards.markVerified(i);
        const size = plain.length;
        const ops: number[] = [];
        const ends = new Map<number, IndexEntry>();
        if (spanning !== null) {
          const take = Math.min(spanning.left, size);
          spanning.left -= take;
          const done = spanning.left === 0;
          ops.push(spanning.key, 0, take, done ? END : 0);
          if (done) {
            ends.set(spanning.key, spanning.entry);
            open.splice(open.indexOf(spanning.key), 1);
            spanning = null;
          }
        }
        while (spanning === null) {
          const e = await nextEntry();
          if (e === null) break;
          if (e.shard !== i || e.offset > size) {
            pendingEntry = e;
            break;
          }
          // records() has checked that entries are packed back to back from (0, 0).
          const key = hasher.newKey();
          const take = Math.min(e.size, size - e.offset);
          const done = take === e.size;
          ops.push(key, e.offset, e.offset + take, BEGIN | (done ? END : 0));
          if (done) ends.set(key, e);
          else {
            open.push(key);
            spanning = { entry: e, key, left: e.size - take };
          }
        }
        hashing.push({ done: hasher.run(plain, ops), buf: await o.buf, ends });
        hashing.at(-1)!.done.catch(() => undefined);
        // Keep at most two hash requests queued: the thread stays busy, buffers keep moving.
        while (hashing.length > 2) await settleHash();
      }
      while (hashing.length > 0) await settleHash();
      if (spanning !== null || (await nextEntry()) !== null) {
        throw new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
          object: layout.index(doc.job, doc.runId),
          detail: 'records run past the last shard',
        });
      }
    } finally {
      hasher.forget(open);
      // Let everything started settle (hash requests first: they hold buffers the fetches wait
      // for), so no buffer is read or written after this returns.
      for (const h of hashing) {
        await h.done.catch(() => undefined);
        pool.release(h.buf);
      }
      await Promise.allSettled(opening.map((o) => o.plain));
      for (const o of opening) pool.release(await o.buf);
      pool.dispose();
      await records.return?.(undefined);
    }
  }

  async *recordWindows(size = RECORD_WINDOW): AsyncIterable<readonly IndexEntry[]> {
    checkWindowSize(size);
    // A 0.1 index is read whole (records() parses it from the held bytes): windows of it.
    let window: IndexEntry[] = [];
    for await (const e of this.records()) {
      window.push(e);
      if (window.length === size) {
        yield window;
        window = [];
      }
    }
    if (window.length > 0) yield window;
  }

  readRecords(
    entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
    options?: RecordsReadOptions,
  ): AsyncIterable<RecordRead> {
    if (isWindowed(entries)) return this.readGathered(entries, options);
    return readRecordsPipelined(this.doc, this.shards, entries, options);
  }

  /** readRecords of windows: a 0.1 reader gathers them first (its index is held anyway). */
  private async *readGathered(
    windows: AsyncIterable<readonly IndexEntry[]>,
    options?: RecordsReadOptions,
  ): AsyncIterable<RecordRead> {
    const all: IndexEntry[] = [];
    for await (const w of windows) for (const e of w) all.push(e);
    yield* readRecordsPipelined(this.doc, this.shards, all, options);
  }

  async *readRecord(entry: IndexEntry): AsyncIterable<Uint8Array> {
    const doc = this.doc;
    const hash = createHash('sha384');
    let left = entry.size;
    let shard = entry.shard;
    let offset = entry.offset;
    while (left > 0) {
      if (shard >= doc.shards.length) {
        throw new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
          object: layout.index(doc.job, doc.runId),
          detail: `record ${entry.seq}`,
        });
      }
      const plain = await this.shards.get(shard);
      if (offset > plain.length) {
        throw new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
          object: layout.index(doc.job, doc.runId),
          detail: `record ${entry.seq}`,
        });
      }
      const take = Math.min(left, plain.length - offset);
      const piece = plain.subarray(offset, offset + take);
      hash.update(piece);
      left -= take;
      shard++;
      offset = 0;
      if (take > 0) yield piece;
    }
    if (formatDigest(hash.digest()) !== entry.sha384) {
      throw new ArchiveError('ERR_ARCHIVE_RECORD_TAMPERED', {
        object: layout.shard(doc.job, doc.runId, entry.shard),
        detail: `record ${entry.seq}`,
      });
    }
  }
}

/** Unwraps the data key of a verified manifest. */
export async function openVerified(
  store: ObjectStore,
  manifest: VerifiedManifest,
  secretKey: Uint8Array,
  workers?: number,
): Promise<RunReader | ChunkedRunReader> {
  if (!(secretKey instanceof Uint8Array))
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'secretKey must be a Uint8Array' });
  if (isChunkedManifest(manifest.document)) {
    const keys = await unwrapChunkKey(manifest.document, manifest.key, secretKey);
    return new ChunkedRunReader(store, manifest, keys, workers);
  }
  const doc = manifest.document;
  let key: Uint8Array;
  try {
    key = new Uint8Array(await unwrapKey(secretKey, doc.recipients, dataKeyAad(doc.job, doc.runId)));
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ERR_CRYPTO_WRONG_KEY') {
      throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', {
        object: manifest.key,
        detail: 'no wrapped data key for this secret key',
      });
    }
    if (code === 'ERR_CRYPTO_TAMPERED') {
      throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', {
        object: manifest.key,
        detail: 'wrapped data key does not open with this secret key',
      });
    }
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', { detail: 'malformed secret key', cause: e });
  }
  if (key.length !== 32)
    throw new ArchiveError('ERR_ARCHIVE_WRONG_KEY', {
      object: manifest.key,
      detail: 'data key has the wrong length',
    });
  return new RunReader(store, manifest, key, frameCodec(workers));
}

/**
 * Opens a run for reading: `readRunManifest` (all of its errors), then unwraps the data key with
 * the operational or break-glass secret key (ERR_ARCHIVE_WRONG_KEY; ERR_ARCHIVE_INVALID_ARGUMENT
 * for a malformed key).
 */
export async function openRun(store: ObjectStore, options: OpenRunOptions): Promise<OpenedRun> {
  assertRuntime();
  const known = options.knownRecords;
  if (known !== undefined && !(known?.lines instanceof Map && known.records instanceof Map)) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'knownRecords must have lines and records maps',
    });
  }
  const manifest = await readRunManifest(store, options);
  const run = await openVerified(store, manifest, options.secretKey, options.workers);
  // A base of this job and key also lends its chunk map, read-only (types.ts OpenRunOptions.knownRecords).
  if (known !== undefined && run instanceof ChunkedRunReader) {
    run.known = { lines: known.lines, records: known.records };
    run.lentMap = baseMapOf(known, manifest.document.job, run.keys.keyId);
  }
  return run;
}

/**
 * True when `run` (format 0.2, from `openRun`) may read its records again without being opened
 * anew: the chunk map it loaded (a `verifyRun` with `opened`, or an earlier read) is still exactly
 * the job's pack indexes, so no prune or repack moved a chunk since. One listing of the store;
 * every record read afterwards still fetches and checks its packs. False for a 0.1 run, a run
 * whose chunk map is not loaded, or one that had to scan packs no index described. Throws the
 * store's errors (ERR_ARCHIVE_DESTINATION).
 */
export async function isOpenedRunCurrent(run: OpenedRun): Promise<boolean> {
  return run instanceof ChunkedRunReader && (await run.isCurrent());
}

export type { RunReader };
