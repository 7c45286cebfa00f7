/**
 * The run executor: one attempt at a run (fresh or resumed from its checkpoint).
 *
 * Algorithm:
 *  1. Refuse before writing anything when the engine lacks a key a run needs (no break-glass
 *     public key): `engine not fully configured`.
 *  2. Open the job's source; for EVERY destination of the job, resume its archive writer from the
 *     run's checkpoint (finished shards are never rewritten), or skip it when its manifest is
 *     already sealed (a crash between seal and read-back), or start a fresh writer.
 *  3. Enumerate the source; records the checkpoint already holds are skipped without being read
 *     (the last one's name must line up, else `resume state divergent`); the rest are read with
 *     bounded read-ahead and appended to every writer that needs them. A record that vanished or
 *     is no longer backed up is left out and counted as a warning; a skipped entry is a warning.
 *  4. After each stored shard the checkpoint row is refreshed (coalesced; at most one save in
 *     flight and one every `checkpointIntervalMs`).
 *  5. Seal every writer, then read every sealed copy back with the operational key (verifyRun,
 *     signer pinned to the engine's own); the attempt is `ok` only when every copy verified.
 *  6. A throttle parks the attempt (writers stopped, checkpoint saved); a shutdown stops it the same
 *     way (`interrupted`); any other error fails it with one closed-list reason. A destination's own
 *     failure does not stop the other destinations' copies; the run then fails with that reason.
 *
 * Security-relevant behaviour: archives are sealed to the operational AND break-glass keys, never
 * to the engine's key alone; log lines carry reasons, codes and cause digests, never raw messages,
 * record names or bytes.
 */
import {
  type ArchiveWriter,
  createArchiveWriter,
  layout,
  type ResumePoint,
  resumeArchiveWriter,
  verifyRun,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { HeldLease, RunDestinationState, RunRecord, State } from '@coffer/state';
import { jobDestinations, type RunJob } from '../jobs/index.ts';
import { decodeCheckpoint, encodeCheckpoint, nameMark, type VanishedMark } from './checkpoint.ts';
import { giveReadMemory, readAhead, takeReadMemory } from './feed.ts';
import { type Classification, classifyFailure, RunError } from './reasons.ts';
import { isSkippedEntry, type RunSource, type RunSourceRecord, selectorOf } from './source.ts';
import {
  archiveOf,
  archivePresent,
  FINGERPRINTABLE,
  fingerprintOf,
  listingFingerprint,
  SourceFingerprint,
} from './unchanged.ts';

export interface RunKeys {
  signer: { secretKey: Uint8Array; publicKey: Uint8Array };
  operational: { secretKey: Uint8Array; publicKey: Uint8Array };
  breakGlass: { publicKey: Uint8Array } | null;
}

/** The job fields the executor reads. */
/** A stored job as the executor reads it (jobs/job.ts). */
export type { RunJob } from '../jobs/index.ts';

/** A job's default listing cap (docs/jobs.md `maxEntries`): 10,000 pages of 200, as before. */
export const DEFAULT_MAX_ENTRIES = 2_000_000;

export interface RunLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

export interface ExecutorDeps {
  state: State;
  keys: RunKeys;
  destinations: ReadonlyMap<string, ObjectStore>;
  openSource: (job: RunJob) => Promise<RunSource>;
  log: RunLogger;
  /**
   * Minimum time between two checkpoint saves (default 10 000 ms; the first stored shard saves at
   * once; 0 saves after every stored shard, which tests use).
   */
  checkpointIntervalMs?: number;
  /**
   * Largest share of the run's wall time spent saving checkpoints (default 0.05): after a save
   * that took `d` ms the next one waits at least `d / share` ms. A writer checkpoint carries the
   * index lines of every finished record (about 200 bytes each) and is re-sealed and re-signed
   * whole at each save, so its cost grows with the run; this keeps it a bounded fraction. Not
   * applied when `checkpointIntervalMs` is 0.
   */
  checkpointCostShare?: number;
  /** Archive writer worker threads (default: the archive's default). */
  workers?: number;
  /** Plaintext bytes per shard (default: the archive's 8 MiB). */
  shardSize?: number;
  /** Records read ahead concurrently (default 8) and their byte budget (default 32 MiB). */
  readAhead?: { concurrency?: number; budgetBytes?: number; smallBytes?: number };
  /**
   * The run lock this attempt holds: checkpoints are saved only while it is held (fenced write),
   * and each archive writer calls `assertHeld()` before it commits, so an attempt that lost the
   * lock (paused past its expiry while another engine took the run over) never commits.
   */
  lease?: HeldLease;
}

export type DestinationStates = Record<string, RunDestinationState>;

export type AttemptOutcome =
  | {
      kind: 'ok';
      records: number;
      bytes: number;
      warnings: number;
      destinations: DestinationStates;
      /** The fingerprint of the listing this run backed up (or found unchanged), when known. */
      fingerprint: string | null;
      /** Set when no archive was written: the run whose archive holds this unchanged source. */
      unchangedFrom?: string;
    }
  | { kind: 'failed'; failure: Classification; destinations: DestinationStates; warnings: number }
  | { kind: 'parked'; failure: Classification; destinations: DestinationStates }
  | { kind: 'retry'; failure: Classification; destinations: DestinationStates }
  | { kind: 'interrupted'; destinations: DestinationStates };

interface Lane {
  id: string;
  store: ObjectStore;
  writer: ArchiveWriter;
  resume: ResumePoint | null;
  /** Records this writer already holds (archive index it continues at). */
  from: number;
  failed: boolean;
}

const SMALL = 1024 * 1024;
/** Listing page size the executor asks for (see needed()). */
const LISTING_PAGE = 200;
/** Scratch memory of a large record's stream: two halves, one read while the writer copies the other. */
const LARGE_SCRATCH = 2 * 1024 * 1024;
const DEFAULT_CHECKPOINT_INTERVAL_MS = 10_000;
const DEFAULT_CHECKPOINT_COST_SHARE = 0.05;

/** Metadata values the archive index accepts: JSON scalars; anything else is kept as JSON text. */
function scalarMetadata(m: Record<string, unknown>): Record<string, string | number | boolean | null> {
  const out: Record<string, string | number | boolean | null> = {};
  for (const [k, v] of Object.entries(m)) {
    if (v === undefined) continue;
    if (v === null || typeof v === 'string' || typeof v === 'boolean') out[k] = v;
    else if (typeof v === 'number') out[k] = Number.isFinite(v) ? v : String(v);
    else out[k] = JSON.stringify(v) ?? null;
  }
  return out;
}

const nowIso = () => new Date().toISOString();

/** Runs one attempt. Never throws: every error becomes an outcome. */
export async function attemptRun(
  deps: ExecutorDeps,
  job: RunJob,
  run: RunRecord,
  signal: AbortSignal,
): Promise<AttemptOutcome> {
  const destIds = jobDestinations(job);
  const dests: DestinationStates = {};
  for (const id of destIds) dests[id] = { state: 'pending', updatedAt: nowIso() };
  const lanes: Lane[] = [];
  const sealed: { id: string; store: ObjectStore }[] = [];
  const failedEnv: Record<string, { reason: string; causeDigest: string }> = {};
  let vanished: VanishedMark[] = [];
  let source: RunSource | null = null;
  let saver: CheckpointSaver | null = null;
  let warnings = 0;

  const failDestination = (lane: { id: string }, err: unknown): Classification => {
    const c = classifyFailure(err);
    dests[lane.id] = { state: 'failed', reason: c.reason, causeDigest: c.causeDigest, updatedAt: nowIso() };
    failedEnv[lane.id] = { reason: c.reason, causeDigest: c.causeDigest };
    deps.log.error(
      {
        event: 'run-destination-failed',
        job: job.id,
        runId: run.id,
        destination: lane.id,
        reason: c.reason,
        code: c.code,
        causeDigest: c.causeDigest,
      },
      `run ${run.id}: destination ${lane.id} failed: ${c.reason} [${c.causeDigest}]`,
    );
    return c;
  };

  const stopLanes = async () => {
    for (const l of lanes) await l.writer.abort().catch(() => undefined);
  };

  try {
    // 1. Keys first: nothing is written without a break-glass recipient.
    const breakGlass = deps.keys.breakGlass;
    if (!breakGlass) throw new RunError('ERR_RUN_NOT_CONFIGURED', 'no break-glass public key');
    for (const id of destIds) {
      if (!deps.destinations.has(id))
        throw new RunError('ERR_RUN_DESTINATION_UNKNOWN', `destination ${id} is not configured`);
    }

    // 2. Source and writers.
    source = await deps.openSource(job);
    const row = await deps.state.checkpoints.get(run.id);
    const envelope = row ? decodeCheckpoint(row.sealed, run.id) : null;
    vanished = envelope?.vanished ?? [];
    // An unchanged source (opt-in): recorded against the archive that already holds it.
    if (job.skipUnchanged === true && envelope === null && run.prevRunId !== null) {
      const same = await unchangedSince(deps, job, run, source, destIds, signal);
      if (same) {
        for (const id of destIds) {
          const verifiedAt = same.prev.destinations[id]?.verifiedAt;
          dests[id] = {
            state: 'verified',
            ...(typeof verifiedAt === 'string' ? { verifiedAt } : {}),
            updatedAt: nowIso(),
          };
        }
        deps.log.info(
          { event: 'run-unchanged', job: job.id, runId: run.id, unchangedFrom: same.base },
          `run ${run.id}: source unchanged since ${same.base}; no new archive`,
        );
        return {
          kind: 'ok',
          records: same.prev.records,
          bytes: same.prev.bytes,
          warnings: same.prev.warnings,
          destinations: dests,
          fingerprint: same.fingerprint,
          unchangedFrom: same.base,
        };
      }
    }
    saver = new CheckpointSaver(deps, job.id, run.id, lanes, failedEnv, () => vanished);
    const lease = deps.lease;
    const commitGuard = lease ? { beforeCommit: () => lease.assertHeld() } : {};
    const onShardFor = (destId: string) => (ev: { index: number; recordsDone: number }) => {
      dests[destId] = { ...dests[destId], state: 'writing', shards: ev.index + 1, updatedAt: nowIso() };
      saver?.request(destId, ev.index + 1);
    };
    for (const id of destIds) {
      const store = deps.destinations.get(id)!;
      const earlier = envelope?.failed[id];
      if (earlier) {
        dests[id] = {
          state: 'failed',
          reason: earlier.reason,
          causeDigest: earlier.causeDigest,
          updatedAt: nowIso(),
        };
        failedEnv[id] = earlier;
        continue;
      }
      try {
        if ((await store.head(layout.manifest(job.id, run.id))) !== null) {
          dests[id] = { state: 'written', updatedAt: nowIso() };
          sealed.push({ id, store });
          continue;
        }
        const cp = envelope?.writers[id];
        if (cp) {
          const r = await resumeArchiveWriter(cp, {
            store,
            signerSecretKey: deps.keys.signer.secretKey,
            operationalSecretKey: deps.keys.operational.secretKey,
            onShard: onShardFor(id),
            ...commitGuard,
            ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
          });
          lanes.push({
            id,
            store,
            writer: r.writer,
            resume: r.resume,
            from: r.resume.recordsDone,
            failed: false,
          });
          dests[id] = {
            state: 'writing',
            shards: r.resume.shardsDone,
            resumedAt: nowIso(),
            updatedAt: nowIso(),
          };
        } else {
          const writer = await createArchiveWriter({
            store,
            job: job.id,
            runId: run.id,
            prevRunId: run.prevRunId,
            signerSecretKey: deps.keys.signer.secretKey,
            recipients: { operational: deps.keys.operational.publicKey, breakGlass: breakGlass.publicKey },
            source: { type: source.type, binding: source.binding, namespace: source.namespace },
            onShard: onShardFor(id),
            ...commitGuard,
            ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
            ...(deps.shardSize !== undefined ? { shardSize: deps.shardSize } : {}),
          });
          lanes.push({ id, store, writer, resume: null, from: 0, failed: false });
          dests[id] = { state: 'writing', shards: 0, updatedAt: nowIso() };
        }
      } catch (err) {
        const c = classifyFailure(err);
        // A checkpoint that cannot be opened or a throttle concerns the whole run.
        if (c.disposition !== 'fail' || !isDestinationFault(err)) throw err;
        failDestination({ id }, err);
      }
    }

    // 3. Enumerate and feed.
    const live = () => lanes.filter((l) => !l.failed);
    /** The fingerprint of the whole listing, once the enumeration ran to its end. */
    let listed: string | null = null;
    if (live().length > 0) {
      const resumeAt = Math.min(...live().map((l) => l.from));
      const past = new Set(vanished.filter((v) => v.at < resumeAt).map((v) => `${v.at}:${v.name}`));
      vanished = vanished.filter((v) => v.at < resumeAt);
      warnings += vanished.length;
      const selected = selectorOf(job.source);
      let index = 0;
      let skipped = 0;
      const src = source;
      const fp = FINGERPRINTABLE.has(src.type) ? new SourceFingerprint(job.source, destIds) : null;
      // The records to read, in enumeration order; skipped entries and records already held are
      // filtered here, so they are never read.
      async function* needed(): AsyncGenerator<{ rec: RunSourceRecord; at: number }> {
        // Short pages: a page's records stay alive until the feed reaches them, and a long page
        // outlives two young-generation collections, so its records get promoted to the old
        // generation only to die there (measured: fewer, cheaper collections with 200).
        const maxEntries = job.maxEntries ?? DEFAULT_MAX_ENTRIES;
        // The page cap stays as a guard against listings of empty pages (a sparse redis SCAN),
        // never tighter than what the entry cap allows.
        const maxPages = Math.max(10_000, Math.ceil(maxEntries / LISTING_PAGE) + 1);
        for await (const entry of src.enumerate({ pageSize: LISTING_PAGE, maxEntries, maxPages })) {
          if (signal.aborted) return;
          if (isSkippedEntry(entry)) {
            skipped++;
            fp?.add(entry);
            continue;
          }
          if (!selected(entry.name)) continue;
          fp?.add(entry);
          if (index < resumeAt && past.has(`${index}:${nameMark(entry.name)}`)) {
            past.delete(`${index}:${nameMark(entry.name)}`);
            continue;
          }
          const at = index++;
          for (const l of live()) {
            if (l.resume && at === l.from - 1 && l.resume.lastRecordName !== entry.name) {
              throw new RunError(
                'ERR_RUN_RESUME_DIVERGENT',
                'the source no longer lines up with the checkpoint',
              );
            }
          }
          if (at < resumeAt) continue;
          yield { rec: entry, at };
        }
        listed = fp?.digest() ?? null;
      }
      const ra = deps.readAhead ?? {};
      const smallBytes = ra.smallBytes ?? SMALL;
      // Reused read memory (feed.ts): slots for small records, one stream buffer per lane for
      // large ones. Allocated untouched: only the pages reads land in become resident.
      const streamBuffers: Buffer[] = [];
      const streamBuffer = (i: number) => {
        streamBuffers[i] ??= takeReadMemory(LARGE_SCRATCH);
        return streamBuffers[i]!;
      };
      const ahead = readAhead(
        needed(),
        ({ rec }, buffer) => src.read(rec.name, buffer === undefined ? undefined : { buffer }),
        ({ rec }) => rec.size,
        {
          concurrency: ra.concurrency ?? 8,
          budgetBytes: ra.budgetBytes ?? 32 * 1024 * 1024,
          smallBytes,
          readInto: src.readInto ? ({ rec }, buffer) => src.readInto!(rec.name, buffer) : undefined,
          largeBuffer: streamBuffer(0),
        },
      );
      // Records vanished in this attempt shift the archive index of everything after them.
      let shift = 0;
      try {
        for await (const { item, body, error } of ahead) {
          const at = item.at - shift;
          const rec = item.rec;
          if (error !== null) {
            const c = classifyFailure(error);
            if (c.disposition !== 'warn') throw error;
            vanished.push({ at, name: nameMark(rec.name) });
            warnings++;
            shift++;
            continue;
          }
          const targets = live().filter((l) => l.from <= at);
          const input = {
            name: rec.name,
            size: rec.size,
            sourceType: rec.sourceType,
            binding: rec.binding,
            namespace: rec.namespace,
            metadata: scalarMetadata(rec.metadata),
          };
          const results = await Promise.allSettled(
            targets.map(async (l, i) => {
              // A streamed (large) body can be consumed once: further writers read it again.
              const b =
                body instanceof Uint8Array || i === 0
                  ? body!
                  : await src.read(rec.name, { buffer: streamBuffer(i) });
              try {
                return await l.writer.addRecord({ ...input, body: b });
              } catch (err) {
                // A writer that failed mid-stream leaves the stream open: close it (its file and any read in flight).
                if (!(b instanceof Uint8Array))
                  await (b as AsyncGenerator).return?.(undefined)?.catch(() => undefined);
                throw err;
              }
            }),
          );
          for (let i = 0; i < results.length; i++) {
            const r = results[i]!;
            if (r.status === 'fulfilled') continue;
            if (!isDestinationFault(r.reason) || classifyFailure(r.reason).disposition !== 'fail')
              throw r.reason;
            targets[i]!.failed = true;
            await targets[i]!.writer.abort().catch(() => undefined);
            failDestination(targets[i]!, r.reason);
          }
          if (live().length === 0) break;
          if (signal.aborted) break;
        }
      } finally {
        // Every stream is closed by now (consumed, or returned on a writer failure).
        for (const b of streamBuffers) if (b !== undefined) giveReadMemory(b);
      }
      warnings += skipped;
    }

    if (signal.aborted) {
      await stopLanes();
      await saver.flush();
      return { kind: 'interrupted', destinations: dests };
    }

    // 5. Seal, then read back.
    await saver.idle();
    for (const l of live()) {
      try {
        const summary = await l.writer.finish();
        dests[l.id] = {
          state: 'written',
          bytes: summary.storedBytes,
          shards: summary.shards,
          updatedAt: nowIso(),
        };
        sealed.push({ id: l.id, store: l.store });
      } catch (err) {
        if (!isDestinationFault(err) || classifyFailure(err).disposition !== 'fail') throw err;
        l.failed = true;
        failDestination(l, err);
      }
    }
    // The writers are done (sealed or failed): drop them, so their index lines (about 1 KB of heap
    // per record) can be collected while the read-back holds the index it reads. A park or stop
    // from here on saves a checkpoint without writers; a resume finds the sealed manifests first.
    lanes.length = 0;
    // Progress for readers of the run (history, replication): the copies are sealed, read-back
    // follows. Best effort: the outcome is recorded at the end whatever happens here.
    await deps.state.runs.update(run.id, { destinations: dests }).catch(() => undefined);
    let records = 0;
    let bytes = 0;
    for (const s of sealed) {
      const verdict = await verifyRun(s.store, {
        job: job.id,
        runId: run.id,
        secretKey: deps.keys.operational.secretKey,
        signerPublicKey: deps.keys.signer.publicKey,
        ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
      });
      if (verdict.ok) {
        dests[s.id] = { ...dests[s.id], state: 'verified', verifiedAt: nowIso(), updatedAt: nowIso() };
        records = verdict.checks.records;
        bytes = verdict.checks.bytes;
      } else {
        const code = verdict.failure?.code ?? 'ERR_ARCHIVE_INTERNAL';
        const err = new RunError('ERR_RUN_VERIFY_FAILED', `read-back failed (${code})`, { verifyCode: code });
        if (code === 'ERR_ARCHIVE_DESTINATION') {
          // A throttled read-back parks like any other throttle.
          const c = classifyFailure(err);
          if (c.disposition === 'park') throw err;
        }
        failDestination(s, err);
      }
    }
    const failedIds = destIds.filter((id) => dests[id]?.state === 'failed');
    if (failedIds.length > 0) {
      const first = failedEnv[failedIds[0]!]!;
      const c = classifyFailure(new RunError('ERR_RUN_INVARIANT', 'destination failed'));
      return {
        kind: 'failed',
        failure: { ...c, reason: first.reason, causeDigest: first.causeDigest, code: 'ERR_RUN_DESTINATION' },
        destinations: dests,
        warnings,
      };
    }
    return {
      kind: 'ok',
      records,
      bytes,
      warnings,
      destinations: dests,
      // A record that vanished makes the listing a moving target: no fingerprint then.
      fingerprint: vanished.length === 0 ? listed : null,
    };
  } catch (err) {
    const c = classifyFailure(err);
    await stopLanes();
    if (c.disposition === 'park' || c.disposition === 'warn') {
      if (saver) await saver.flush().catch(() => undefined);
      return c.disposition === 'park'
        ? { kind: 'parked', failure: c, destinations: dests }
        : { kind: 'retry', failure: c, destinations: dests };
    }
    if (signal.aborted) {
      if (saver) await saver.flush().catch(() => undefined);
      return { kind: 'interrupted', destinations: dests };
    }
    return { kind: 'failed', failure: c, destinations: dests, warnings };
  } finally {
    await saver?.idle().catch(() => undefined);
    await source?.close().catch(() => undefined);
  }
}

/**
 * The unchanged-source check: the latest `ok` run's fingerprint equals the source's listing now,
 * and the archive holding it is present (signed by this engine, every shard at its size) on every
 * destination. Null otherwise (the run then backs up in full); never throws for a store fault.
 */
async function unchangedSince(
  deps: ExecutorDeps,
  job: RunJob,
  run: RunRecord,
  source: RunSource,
  destIds: string[],
  signal: AbortSignal,
): Promise<{ prev: RunRecord; base: string; fingerprint: string } | null> {
  if (!FINGERPRINTABLE.has(source.type) || run.prevRunId === null) return null;
  const prev = await deps.state.runs.get(run.prevRunId);
  if (prev?.status !== 'ok' || prev.prunedAt !== null) return null;
  const before = fingerprintOf(prev);
  if (before === null) return null;
  const now = await listingFingerprint(source, job.source, destIds, selectorOf(job.source), signal);
  if (now !== before) return null;
  const base = archiveOf(prev);
  for (const id of destIds) {
    const store = deps.destinations.get(id);
    if (!store || !(await archivePresent(store, job.id, base, deps.keys.signer.publicKey))) return null;
  }
  return { prev, base, fingerprint: now };
}

/** True when the error is the destination's own (store) fault rather than the source's or the run's. */
function isDestinationFault(err: unknown): boolean {
  const e = err as { code?: unknown };
  return (
    e?.code === 'ERR_ARCHIVE_DESTINATION' ||
    (typeof e?.code === 'string' && e.code.startsWith('ERR_OBJECTSTORE_')) ||
    e?.code === 'ERR_RUN_VERIFY_FAILED'
  );
}

/**
 * Keeps the run's checkpoint row fresh: `request()` after each stored shard (never blocks the
 * writer), at most one save in flight, at most one per interval except the first; `flush()` saves
 * now (park, shutdown). A failed save is logged and retried at the next shard: it costs only
 * resumability, never the run.
 */
class CheckpointSaver {
  private readonly deps: ExecutorDeps;
  private readonly job: string;
  private readonly runId: string;
  private readonly lanes: Lane[];
  private readonly failed: Record<string, { reason: string; causeDigest: string }>;
  private readonly vanished: () => VanishedMark[];
  private last = 0;
  /** Wall time of the last save (ms). */
  private cost = 0;
  private chain: Promise<void> = Promise.resolve();
  private pending = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly shards = new Map<string, number>();

  constructor(
    deps: ExecutorDeps,
    job: string,
    runId: string,
    lanes: Lane[],
    failed: Record<string, { reason: string; causeDigest: string }>,
    vanished: () => VanishedMark[],
  ) {
    this.deps = deps;
    this.job = job;
    this.runId = runId;
    this.lanes = lanes;
    this.failed = failed;
    this.vanished = vanished;
  }

  request(destId: string, shardsDone: number): void {
    this.shards.set(destId, Math.max(this.shards.get(destId) ?? 0, shardsDone));
    if (this.pending) return;
    this.pending = true;
    const interval = this.deps.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
    const share = this.deps.checkpointCostShare ?? DEFAULT_CHECKPOINT_COST_SHARE;
    const gap = interval === 0 ? 0 : Math.max(interval, share > 0 ? this.cost / share : 0);
    const wait = Math.max(0, this.last + gap - Date.now());
    const go = () => {
      this.timer = null;
      this.chain = this.chain.then(() => this.save());
    };
    if (wait === 0 || this.last === 0) go();
    else this.timer = setTimeout(go, wait);
  }

  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.pending = true;
    this.chain = this.chain.then(() => this.save());
    await this.chain;
  }

  async idle(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.pending = false;
    }
    await this.chain;
  }

  private async save(): Promise<void> {
    this.pending = false;
    const started = Date.now();
    this.last = started;
    const shards = Object.fromEntries(this.shards);
    try {
      const writers: Record<string, Uint8Array> = {};
      for (const l of this.lanes) if (!l.failed) writers[l.id] = await l.writer.exportCheckpoint();
      const bytes = encodeCheckpoint({
        v: 1,
        runId: this.runId,
        job: this.job,
        writers,
        failed: this.failed,
        vanished: this.vanished(),
      });
      const lease = this.deps.lease;
      await this.deps.state.checkpoints.put(this.runId, this.job, bytes, lease ? { lease } : undefined);
      this.cost = Date.now() - started;
      this.deps.log.info(
        {
          event: 'run-checkpoint',
          job: this.job,
          runId: this.runId,
          shardsDone: shards,
          bytes: bytes.length,
          ms: this.cost,
        },
        `run ${this.runId}: checkpoint saved`,
      );
    } catch (err) {
      const c = classifyFailure(err);
      this.deps.log.warn(
        {
          event: 'run-checkpoint-failed',
          job: this.job,
          runId: this.runId,
          code: c.code,
          causeDigest: c.causeDigest,
        },
        `run ${this.runId}: checkpoint not saved [${c.causeDigest}]`,
      );
    }
  }
}
