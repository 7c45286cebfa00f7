/**
 * The run executor: one attempt at a run (fresh or resumed from its checkpoint).
 *
 * Algorithm: `attemptRun` runs five named stages in order; each takes the attempt's fixed inputs
 * and its ledger of copies (copies.ts: each destination's state, writer or sealed copy) and hands
 * its result to the next, never a shared array.
 *  1. `checkReady`: refuse before writing anything when the engine lacks a key a run needs (no
 *     break-glass public key): `engine not fully configured`, or a destination is not configured.
 *  2. `openLanes`: for EVERY destination of the job, resume its archive writer from the run's
 *     checkpoint (finished shards are never rewritten), or skip it when its manifest is already
 *     sealed (a crash between seal and read-back), or start a fresh writer. A job with
 *     `incremental: true` gets a chunked (format 0.2) writer built on the destination's latest
 *     `ok` run (bases.ts `chunkedBaseFor`); its checkpoint holds the chunk key and base and describes the
 *     packs stored so far, so a new attempt feeds every record again and stores none twice.
 *  3. `feed`: enumerate the source; records the checkpoint already holds are skipped without being read
 *     (the last one's name must line up, else `resume state divergent`); the rest are read with
 *     bounded read-ahead and appended to every writer that needs them. A record that vanished or
 *     is no longer backed up is left out and counted as a warning; a skipped entry is a warning.
 *     After each stored shard the checkpoint row is refreshed (checkpoint-saver.ts: coalesced; at
 *     most one save in flight and one every `checkpointIntervalMs`).
 *  4. `seal`: finish every writer.
 *  5. `readBack`: read every sealed copy back with the operational key (verifyRun, signer pinned
 *     to the engine's own); the attempt is `ok` only when every copy verified.
 * A throttle parks the attempt (writers stopped, checkpoint saved); a shutdown stops it the same
 * way (`interrupted`); any other error fails it with one closed-list reason. A destination's own
 * failure does not stop the other destinations' copies; the run then fails with that reason.
 *
 * Security-relevant behaviour: archives are sealed to the operational AND break-glass keys, never
 * to the engine's key alone; log lines carry reasons, codes and cause digests, never raw messages,
 * record names or bytes.
 */
import {
  createArchiveWriter,
  createChunkedWriter,
  isChunkedCheckpoint,
  layout,
  type RecordInput,
  type RecordResult,
  resumeArchiveWriter,
  resumeChunkedWriter,
  verifyRun,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { HeldLease, RunRecord, State } from '@coffer/state';
import { jobDestinations, type RunJob } from '../jobs/index.ts';
import type { ChunkedBaseCache } from './base-cache.ts';
import { chunkedBaseFor, unchangedSince } from './bases.ts';
import { decodeCheckpoint, nameMark, type RunCheckpoint, type VanishedMark } from './checkpoint.ts';
import { CheckpointSaver } from './checkpoint-saver.ts';
import { Copies, type DestinationStates, isDestinationFault, type Lane } from './copies.ts';
import { giveReadMemory, readAhead, takeReadMemory } from './feed.ts';
import { type Classification, classifyFailure, RunError } from './reasons.ts';
import { isSkippedEntry, type RunSource, type RunSourceRecord, selectorOf } from './source.ts';
import { FINGERPRINTABLE, SourceFingerprint } from './unchanged.ts';

export interface RunKeys {
  signer: { secretKey: Uint8Array; publicKey: Uint8Array };
  operational: { secretKey: Uint8Array; publicKey: Uint8Array };
  breakGlass: { publicKey: Uint8Array } | null;
}

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
  /**
   * Bases of incremental runs kept from each run's read-back for the job's next run (base-cache.ts);
   * null or absent: every incremental run loads its base from the store.
   */
  baseCache?: ChunkedBaseCache | null;
}

export type { DestinationStates } from './copies.ts';

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

const SMALL = 1024 * 1024;
/** Listing page size the executor asks for (see needed()). */
const LISTING_PAGE = 200;
/** Scratch memory of a large record's stream: two halves, one read while the writer copies the other. */
const LARGE_SCRATCH = 2 * 1024 * 1024;

/** Metadata values the archive index accepts: JSON scalars; anything else is kept as JSON text. */
function scalarMetadata(m: Record<string, unknown>): Record<string, string | number | boolean | null> {
  // Every connector's metadata is already scalars: then it is handed on as it is (the writer
  // copies what it keeps), not copied per record (an entries array and a copy of every record's
  // metadata were 9 of the 180 MiB a 20,000-file run with nothing changed allocates).
  let scalar = true;
  for (const k in m) {
    if (!Object.hasOwn(m, k)) continue;
    const v = m[k];
    if (v === null || typeof v === 'string' || typeof v === 'boolean') continue;
    if (typeof v === 'number' && Number.isFinite(v)) continue;
    scalar = false;
    break;
  }
  if (scalar) return m as Record<string, string | number | boolean | null>;
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

/** One attempt's fixed inputs and its ledger of copies, handed to every stage. */
interface Attempt {
  deps: ExecutorDeps;
  job: RunJob;
  run: RunRecord;
  signal: AbortSignal;
  copies: Copies;
}

/**
 * What the attempt has counted so far: records left out (warnings) and the records that vanished,
 * which the checkpoint carries (they shift the archive index of everything after them). Kept
 * outside the stages because a failed or parked attempt reports and saves them too.
 */
interface Tally {
  warnings: number;
  vanished: VanishedMark[];
}

/** Runs one attempt. Never throws: every error becomes an outcome. */
export async function attemptRun(
  deps: ExecutorDeps,
  job: RunJob,
  run: RunRecord,
  signal: AbortSignal,
): Promise<AttemptOutcome> {
  const copies = new Copies(jobDestinations(job), deps.log, job.id, run.id);
  const attempt: Attempt = { deps, job, run, signal, copies };
  const tally: Tally = { warnings: 0, vanished: [] };
  let source: RunSource | null = null;
  let saver: CheckpointSaver | null = null;
  try {
    const breakGlass = checkReady(deps, copies.ids);
    source = await deps.openSource(job);
    const row = await deps.state.checkpoints.get(run.id);
    const envelope = row ? decodeCheckpoint(row.sealed, run.id) : null;
    tally.vanished = envelope?.vanished ?? [];
    // An unchanged source (opt-in): recorded against the archive that already holds it.
    if (job.skipUnchanged === true && envelope === null && run.prevRunId !== null) {
      const same = await unchangedSince(deps, job, run, source, [...copies.ids], signal);
      if (same) return unchangedOutcome(attempt, same);
    }
    saver = new CheckpointSaver(deps, job.id, run.id, copies, () => tally.vanished);
    await openLanes(attempt, source, envelope, breakGlass, saver);
    const listed = copies.live().length > 0 ? await feed(attempt, source, tally) : null;
    if (signal.aborted) {
      await copies.abortAll();
      await saver.flush();
      return { kind: 'interrupted', destinations: copies.states };
    }
    await saver.idle();
    await seal(attempt);
    const { records, bytes } = await readBack(attempt);
    const failedIds = copies.failedIds();
    if (failedIds.length > 0) {
      const first = copies.failed[failedIds[0]!]!;
      const c = classifyFailure(new RunError('ERR_RUN_INVARIANT', 'destination failed'));
      return {
        kind: 'failed',
        failure: { ...c, reason: first.reason, causeDigest: first.causeDigest, code: 'ERR_RUN_DESTINATION' },
        destinations: copies.states,
        warnings: tally.warnings,
      };
    }
    return {
      kind: 'ok',
      records,
      bytes,
      warnings: tally.warnings,
      destinations: copies.states,
      // A record that vanished makes the listing a moving target: no fingerprint then.
      fingerprint: tally.vanished.length === 0 ? listed : null,
    };
  } catch (err) {
    const c = classifyFailure(err);
    await copies.abortAll();
    if (c.disposition === 'park' || c.disposition === 'warn') {
      if (saver) await saver.flush().catch(() => undefined);
      return c.disposition === 'park'
        ? { kind: 'parked', failure: c, destinations: copies.states }
        : { kind: 'retry', failure: c, destinations: copies.states };
    }
    if (signal.aborted) {
      if (saver) await saver.flush().catch(() => undefined);
      return { kind: 'interrupted', destinations: copies.states };
    }
    return { kind: 'failed', failure: c, destinations: copies.states, warnings: tally.warnings };
  } finally {
    await saver?.idle().catch(() => undefined);
    await source?.close().catch(() => undefined);
  }
}

/** Stage 1: nothing is written without a break-glass recipient and every destination configured. */
function checkReady(deps: ExecutorDeps, ids: readonly string[]): { publicKey: Uint8Array } {
  const breakGlass = deps.keys.breakGlass;
  if (!breakGlass) throw new RunError('ERR_RUN_NOT_CONFIGURED', 'no break-glass public key');
  for (const id of ids) {
    if (!deps.destinations.has(id))
      throw new RunError('ERR_RUN_DESTINATION_UNKNOWN', `destination ${id} is not configured`);
  }
  return breakGlass;
}

/** The outcome of a run whose source is unchanged since `same.base`: no new archive. */
function unchangedOutcome(
  { deps, job, run, copies }: Attempt,
  same: { prev: RunRecord; base: string; fingerprint: string },
): AttemptOutcome {
  for (const id of copies.ids) {
    const verifiedAt = same.prev.destinations[id]?.verifiedAt;
    copies.set(id, { state: 'verified', ...(typeof verifiedAt === 'string' ? { verifiedAt } : {}) });
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
    destinations: copies.states,
    fingerprint: same.fingerprint,
    unchangedFrom: same.base,
  };
}

/**
 * Stage 2: for every destination, resume its writer from the checkpoint, or find its manifest
 * already sealed (a crash between seal and read-back), or start a fresh writer; a destination the
 * checkpoint says failed stays failed. A destination's own fault fails that destination only; a
 * throttle or an unreadable checkpoint throws (the lanes opened so far are in `copies`, which the
 * caller aborts).
 */
async function openLanes(
  { deps, job, run, copies }: Attempt,
  source: RunSource,
  envelope: RunCheckpoint | null,
  breakGlass: { publicKey: Uint8Array },
  saver: CheckpointSaver,
): Promise<void> {
  const lease = deps.lease;
  const commitGuard = lease ? { beforeCommit: () => lease.assertHeld() } : {};
  const onShardFor = (destId: string) => (ev: { index: number; recordsDone: number }) => {
    copies.update(destId, { state: 'writing', shards: ev.index + 1 });
    saver.request(destId, ev.index + 1);
  };
  // A chunked lane's checkpoint describes its stored packs, so a new attempt references them.
  const onPackFor = (destId: string, count: () => number) => () => {
    const n = count();
    copies.update(destId, { state: 'writing', shards: n });
    saver.request(destId, n);
  };
  for (const id of copies.ids) {
    const store = deps.destinations.get(id)!;
    const earlier = envelope?.failed[id];
    if (earlier) {
      copies.failedEarlier(id, earlier);
      continue;
    }
    try {
      if ((await store.head(layout.manifest(job.id, run.id))) !== null) {
        copies.set(id, { state: 'written' });
        copies.addSealed({ id, store });
        continue;
      }
      const cp = envelope?.writers[id];
      if (cp && isChunkedCheckpoint(cp)) {
        // A 0.2 lane: same run, key and base; every record is fed again, stored chunks are referenced.
        let packs = 0;
        const r = await resumeChunkedWriter(cp, {
          store,
          signerSecretKey: deps.keys.signer.secretKey,
          operationalSecretKey: deps.keys.operational.secretKey,
          onPack: onPackFor(id, () => ++packs),
          ...commitGuard,
          ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
        });
        copies.addLane({ id, store, writer: r.writer, resume: r.resume, from: 0 });
        copies.set(id, { state: 'writing', shards: 0, resumedAt: nowIso() });
      } else if (cp) {
        const r = await resumeArchiveWriter(cp, {
          store,
          signerSecretKey: deps.keys.signer.secretKey,
          operationalSecretKey: deps.keys.operational.secretKey,
          onShard: onShardFor(id),
          ...commitGuard,
          ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
        });
        copies.addLane({ id, store, writer: r.writer, resume: r.resume, from: r.resume.recordsDone });
        copies.set(id, { state: 'writing', shards: r.resume.shardsDone, resumedAt: nowIso() });
      } else if (job.incremental === true) {
        let packs = 0;
        const base = await chunkedBaseFor(deps, store, job, run);
        const writer = await createChunkedWriter({
          store,
          job: job.id,
          runId: run.id,
          prevRunId: run.prevRunId,
          signerSecretKey: deps.keys.signer.secretKey,
          recipients: { operational: deps.keys.operational.publicKey, breakGlass: breakGlass.publicKey },
          source: { type: source.type, binding: source.binding, namespace: source.namespace },
          base,
          onPack: onPackFor(id, () => ++packs),
          ...commitGuard,
          ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
          ...(deps.shardSize !== undefined ? { packSize: deps.shardSize } : {}),
        });
        copies.addLane({ id, store, writer, resume: null, from: 0, base });
        copies.set(id, { state: 'writing', shards: 0 });
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
        copies.addLane({ id, store, writer, resume: null, from: 0 });
        copies.set(id, { state: 'writing', shards: 0 });
      }
    } catch (err) {
      const c = classifyFailure(err);
      // A checkpoint that cannot be opened or a throttle concerns the whole run.
      if (c.disposition !== 'fail' || !isDestinationFault(err)) throw err;
      copies.fail(id, err);
    }
  }
}

/**
 * Stage 3: enumerate the source and append every record a live writer still needs to each of
 * them. Records the checkpoint already holds are skipped without being read (the last one's name
 * must line up, else `resume state divergent`); the rest are read with bounded read-ahead. A
 * record that vanished or is no longer backed up is left out and counted (`tally`). A writer's
 * own fault fails its destination only. Returns the listing's fingerprint when the enumeration
 * ran to its end (else null).
 */
async function feed(
  { deps, job, signal, copies }: Attempt,
  src: RunSource,
  tally: Tally,
): Promise<string | null> {
  /** The fingerprint of the whole listing, once the enumeration ran to its end. */
  let listed: string | null = null;
  const resumeAt = Math.min(...copies.live().map((l) => l.from));
  const past = new Set(tally.vanished.filter((v) => v.at < resumeAt).map((v) => `${v.at}:${v.name}`));
  tally.vanished = tally.vanished.filter((v) => v.at < resumeAt);
  tally.warnings += tally.vanished.length;
  const selected = selectorOf(job.source);
  let index = 0;
  let skipped = 0;
  // Only a job that skips unchanged sources ever compares fingerprints (docs/runs.md).
  const fp =
    job.skipUnchanged === true && FINGERPRINTABLE.has(src.type)
      ? new SourceFingerprint(job.source, [...copies.ids])
      : null;
  // The records to read, in enumeration order; skipped entries and records already held are
  // filtered here, so they are never read.
  async function* needed(): AsyncGenerator<{ rec: RunSourceRecord; at: number; unread?: boolean }> {
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
      for (const l of copies.live()) {
        if (l.resume && at === l.from - 1 && l.resume.lastRecordName !== entry.name) {
          throw new RunError('ERR_RUN_RESUME_DIVERGENT', 'the source no longer lines up with the checkpoint');
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
  // A record every live lane takes unread from its base run (same change token) is never opened
  // (readAhead yields it with an empty body) and is added with `addUnchanged`. Asked when its read
  // would start and again as it is added, answered once: an answer cannot turn from yes to no
  // within a run (a writer's chunks only grow, and a failed lane only shrinks the set that must agree).
  const unread = (item: { rec: RunSourceRecord; unread?: boolean }): boolean => {
    if (item.unread !== undefined) return item.unread;
    const { rec } = item;
    const lanes = copies.live();
    item.unread =
      rec.change !== undefined &&
      lanes.length > 0 &&
      lanes.every((l) => 'wouldReuse' in l.writer && l.writer.wouldReuse(rec));
    return item.unread;
  };
  const ahead = readAhead(
    needed(),
    (item, buffer) => src.read(item.rec.name, buffer === undefined ? undefined : { buffer }),
    (item) => item.rec.size,
    {
      concurrency: ra.concurrency ?? 8,
      budgetBytes: ra.budgetBytes ?? 32 * 1024 * 1024,
      smallBytes,
      readInto: src.readInto ? (item, buffer) => src.readInto!(item.rec.name, buffer) : undefined,
      largeBuffer: streamBuffer(0),
      unread,
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
        tally.vanished.push({ at, name: nameMark(rec.name) });
        tally.warnings++;
        shift++;
        continue;
      }
      const live = copies.live();
      const targets = live.every((l) => l.from <= at) ? live : live.filter((l) => l.from <= at);
      const input: Omit<RecordInput, 'body'> = {
        name: rec.name,
        size: rec.size,
        sourceType: rec.sourceType,
        binding: rec.binding,
        namespace: rec.namespace,
        metadata: scalarMetadata(rec.metadata),
      };
      if (rec.change !== undefined) input.change = rec.change;
      // A record every lane takes unread is added at once (no promise per lane and record: on a
      // run with nothing changed that is every record).
      const results = unread(item)
        ? targets.map((l) => takeUnread(l, input))
        : await Promise.allSettled(
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
        if (!isDestinationFault(r.reason) || classifyFailure(r.reason).disposition !== 'fail') throw r.reason;
        await copies.failLane(targets[i]!, r.reason, { abort: true });
      }
      if (copies.live().length === 0) break;
      if (signal.aborted) break;
    }
  } finally {
    // Every stream is closed by now (consumed, or returned on a writer failure).
    for (const b of streamBuffers) if (b !== undefined) giveReadMemory(b);
  }
  tally.warnings += skipped;
  return listed;
}

/** A record `wouldReuse` said yes to, added unread, as a settled result (feed). */
function takeUnread(lane: Lane, input: Omit<RecordInput, 'body'>): PromiseSettledResult<RecordResult> {
  try {
    const r = 'addUnchanged' in lane.writer ? lane.writer.addUnchanged(input) : null;
    // A yes stays a yes within a run (a writer's chunks only grow): anything else is a defect.
    if (r === null)
      throw new RunError('ERR_RUN_INVARIANT', 'a record found unchanged could not be taken unread');
    return { status: 'fulfilled', value: r };
  } catch (reason) {
    return { status: 'rejected', reason };
  }
}

/**
 * Stage 4: seal every live writer (a destination's own fault fails that destination), then drop
 * the writers and publish the sealed states for readers of the run (best effort: the outcome is
 * recorded at the end whatever happens here).
 */
async function seal({ deps, run, copies }: Attempt): Promise<void> {
  for (const l of copies.live()) {
    try {
      const summary = await l.writer.finish();
      copies.set(l.id, { state: 'written', bytes: summary.storedBytes, shards: summary.shards });
      copies.addSealed({
        id: l.id,
        store: l.store,
        ...('packIds' in summary ? { newPacks: summary.packIds as string[], records: summary.records } : {}),
        ...(l.base ? { base: l.base } : {}),
      });
    } catch (err) {
      if (!isDestinationFault(err) || classifyFailure(err).disposition !== 'fail') throw err;
      await copies.failLane(l, err, { abort: false });
    }
  }
  copies.dropLanes();
  await deps.state.runs.update(run.id, { destinations: copies.states }).catch(() => undefined);
}

/**
 * Stage 5: read every sealed copy back with the operational key, the signer pinned to the
 * engine's own. A copy that does not verify fails its destination; a throttled read-back parks
 * the attempt. Returns the verified record and byte counts.
 */
async function readBack({ deps, job, run, copies }: Attempt): Promise<{ records: number; bytes: number }> {
  let records = 0;
  let bytes = 0;
  for (const s of copies.sealed()) {
    const verdict = await verifyRun(s.store, {
      job: job.id,
      runId: run.id,
      secretKey: deps.keys.operational.secretKey,
      signerPublicKey: deps.keys.signer.publicKey,
      ...(deps.workers !== undefined ? { workers: deps.workers } : {}),
      // A 0.2 copy this attempt sealed: its new packs in full, the older ones by listing and digest;
      // what it read is kept as the job's next base when the cache can keep one that size.
      ...(s.newPacks !== undefined
        ? { newPacks: s.newPacks, keepBase: deps.baseCache?.mayKeep(s.records ?? 0) === true }
        : {}),
      // Records unchanged since the base are taken from it, not parsed again from the new index.
      ...(s.base !== undefined ? { knownRecords: s.base } : {}),
    });
    if (verdict.ok && verdict.base !== undefined)
      deps.baseCache?.put(s.store, verdict.base, deps.keys.operational.publicKey);
    if (verdict.ok) {
      copies.update(s.id, { state: 'verified', verifiedAt: nowIso() });
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
      copies.fail(s.id, err);
    }
  }
  return { records, bytes };
}
