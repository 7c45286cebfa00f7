/**
 * The apply: phases 3 and 4 of the specification's apply gate order (docs/restore.md "Apply
 * algorithm" is normative; the engine runs gates 1 and 2, capability and approval, before calling).
 *
 * Security-relevant behaviour:
 * - Phase one reads every in-scope record and checks its plaintext SHA-384 (and every shard's
 *   digest and AEAD tag) before anything is written; one failure aborts with zero records written.
 * - Phase two re-reads each record from the store right before its write (every pack fetched
 *   and checked again; the index is the one verified when the plan opened the run, unless a prune
 *   changed the job's pack indexes since, when the run is opened afresh), stages it (memory, or a
 *   0600 file in a private 0700 directory) while the reader verifies it, and hands the connector
 *   only bytes whose digest matched: unverified bytes are never written. In a 0.2 run that digest
 *   is each chunk's keyed id (HMAC-SHA-256, signed in the index): the ids name exactly the bytes
 *   whose SHA-384 phase one checked, so the record's SHA-384 is not computed again. The one
 *   exception, a files target's 0.2 record over PART_BYTES, streams in parts (each chunk checked
 *   against its keyed id) into the files writer's 0600 temporary file, put in place only after
 *   every chunk of the record matched and removed when one does not: it never appears under its
 *   name unverified.
 *   A record that fails re-verification stops the apply (`aborted`; what was written stays).
 * - `onExisting: skip` asks the target just before each write; a failed check records a failure
 *   and writes nothing. A Redis target writes without REPLACE so a key created meanwhile is kept.
 * - A cancel (AbortSignal) stops further writes; records already written stay (no rollback).
 * - Resumable: names in `completed` (written by an earlier attempt of the same plan) are not
 *   written again; each record's write is idempotent for the same bytes.
 */
import { tmpdir } from 'node:os';
import {
  type IndexEntry,
  isArchiveError,
  isChunkedManifest,
  isOpenedRunCurrent,
  type OpenedRun,
  openRun,
  stopIdleWorkers,
  verifyRun,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import { isSourceError, openSource, removeCutWrites, type SourceConnector } from '@coffer/sources';
import { codeOf, RestoreError } from './errors.ts';
import { type FedRecord, FileStager, feedRecords, MEMORY_STAGE } from './internal/record-feed.ts';
import { PART_BYTES, verifyRecords } from './internal/verify-records.ts';
import { type ComputedPlan, computePlan, preparedPlan } from './plan.ts';
import type { ApplyOptions, ApplyProgress, ApplyReceipt, RecordOutcome, SkippedEntry } from './types.ts';

/** The specification's in-account apply limits, used in Coffer as progress batch sizes (not caps). */
export const APPLY_BATCH_SKIP = 160;
export const APPLY_BATCH = 200;
/**
 * Phase two stages records one by one in archive order (so the reader decrypts each shard once)
 * and writes up to this many staged records concurrently: a files target spends most of a small
 * record's time waiting on filesystem calls, which overlap well. Bounded in bytes as well.
 */
const WRITE_CONCURRENCY = 8;
/**
 * Why 32 MiB, not more: a record in flight holds the reader's pack buffers its pieces lie in
 * (about 10 MiB each) until its write settles, and big records are where that adds up. At 96 MiB
 * three 25 MiB files were written at once behind the reader, and phase two of a 1 GiB restore
 * held 8 pack buffers (82 MiB) against phase one's 5-6; at 32 MiB (one such file and small ones
 * beside it) it held 6, with the same CPU time. Writing big files side by side gains little: each
 * is a sequential write into the page cache.
 */
const WRITE_BUDGET_BYTES = 32 * 1024 * 1024;
const SKIPPED_MAX = 1000;
const FAILED_MAX = 1000;

const WRITE_REASONS: Record<string, string> = {
  ERR_SOURCE_TARGET_EXISTS: 'exists in the target',
  ERR_SOURCE_UNSAFE_NAME: 'unsafe name (would write outside the target)',
  ERR_SOURCE_INVALID_RECORD: 'record not accepted by the target',
  ERR_SOURCE_UNSAFE_STATEMENT: 'schema statement refused (not the CREATE its entry stands for)',
  ERR_SOURCE_WRITE: 'write failed',
  ERR_SOURCE_BINDING: 'target unreachable',
  ERR_SOURCE_RESOURCE_MISSING: 'target resource missing',
  ERR_SOURCE_THROTTLED: 'target throttled the write',
};

/**
 * Applies a restore. Uses `options.prepared` (a plan from `planFromIndex` for the same options)
 * or else computes the plan (index only) and refuses when it cannot be made
 * (ERR_RESTORE_PLAN_UNAVAILABLE) or differs from `request.planHash` (ERR_RESTORE_PLAN_CHANGED);
 * then phase one (verify all, write nothing) and phase two (re-verify and write each record).
 * Returns the receipt; never throws for a record's failure (the receipt lists it). Throws the
 * request-class RestoreErrors of `planRestore`.
 */
export async function applyRestore(options: ApplyOptions): Promise<ApplyReceipt> {
  const now = options.now ?? (() => new Date());
  const startedAt = now().toISOString();
  // A plan the caller already computed (and gated) with `planFromIndex` is written as it is.
  let computed: ComputedPlan;
  if (options.prepared === undefined) computed = await computePlan(options, false, false);
  else {
    const known = preparedPlan(options.prepared);
    if (known === undefined)
      throw new RestoreError(
        'ERR_RESTORE_INTERNAL',
        'applyRestore: `prepared` must be a plan returned by planFromIndex',
      );
    computed = known;
  }
  const { plan, ctx } = computed;
  if (!plan.ok || ctx === undefined)
    throw new RestoreError(
      'ERR_RESTORE_PLAN_UNAVAILABLE',
      `restore cannot be applied: ${plan.reason ?? 'no plan'}`,
    );
  const planHash = plan.planHash!;
  if (options.request.planHash !== undefined && options.request.planHash !== planHash)
    throw new RestoreError(
      'ERR_RESTORE_PLAN_CHANGED',
      'the restore plan changed since it was reviewed: run the dry run again',
      {
        planHash,
      },
    );

  const skipMode = options.request.onExisting === 'skip';
  const batch = Math.max(1, options.batchSize ?? (skipMode ? APPLY_BATCH_SKIP : APPLY_BATCH));
  const records = ctx.records;
  const completed = new Set(options.completed ?? []);
  const receipt: ApplyReceipt = {
    kind: 'coffer-restore-receipt',
    v: 1,
    runId: ctx.manifest.document.runId,
    job: ctx.manifest.document.job,
    planHash,
    target: ctx.resolved.target,
    status: 'succeeded',
    recordsVerified: 0,
    plannedWrites: records.length,
    written: 0,
    skipped: [],
    skippedCount: 0,
    failed: [],
    failedCount: 0,
    alreadyDone: 0,
    bytes: 0,
    startedAt,
    finishedAt: startedAt,
    cancelled: false,
  };
  const progress = (phase: ApplyProgress['phase'], done: number) =>
    options.onProgress?.({
      phase,
      done,
      total: records.length,
      written: receipt.written,
      skipped: receipt.skippedCount,
      failed: receipt.failedCount,
      bytes: receipt.bytes,
    });
  const finish = (): ApplyReceipt => {
    receipt.finishedAt = now().toISOString();
    return receipt;
  };
  const cancelled = () => options.signal?.aborted === true;

  // Phase one: read-only verification of every in-scope record. A plan that covers the whole run
  // uses the archive's pipelined verifier (shards opened ahead on the codec workers, record hashes
  // on their own thread): the same checks, on every record, at several times the speed.
  if (records.length > 0 && records.length === ctx.manifest.document.totals.records) {
    const verdict = await verifyRun(ctx.store, {
      job: receipt.job,
      runId: receipt.runId,
      // The plan's reader (0.2): its index is not opened and held a second time; every pack is
      // still read from the store and checked.
      opened: ctx.run,
      secretKey: options.operationalSecretKey!,
      ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
      onProgress: (p) => {
        if (p.bytes > 0) progress('verify', Math.floor((records.length * p.bytesDone) / p.bytes));
      },
    });
    if (!verdict.ok || verdict.checks.records !== records.length) {
      receipt.status = 'aborted';
      receipt.failure = {
        phase: 'verify',
        code: verdict.failure?.code ?? 'ERR_ARCHIVE_INDEX_INCONSISTENT',
        reason: verdict.failure?.reason ?? 'record count differs from the plan',
      };
      return finish();
    }
    receipt.recordsVerified = records.length;
    if (cancelled()) {
      receipt.status = 'cancelled';
      receipt.cancelled = true;
      return finish();
    }
  }
  // A plan of part of the run: its records through the pipelined reader (verifyRecords).
  const part = await verifyRecords(ctx.run, records, receipt.recordsVerified, {
    cancelled,
    onVerified: (done) => {
      if (done % batch === 0) progress('verify', done);
    },
  });
  receipt.recordsVerified = part.verified;
  if (part.error !== undefined) {
    const err = part.error;
    receipt.status = 'aborted';
    receipt.failure = {
      phase: 'verify',
      code: codeOf(err),
      reason: isArchiveError(err) ? err.reason : 'record could not be read back',
      record: records[part.verified]!.name,
    };
    return finish();
  }
  if (part.stopped || cancelled()) {
    receipt.status = 'cancelled';
    receipt.cancelled = true;
    return finish();
  }
  progress('verify', records.length);
  // Phase two of a 0.2 run hashes no record (`checkRecordDigest: false` below), so the record-hash
  // thread phase one kept busy would sit idle through it, holding a V8 heap of its own: the idle
  // threads are handed back now (@coffer/archive `stopIdleWorkers`: a thread with work in flight
  // for anything else keeps running; the codec worker phase two needs starts again in tens of
  // milliseconds). Measured on a 1 GiB restore, four each, interleaved: peak RSS 279-286 against
  // 293-298 MiB, phase two as fast (3.3-3.8 s either way, targets on tmpfs).
  if (isChunkedManifest(ctx.manifest.document)) stopIdleWorkers();

  // Phase two: every byte is read from the store again and re-verified. Through the plan's reader
  // (its index checked when it opened) while its chunk map still describes the store; after a
  // prune or repack, for a 0.1 run, or when the listing fails: a fresh reader.
  let run: OpenedRun;
  try {
    run = (await isOpenedRunCurrent(ctx.run).catch(() => false))
      ? ctx.run
      : await reopen(ctx.store, receipt.job, receipt.runId, options);
    if (run.manifest.digest !== ctx.manifest.digest)
      throw new RestoreError('ERR_RESTORE_PLAN_CHANGED', 'manifest changed');
  } catch (err) {
    receipt.status = 'aborted';
    receipt.failure = {
      phase: 'write',
      code: codeOf(err),
      reason: 'run could not be opened again for the writes',
    };
    return finish();
  }
  // `onExisting: skip` also holds when a name appears between the existence check and the write:
  // these connectors then refuse the write (ERR_SOURCE_TARGET_EXISTS) instead of replacing.
  const config =
    ctx.resolved.config.type === 'redis' || ctx.resolved.config.type === 'files'
      ? { ...ctx.resolved.config, replace: !skipMode }
      : ctx.resolved.config;
  if (options.resuming === true && config.type === 'files') {
    const since = options.firstStartedAt === undefined ? Number.NaN : Date.parse(options.firstStartedAt);
    await removeCutWrites(
      config.root,
      records.filter((r) => !completed.has(r.name)).map((r) => r.name),
      // A second of slack: the row's time and the file system's may round differently.
      Number.isNaN(since) ? {} : { since: since - 1000 },
    ).catch(() => undefined);
  }
  const stager = new FileStager(options.stagingDir ?? tmpdir());
  let connector: SourceConnector | null = null;
  const skipped = (name: string, reason: string) => {
    receipt.skippedCount++;
    if (receipt.skipped.length < SKIPPED_MAX) receipt.skipped.push({ name, reason });
  };
  const failed = (name: string, reason: string, code: string) => {
    receipt.failedCount++;
    if (receipt.failed.length < FAILED_MAX) receipt.failed.push({ name, reason, code });
  };
  const report = async (o: RecordOutcome) => {
    try {
      await options.onRecord?.(o);
    } catch {
      // The caller's bookkeeping failing must not stop or undo writes.
    }
  };
  try {
    try {
      connector = openSource(config);
    } catch (err) {
      receipt.status = 'aborted';
      receipt.failure = {
        phase: 'write',
        code: codeOf(err),
        reason: 'the restore target could not be opened',
      };
      return finish();
    }
    // Writes in flight (sqlite: one at a time, its schema record must land before the tables).
    const concurrency =
      config.type === 'sqlite' ? 1 : Math.max(1, options.writeConcurrency ?? WRITE_CONCURRENCY);
    const inFlight = new Set<Promise<void>>();
    let inFlightBytes = 0;
    const target = connector;
    const writeOne = async (rec: FedRecord): Promise<void> => {
      const e = rec.entry;
      try {
        const r = await target.write(e.name, rec.body(), { ...e.metadata });
        if (r.written) {
          receipt.written++;
          receipt.bytes += e.size;
          await report({ name: e.name, outcome: 'written', bytes: e.size });
        } else {
          const reason = r.reason === 'expired' ? 'expired before the apply (not written)' : r.reason;
          skipped(e.name, reason);
          await report({ name: e.name, outcome: 'skipped', reason });
        }
      } catch (err) {
        // A record streamed in parts that failed re-verification: the files writer removed its
        // temporary file, and the apply aborts naming it (below), not as a write failure.
        if (isArchiveError(err)) return;
        const code = codeOf(err);
        if (skipMode && isSourceError(err) && code === 'ERR_SOURCE_TARGET_EXISTS') {
          skipped(e.name, 'exists in the target (onExisting: skip)');
          await report({
            name: e.name,
            outcome: 'skipped',
            reason: 'exists in the target (onExisting: skip)',
          });
        } else {
          const reason = WRITE_REASONS[code] ?? 'write failed';
          failed(e.name, reason, code);
          await report({ name: e.name, outcome: 'failed', reason, code });
        }
      } finally {
        await rec.release();
      }
    };
    /** `onExisting: skip`: true when the record must not be written (reported here). */
    const skipExisting = async (e: IndexEntry): Promise<boolean> => {
      let exists: boolean;
      try {
        exists = await target.exists(e.name);
      } catch (err) {
        failed(e.name, 'existence check failed', codeOf(err));
        await report({
          name: e.name,
          outcome: 'failed',
          reason: 'existence check failed',
          code: codeOf(err),
        });
        return true;
      }
      if (!exists) return false;
      skipped(e.name, 'exists in the target (onExisting: skip)');
      await report({ name: e.name, outcome: 'skipped', reason: 'exists in the target (onExisting: skip)' });
      return true;
    };
    const todo = records.filter((e) => !completed.has(e.name));
    receipt.alreadyDone = records.length - todo.length;
    progress('write', 0);
    // Records are read ahead and verified in a pipeline; each one's cancel check, existence check
    // (skip) and write happen only once it verified, right before its write.
    // A files target takes a 0.2 run's big records in parts, so none is staged there.
    const chunked = isChunkedManifest(run.manifest.document);
    const inParts = config.type === 'files' && chunked;
    const feed = feedRecords(run, todo, {
      memoryLimit: inParts ? Number.POSITIVE_INFINITY : (options.memoryStageBytes ?? MEMORY_STAGE),
      stager,
      ownBodies: config.type !== 'files',
      ...(inParts ? { partBytes: PART_BYTES } : {}),
      // A 0.2 run's records are re-verified through their chunks: every chunk's keyed id, signed
      // in the index whose records phase one checked by SHA-384, names exactly those bytes; a
      // second SHA-384 pass over every byte would add nothing but a core's worth of time.
      ...(chunked ? { checkRecordDigest: false } : {}),
    });
    let done = receipt.alreadyDone;
    try {
      for await (const rec of feed.records) {
        const e = rec.entry;
        done++;
        if (done % batch === 0) progress('write', done);
        let go = false;
        try {
          while (
            inFlight.size >= concurrency ||
            (inFlight.size > 0 && inFlightBytes + e.size > WRITE_BUDGET_BYTES)
          )
            await Promise.race(inFlight);
          // Checked after the wait: a cancel that came while writes finished starts no new one.
          if (cancelled()) {
            receipt.status = 'cancelled';
            receipt.cancelled = true;
            break;
          }
          go = !(skipMode && (await skipExisting(e)));
        } finally {
          if (!go) await rec.release();
        }
        if (!go) continue;
        inFlightBytes += e.size;
        const task = writeOne(rec).finally(() => {
          inFlightBytes -= e.size;
          inFlight.delete(task);
        });
        inFlight.add(task);
      }
    } catch (err) {
      // A record failed re-verification (or could not be read): stop; what was written stays.
      receipt.status = 'aborted';
      receipt.failure = {
        phase: 'write',
        code: codeOf(err),
        reason: isArchiveError(err)
          ? `record failed re-verification: ${err.reason}`
          : 'record could not be read back',
        ...(todo[feed.fed()] === undefined ? {} : { record: todo[feed.fed()]!.name }),
      };
    } finally {
      // Writes already started finish (a cancel or an abort stops further writes only).
      await Promise.allSettled([...inFlight]);
    }
  } finally {
    await connector?.close().catch(() => undefined);
    await stager.close().catch(() => undefined);
  }
  if (receipt.status === 'succeeded' && receipt.failedCount > 0) receipt.status = 'completed-with-failures';
  progress('done', records.length);
  return finish();
}

/** The run opened afresh for phase two (when the plan's reader cannot be read through again). */
function reopen(store: ObjectStore, job: string, runId: string, options: ApplyOptions): Promise<OpenedRun> {
  return openRun(store, {
    job,
    runId,
    secretKey: options.operationalSecretKey!,
    ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
  });
}

export type { SkippedEntry };
