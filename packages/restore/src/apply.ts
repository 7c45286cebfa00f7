/**
 * The apply: phases 3 and 4 of the specification's apply gate order (docs/restore.md "Apply
 * algorithm" is normative; the engine runs gates 1 and 2, capability and approval, before calling).
 *
 * Security-relevant behaviour:
 * - Phase one reads every in-scope record and checks its plaintext SHA-384 (and every shard's
 *   digest and AEAD tag) before anything is written; one failure aborts with zero records written.
 * - Phase two re-reads each record from the store with a fresh reader right before its write,
 *   stages it (memory, or a 0600 file in a private 0700 directory) while the reader verifies it,
 *   and hands the connector only bytes whose digest matched: unverified bytes are never written.
 *   A record that fails re-verification stops the apply (`aborted`; what was written stays).
 * - `onExisting: skip` asks the target just before each write; a failed check records a failure
 *   and writes nothing. A Redis target writes without REPLACE so a key created meanwhile is kept.
 * - A cancel (AbortSignal) stops further writes; records already written stay (no rollback).
 * - Resumable: names in `completed` (written by an earlier attempt of the same plan) are not
 *   written again; each record's write is idempotent for the same bytes.
 */
import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { createReadStream } from 'node:fs';
import { mkdtemp, open, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type IndexEntry, isArchiveError, type OpenedRun, openRun, verifyRun } from '@coffer/archive';
import { isSourceError, openSource, type RecordBody, type SourceConnector } from '@coffer/sources';
import { codeOf, RestoreError } from './errors.ts';
import { computePlan } from './plan.ts';
import type { ApplyOptions, ApplyProgress, ApplyReceipt, RecordOutcome, SkippedEntry } from './types.ts';

/** The specification's in-account apply limits, used in Coffer as progress batch sizes (not caps). */
export const APPLY_BATCH_SKIP = 160;
export const APPLY_BATCH = 200;
const MEMORY_STAGE = 32 * 1024 * 1024;
/**
 * Phase two stages records one by one in archive order (so the reader decrypts each shard once)
 * and writes up to this many staged records concurrently: a files target spends most of a small
 * record's time waiting on filesystem calls, which overlap well. Bounded in bytes as well.
 */
const WRITE_CONCURRENCY = 8;
const WRITE_BUDGET_BYTES = 96 * 1024 * 1024;
const SKIPPED_MAX = 1000;
const FAILED_MAX = 1000;

const WRITE_REASONS: Record<string, string> = {
  ERR_SOURCE_TARGET_EXISTS: 'exists in the target',
  ERR_SOURCE_UNSAFE_NAME: 'unsafe name (would write outside the target)',
  ERR_SOURCE_INVALID_RECORD: 'record not accepted by the target',
  ERR_SOURCE_WRITE: 'write failed',
  ERR_SOURCE_BINDING: 'target unreachable',
  ERR_SOURCE_RESOURCE_MISSING: 'target resource missing',
  ERR_SOURCE_THROTTLED: 'target throttled the write',
};

async function* piecesOf(parts: Uint8Array[]): AsyncIterable<Uint8Array> {
  for (const p of parts) yield p;
}

/** A record staged after its bytes verified. */
interface Staged {
  size: number;
  body(): RecordBody;
  release(): Promise<void>;
}

class Stager {
  #dir: string | null = null;
  readonly #base: string;
  readonly #limit: number;
  constructor(base: string, limit: number) {
    this.#base = base;
    this.#limit = limit;
  }

  /** Streams the record through the reader's checks; resolves only when its digest matched. */
  async stage(run: OpenedRun, entry: IndexEntry): Promise<Staged> {
    const parts: Uint8Array[] = [];
    let inMemory = 0;
    let file: Awaited<ReturnType<typeof open>> | null = null;
    let path: string | null = null;
    let size = 0;
    try {
      for await (const piece of run.readRecord(entry)) {
        size += piece.length;
        if (file === null && inMemory + piece.length <= this.#limit) {
          parts.push(piece.slice());
          inMemory += piece.length;
          continue;
        }
        if (file === null) {
          this.#dir ??= await mkdtemp(join(this.#base, 'coffer-restore-'));
          path = join(this.#dir, randomBytes(12).toString('hex'));
          file = await open(path, 'wx', 0o600);
          for (const p of parts) await file.write(p);
          parts.length = 0;
        }
        await file.write(piece);
      }
      if (file !== null) await file.close();
      file = null;
    } catch (e) {
      if (file !== null) await file.close().catch(() => undefined);
      if (path !== null) await rm(path, { force: true });
      throw e;
    }
    if (path === null) {
      // No concatenation: a record spanning shards is handed over as its verified pieces.
      const only = parts.length === 1 ? parts[0]! : null;
      return {
        size,
        body: () => only ?? (piecesOf(parts) as RecordBody),
        release: async () => {
          parts.length = 0;
        },
      };
    }
    const p = path;
    return {
      size,
      body: () => createReadStream(p, { highWaterMark: 256 * 1024 }) as AsyncIterable<Uint8Array>,
      release: () => rm(p, { force: true }),
    };
  }

  async close(): Promise<void> {
    if (this.#dir !== null) await rm(this.#dir, { recursive: true, force: true });
  }
}

/** The files connector's temporary name for a record being written (`.<base>.coffer-<hex>.tmp`). */
const CUT_WRITE = /^\.(.+)\.coffer-[0-9a-f]{12}\.tmp$/;

/**
 * Resuming into a files target: removes the temporary files of writes an engine crash cut short.
 * Only a regular file named after a planned record of the same directory is removed (the
 * connector's naming), never anything else in the target.
 */
async function removeCutWrites(root: string, names: string[]): Promise<void> {
  const byDir = new Map<string, Set<string>>();
  for (const n of names) {
    const slash = n.lastIndexOf('/');
    const dir = slash < 0 ? '' : n.slice(0, slash);
    const base = n.slice(slash + 1).slice(0, 200);
    const set = byDir.get(dir) ?? new Set<string>();
    byDir.set(dir, set);
    set.add(base);
  }
  for (const [dir, bases] of byDir) {
    let entries: Dirent[];
    try {
      entries = await readdir(join(root, dir), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      const m = CUT_WRITE.exec(e.name);
      if (m && e.isFile() && bases.has(m[1]!)) await rm(join(root, dir, e.name), { force: true });
    }
  }
}

/**
 * Applies a restore. Recomputes the plan (index only) and refuses when it cannot be made
 * (ERR_RESTORE_PLAN_UNAVAILABLE) or differs from `request.planHash` (ERR_RESTORE_PLAN_CHANGED);
 * then phase one (verify all, write nothing) and phase two (re-verify and write each record).
 * Returns the receipt; never throws for a record's failure (the receipt lists it). Throws the
 * request-class RestoreErrors of `planRestore`.
 */
export async function applyRestore(options: ApplyOptions): Promise<ApplyReceipt> {
  const now = options.now ?? (() => new Date());
  const startedAt = now().toISOString();
  const computed = await computePlan(options, false, false);
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
  for (let i = receipt.recordsVerified; i < records.length; i++) {
    if (cancelled()) {
      receipt.status = 'cancelled';
      receipt.cancelled = true;
      return finish();
    }
    const e = records[i]!;
    try {
      let n = 0;
      for await (const piece of ctx.run.readRecord(e)) n += piece.length;
      void n;
    } catch (err) {
      receipt.status = 'aborted';
      receipt.failure = {
        phase: 'verify',
        code: codeOf(err),
        reason: isArchiveError(err) ? err.reason : 'record could not be read back',
        record: e.name,
      };
      return finish();
    }
    receipt.recordsVerified++;
    if ((i + 1) % batch === 0) progress('verify', i + 1);
  }
  progress('verify', records.length);

  // Phase two: a fresh reader, so every byte is read from the store again and re-verified.
  let run: OpenedRun;
  try {
    run = await openRun(ctx.store, {
      job: receipt.job,
      runId: receipt.runId,
      secretKey: options.operationalSecretKey!,
      ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
    });
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
  const config =
    ctx.resolved.config.type === 'redis'
      ? { ...ctx.resolved.config, replace: !skipMode }
      : ctx.resolved.config;
  if (options.resuming === true && config.type === 'files')
    await removeCutWrites(
      config.root,
      records.map((r) => r.name),
    ).catch(() => undefined);
  const stager = new Stager(options.stagingDir ?? tmpdir(), options.memoryStageBytes ?? MEMORY_STAGE);
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
    const writeStaged = async (e: IndexEntry, staged: Staged): Promise<void> => {
      try {
        const r = await target.write(e.name, staged.body(), { ...e.metadata });
        if (r.written) {
          receipt.written++;
          receipt.bytes += staged.size;
          await report({ name: e.name, outcome: 'written', bytes: staged.size });
        } else {
          const reason = r.reason === 'expired' ? 'expired before the apply (not written)' : r.reason;
          skipped(e.name, reason);
          await report({ name: e.name, outcome: 'skipped', reason });
        }
      } catch (err) {
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
        await staged.release();
      }
    };
    try {
      for (let i = 0; i < records.length; i++) {
        if ((i > 0 && i % batch === 0) || i === 0) progress('write', i);
        const e = records[i]!;
        if (completed.has(e.name)) {
          receipt.alreadyDone++;
          continue;
        }
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
        if (skipMode) {
          let exists: boolean;
          try {
            exists = await connector.exists(e.name);
          } catch (err) {
            failed(e.name, 'existence check failed', codeOf(err));
            await report({
              name: e.name,
              outcome: 'failed',
              reason: 'existence check failed',
              code: codeOf(err),
            });
            continue;
          }
          if (exists) {
            skipped(e.name, 'exists in the target (onExisting: skip)');
            await report({
              name: e.name,
              outcome: 'skipped',
              reason: 'exists in the target (onExisting: skip)',
            });
            continue;
          }
        }
        let staged: Staged;
        try {
          staged = await stager.stage(run, e);
        } catch (err) {
          receipt.status = 'aborted';
          receipt.failure = {
            phase: 'write',
            code: codeOf(err),
            reason: isArchiveError(err)
              ? `record failed re-verification: ${err.reason}`
              : 'record could not be read back',
            record: e.name,
          };
          break;
        }
        inFlightBytes += e.size;
        const task = writeStaged(e, staged).finally(() => {
          inFlightBytes -= e.size;
          inFlight.delete(task);
        });
        inFlight.add(task);
      }
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

export type { SkippedEntry };
