/**
 * Read-back verification of a whole run (format 0.1): the engine's proof that a sealed run can be
 * recovered, and `coffer-recover verify`.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { baseOf } from './chunked-base.ts';
import { baseMapOf, ChunkedRunReader } from './chunked-reader.ts';
import { ArchiveError } from './errors.ts';
import { assertRuntime } from './internal/runtime.ts';
import { openVerified, readRunManifest } from './reader.ts';
import type {
  ShardedManifestDocument,
  VerifiedManifest,
  VerifyChecks,
  VerifyRunOptions,
  VerifyVerdict,
} from './types.ts';

/**
 * Reads the whole run back and checks everything: format version, signature (and pin), key
 * unwrap, the index digest and its consistency with the shard list, every shard's digest and AEAD
 * tag, and every record's plaintext SHA-384. Never throws for an archive or store fault: returns
 * `{ ok: false, failure: { code, reason, object, message } }` for the first failing object. Throws
 * only ERR_ARCHIVE_INVALID_ARGUMENT for bad options (malformed key, bad id).
 */
export async function verifyRun(store: ObjectStore, options: VerifyRunOptions): Promise<VerifyVerdict> {
  const checks: VerifyChecks = {
    formatVersion: false,
    signature: false,
    signerPinned: false,
    keyUnwrapped: false,
    index: false,
    shards: 0,
    records: 0,
    bytes: 0,
  };
  let job: string | null = options.job ?? null;
  try {
    assertRuntime();
    // Read and checked with this call's signer options even for an `opened` run, which must then
    // be the run this manifest names (its index is what is reused, not its signer checks).
    const manifest = await readRunManifest(store, options);
    const opened = reusable(options, manifest);
    job = manifest.document.job;
    checks.formatVersion = true;
    checks.signature = true;
    checks.signerPinned = manifest.signerPinned;
    const run = opened ?? (await openVerified(store, manifest, options.secretKey, options.workers));
    checks.keyUnwrapped = true;
    if (run instanceof ChunkedRunReader) {
      // Only for an index not loaded yet (an `opened` run may have loaded its own).
      if (options.knownRecords !== undefined) {
        run.known = options.knownRecords;
        // A base of this job and key (the one the run was written on) also lends its chunk map:
        // only the pack indexes stored since it loaded are read.
        run.knownMap = baseMapOf(options.knownRecords, job, run.keys.keyId);
      }
      // A base keeps the index's lines (a run opened before without them yields no base).
      if (options.keepBase === true) run.keepLines = true;
      // 0.2: every record's chunks (pack digest, tag, chunk id) and plaintext, and the pack references.
      await run.verifyAll(checks, options.onProgress, options.newPacks);
      const kept = options.keepBase === true ? await run.loaded() : null;
      const base = kept === null ? null : baseOf(job, options.runId, run.keys, kept.index, kept.map);
      return { ok: true, job, runId: options.runId, checks, ...(base === null ? {} : { base }) };
    }
    const doc = run.manifest.document as ShardedManifestDocument;
    let bytesDone = 0;
    run.shards.onVerified = (_i, plainSize) => {
      checks.shards++;
      bytesDone += plainSize;
      options.onProgress?.({
        shardsDone: checks.shards,
        shards: doc.shards.length,
        bytesDone,
        bytes: doc.totals.bytes,
      });
    };
    // Every shard (including an empty final one) and every record, pipelined across threads.
    await run.verifyAll(checks);
    checks.index = true;
    return { ok: true, job, runId: options.runId, checks };
  } catch (e) {
    if (e instanceof ArchiveError) {
      if (e.code === 'ERR_ARCHIVE_INVALID_ARGUMENT') throw e;
      return {
        ok: false,
        job,
        runId: options.runId,
        checks,
        failure: { code: e.code, reason: e.reason, object: e.object ?? null, message: e.message },
      };
    }
    const internal = new ArchiveError('ERR_ARCHIVE_INTERNAL', { cause: e });
    return {
      ok: false,
      job,
      runId: options.runId,
      checks,
      failure: { code: internal.code, reason: internal.reason, object: null, message: internal.message },
    };
  }
}

/**
 * `options.opened` when it is a 0.2 reader opened on `manifest` (the same object key and digest);
 * null (open the run again) for a 0.1 reader or none.
 */
function reusable(options: VerifyRunOptions, manifest: VerifiedManifest): ChunkedRunReader | null {
  const run = options.opened;
  if (!(run instanceof ChunkedRunReader)) return null;
  if (run.manifest.key !== manifest.key || run.manifest.digest !== manifest.digest) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: '`opened` is not the run named by `job` and `runId`',
    });
  }
  return run;
}
