/**
 * `coffer-recover extract --run ID --key FILE --to DIR`: writes a run's records (all, or a
 * selection) under DIR.
 *
 * Algorithm:
 *   1. Open the run (@coffer/archive openRun: format version, signature, --pin-signer, key unwrap).
 *   2. Read the whole index (digest-checked by the archive reader) and select records: --record
 *      names exactly (each must exist, else exit 5), or --include / --exclude name prefixes.
 *   3. Map each name to a path with recordPath() (safe-name.ts). When the run's records come from
 *      more than one (binding, namespace) pair, the path is prefixed with the encoded binding and
 *      namespace segments, so equal names from different sources cannot collide.
 *   4. Before writing anything: refuse two records mapping to one path, and (without --force) any
 *      path that exists; refuse symlinks inside DIR on the way (target.ts).
 *   5. Write records in index order through the archive's pipelined reader (each shard decrypted
 *      once, ahead, on worker threads): each record is handed over only once its SHA-384 matched
 *      (a 0.1 record over 32 MiB streams and is checked at its end; a 0.2 record over 4 MiB comes
 *      in parts, each of chunks checked against their keyed ids, its last part only once its
 *      SHA-384 matched), written to a temporary file with
 *      its mode (permission bits only) and mtime, and only then put in place under its name, up to
 *      8 records at once (the writer of @coffer/sources/files-writer, the engine's own).
 *      A 0.2 run's records are made of chunks in the job's packs, some stored by earlier runs of
 *      the job: the same reader follows those references (each chunk checked against its keyed
 *      id, each record against its SHA-384), so a missing or altered pack fails the records
 *      that need it like a damaged shard does.
 * Failure property: a record that fails verification never appears under its name; records
 * written before a failure stay, and each of them was verified.
 * A 0.2 run of more than HOLD_RECORDS records goes through steps 2-5 in passes over its index
 * instead of holding it (`extractInPasses`), with the same refusals, files and result.
 */

import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import {
  type IndexEntry,
  isChunkedManifest,
  type OpenedRun,
  openRun,
  type RecordToWrite,
  recordsToWrite,
} from '@coffer/archive';
import type { RecordBody } from '@coffer/sources/files-writer';
import { RecoverError } from '../errors.ts';
import { EXIT } from '../exit-codes.ts';
import type { Command, GlobalOptions } from './args.ts';
import { loadSecretKey } from './key-file.ts';
import { type Io, RawJsonList, type Reporter } from './output.ts';
import { progressFor } from './progress.ts';
import { quoteName, size } from './runs.ts';
import { encodeSegment, recordPath } from './safe-name.ts';
import { requireSignerTrust } from './signer-trust.ts';
import { openSource } from './store.ts';
import { ExtractTarget } from './target.ts';
import { toRecoverError } from './translate.ts';

type ExtractCommand = Extract<Command, { name: 'extract' }> & GlobalOptions;

/** Whether a record is selected by --record / --include / --exclude. */
export function selects(name: string, cmd: Pick<ExtractCommand, 'records' | 'include' | 'exclude'>): boolean {
  if (cmd.records.length > 0) return cmd.records.includes(name);
  if (cmd.include.length > 0 && !cmd.include.some((p) => name.startsWith(p))) return false;
  return !cmd.exclude.some((p) => name.startsWith(p));
}

/** The path segments of `entry` under DIR (step 3). */
export function entrySegments(
  entry: Pick<IndexEntry, 'name' | 'binding' | 'namespace'>,
  multiSource: boolean,
): string[] {
  const segs = recordPath(entry.name);
  return multiSource ? [encodeSegment(entry.binding), encodeSegment(entry.namespace), ...segs] : segs;
}

/** Runs extract; returns the exit code or throws RecoverError. */
export async function extract(cmd: ExtractCommand, report: Reporter, io: Io): Promise<number> {
  const store = openSource(cmd.store, io.env);
  const runLabel = `run ${cmd.run}`;
  await requireSignerTrust(store, cmd, runLabel);
  const key = await loadSecretKey(cmd.key, io, report);
  const progress = progressFor(io, 'extract', cmd);
  try {
    let run: Awaited<ReturnType<typeof openRun>>;
    const all: IndexEntry[] = [];
    const hold = holdLimit(io.env);
    let streamed = false;
    try {
      run = await openRun(store, {
        runId: cmd.run,
        ...(cmd.job !== undefined ? { job: cmd.job } : {}),
        ...(cmd.pinSigner !== undefined ? { pinSigner: cmd.pinSigner } : {}),
        secretKey: key.secretKey,
      });
      const doc = run.manifest.document;
      streamed = isChunkedManifest(doc) && doc.totals.records > hold;
      if (!streamed) for await (const entry of run.records()) all.push(entry);
    } catch (e) {
      throw toRecoverError(e, runLabel);
    }
    if (!run.manifest.signerPinned) {
      report.note(
        'the signer was not pinned; pass --pin-signer with the fingerprint you trust to require it',
      );
    }
    if (streamed) return await extractInPasses(run, cmd, report, io, progress);

    const selected = all.filter((e) => selects(e.name, cmd));
    refuseUnselected(cmd, runLabel, (name) => all.some((e) => e.name === name), selected.length);
    const sources = new Set(all.map((e) => JSON.stringify([e.binding, e.namespace])));
    const multiSource = sources.size > 1;

    const target = await ExtractTarget.open(cmd.to, { force: cmd.force });
    const plan = selected.map((entry) => ({ entry, segments: entrySegments(entry, multiSource) }));
    const seen = new Map<string, string>();
    for (const { entry, segments } of plan) {
      const rel = segments.join('/');
      const other = seen.get(rel);
      if (other !== undefined) throw collisionError(runLabel, other, entry.name, target.pathOf(segments));
      seen.set(rel, entry.name);
    }
    for (const { entry, segments } of plan) {
      const refusal = target.precheck(segments, `record ${quoteName(entry.name)}`);
      if (refusal) throw refusal;
    }

    const total = plan.reduce((n, p) => n + p.entry.size, 0);
    let done = 0;
    let count = 0;
    await writeRecords(run, target, plan, {
      signal: io.signal,
      runLabel,
      label: (entry) => `${runLabel}: record ${quoteName(entry.name)}`,
      onWritten: (entry) => {
        done += entry.size;
        count++;
        progress.update(done, total, `${count}/${plan.length} records`);
      },
    });
    const written = plan.map(({ entry, segments }) => writtenItem(target, entry, segments));
    progress.done();
    reportExtracted(report, run, target, {
      runLabel,
      multiSource,
      records: written.length,
      of: all.length,
      bytes: total,
      written,
    });
    return EXIT.OK;
  } finally {
    progress.done();
    key.secretKey.fill(0);
  }
}

/**
 * Runs with more records than this are extracted in passes over the index rather than by holding
 * it (`extractInPasses`); `COFFER_RECOVER_HOLD_RECORDS` sets another limit (0: always in passes).
 * Held, a record costs about 1 KiB of memory through the extract (its parsed entry, its path and
 * its report line); in passes, the index is read three times (about 6 µs a record each).
 */
export const HOLD_RECORDS = 50_000;

/** The hold limit from the environment (COFFER_RECOVER_HOLD_RECORDS), else HOLD_RECORDS. */
export function holdLimit(env: Record<string, string | undefined>): number {
  const v = env.COFFER_RECOVER_HOLD_RECORDS;
  if (v === undefined || v === '') return HOLD_RECORDS;
  if (!/^\d{1,15}$/.test(v)) {
    throw new RecoverError(
      'ERR_RECOVER_USAGE',
      `COFFER_RECOVER_HOLD_RECORDS must be a whole number of records (got ${JSON.stringify(v.slice(0, 40))})`,
    );
  }
  return Number(v);
}

/** One record of the result's `written` list. */
function writtenItem(target: ExtractTarget, entry: IndexEntry, segments: string[]) {
  return { name: entry.name, path: target.pathOf(segments), size: entry.size, sha384: entry.sha384 };
}

/**
 * What two records collide on: their binding, namespace and path segments (with one source, the
 * path alone decides, and the binding and namespace are the same for all), as a SHA-256, so a
 * pass over a large run holds 44 bytes a record rather than its path.
 */
function pathKey(entry: IndexEntry): string {
  return createHash('sha256')
    .update(JSON.stringify(entrySegments(entry, true)))
    .digest('base64');
}

/**
 * Extract of a run too large to hold (a 0.2 run over the hold limit), in three passes over its
 * index, each read as its frames open (`recordWindows`): the first learns what must be known of
 * every record before anything is written (the --record names, whether records come from several
 * sources, two records mapping to one path) and judges the index whole; the second checks every
 * path in the target (existing files, links on the way), unless the target is empty; the third
 * reads and writes, as the held path does. Every refusal the held path makes before writing,
 * this one makes before writing too, with the same code and message. Memory: the windows being
 * read and a SHA-256 a selected record for the first pass; with --json, the result's `written`
 * list (about 250 bytes a record).
 */
async function extractInPasses(
  run: OpenedRun,
  cmd: ExtractCommand,
  report: Reporter,
  io: Io,
  progress: ReturnType<typeof progressFor>,
): Promise<number> {
  const runLabel = `run ${cmd.run}`;
  const windows = async function* (): AsyncGenerator<readonly IndexEntry[]> {
    try {
      yield* run.recordWindows();
    } catch (e) {
      throw toRecoverError(e, runLabel);
    }
  };
  const survey = await surveyRecords(windows(), cmd);
  refuseUnselected(cmd, runLabel, (name) => survey.found.has(name), survey.selected);
  const { multiSource, collision } = survey;
  const target = await ExtractTarget.open(cmd.to, { force: cmd.force });
  if (collision !== null) {
    let other = '';
    for await (const w of windows()) other = w.find((e) => e.seq === collision.first)?.name ?? other;
    const path = target.pathOf(entrySegments(collision.second, multiSource));
    throw collisionError(runLabel, other, collision.second.name, path);
  }
  // Nothing can be in the way in an empty target (the usual recovery, into a new directory):
  // the pass of checks is skipped. One that fills up meanwhile is still refused name by name by
  // the writer (no-replace writes), as after the checks.
  if ((await readdir(target.root)).length > 0)
    for await (const w of windows())
      for (const e of w) {
        if (!selects(e.name, cmd)) continue;
        const refusal = target.precheck(entrySegments(e, multiSource), `record ${quoteName(e.name)}`);
        if (refusal) throw refusal;
      }

  const written: string[] = [];
  let done = 0;
  let writes = 0;
  const planned = async function* (): AsyncGenerator<readonly PlannedRecord[]> {
    for await (const w of windows()) {
      const items: PlannedRecord[] = [];
      for (const entry of w) {
        if (!selects(entry.name, cmd)) continue;
        const segments = entrySegments(entry, multiSource);
        items.push({ entry, segments });
        // In index order; printed only once every record was written.
        if (report.json) written.push(JSON.stringify(writtenItem(target, entry, segments)));
      }
      if (items.length > 0) yield items;
    }
  };
  await writeRecords(run, target, planned(), {
    signal: io.signal,
    runLabel,
    label: (entry) => `${runLabel}: record ${quoteName(entry.name)}`,
    onWritten: (entry) => {
      done += entry.size;
      writes++;
      progress.update(done, survey.bytes, `${writes}/${survey.selected} records`);
    },
  });
  progress.done();
  reportExtracted(report, run, target, {
    runLabel,
    multiSource,
    records: survey.selected,
    of: survey.count,
    bytes: survey.bytes,
    written: new RawJsonList(written),
  });
  return EXIT.OK;
}

/**
 * extractInPasses' first pass: what must be known of every record before anything is written
 * (the --record names found, whether records come from several sources, the first two selected
 * records that map to one path), with the counts; reading to the end judges the index whole.
 */
async function surveyRecords(windows: AsyncIterable<readonly IndexEntry[]>, cmd: ExtractCommand) {
  const found = new Set<string>();
  const sources = new Set<string>();
  const seen = new Map<string, number>();
  let collision: { first: number; second: IndexEntry } | null = null;
  let count = 0;
  let selected = 0;
  let bytes = 0;
  for await (const w of windows)
    for (const e of w) {
      count++;
      sources.add(JSON.stringify([e.binding, e.namespace]));
      if (cmd.records.includes(e.name)) found.add(e.name);
      if (!selects(e.name, cmd)) continue;
      selected++;
      bytes += e.size;
      const key = pathKey(e);
      const other = seen.get(key);
      if (other === undefined) seen.set(key, e.seq);
      else collision ??= { first: other, second: e };
    }
  return { found, multiSource: sources.size > 1, collision, count, selected, bytes };
}

/** ERR_RECOVER_NOT_FOUND for a --record no record has, or a selection matching nothing. */
function refuseUnselected(
  cmd: ExtractCommand,
  runLabel: string,
  exists: (name: string) => boolean,
  selected: number,
): void {
  for (const name of cmd.records) {
    if (!exists(name)) {
      throw new RecoverError('ERR_RECOVER_NOT_FOUND', `${runLabel}: no record named ${quoteName(name)}`, {
        object: name,
      });
    }
  }
  if (selected === 0 && (cmd.include.length > 0 || cmd.exclude.length > 0)) {
    throw new RecoverError('ERR_RECOVER_NOT_FOUND', `${runLabel}: no record matches --include/--exclude`);
  }
}

/** ERR_RECOVER_EXISTS for two records (`first`, `second`) mapping to one `path`. */
function collisionError(runLabel: string, first: string, second: string, path: string): RecoverError {
  return new RecoverError(
    'ERR_RECOVER_EXISTS',
    `${runLabel}: records ${quoteName(first)} and ${quoteName(second)} both map to ${path}; extract them separately with --record`,
    { object: second },
  );
}

/** The extract's result: `records` of `of` written, `bytes` in all, each listed in `written` (--json). */
function reportExtracted(
  report: Reporter,
  run: OpenedRun,
  target: ExtractTarget,
  r: { runLabel: string; multiSource: boolean; records: number; of: number; bytes: number; written: unknown },
): void {
  const { job, runId } = run.manifest.document;
  report.result(
    {
      job,
      runId,
      signer: run.manifest.signer,
      signerPinned: run.manifest.signerPinned,
      to: target.root,
      layout: r.multiSource ? 'binding/namespace/name' : 'name',
      records: r.records,
      bytes: r.bytes,
      written: r.written,
    },
    [
      `${r.runLabel} (job ${job}): extracted ${r.records} of ${r.of} records, ${size(r.bytes)}, to ${target.root}`,
      ...(r.multiSource
        ? ['  records come from several sources: paths are <binding>/<namespace>/<name>']
        : []),
    ],
  );
}

/**
 * A 0.1 run's records up to this size come whole from the archive's pipelined reader; bigger ones
 * stream through `readRecord`. A 0.2 run's come through the pipelined reader whatever their size
 * (in parts over PART_BYTES).
 */
const MEMORY_RECORD_MAX = 32 * 1024 * 1024;
/** Writes in flight at once, and the bytes they may hold (small files wait on the filesystem). */
const WRITE_CONCURRENCY = 8;
const WRITE_BUDGET_BYTES = 96 * 1024 * 1024;
/**
 * Records over this size are handed over in parts as they are read (`partBytes`), each part
 * written and released before the record's SHA-384 is known (the file is put in place only
 * after it matched): a 28 MiB record spanning four packs no longer holds all four buffers.
 */
const PART_BYTES = 4 * 1024 * 1024;
/** In-memory bodies of several pieces up to this size are joined (one synchronous write). */
const JOIN_MAX = 1024 * 1024;

interface PlannedRecord {
  entry: IndexEntry;
  segments: string[];
}

interface WriteHooks {
  signal: AbortSignal | undefined;
  /** Names the run in a failure that belongs to no record (the index failing to read again). */
  runLabel: string;
  label: (entry: IndexEntry) => string;
  onWritten: (entry: IndexEntry) => void;
}

/**
 * Writes `plan` (index order) under `target`: records up to MEMORY_RECORD_MAX (a 0.2 run: every
 * record) through `readRecords` (shards decrypted ahead on the codec workers, each record handed
 * over only once its SHA-384 matched, or in parts over PART_BYTES), up to WRITE_CONCURRENCY writes
 * at once; bigger records stream through `readRecord` (checked at the end; the writer discards the
 * temporary file when it throws). Stops
 * at the first failure, waits for the writes in flight, and throws it as a RecoverError: records
 * written before it stay, and each of them was verified.
 */
async function writeRecords(
  run: OpenedRun,
  target: ExtractTarget,
  plan: readonly PlannedRecord[] | AsyncIterable<readonly PlannedRecord[]>,
  hooks: WriteHooks,
): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  let inFlightBytes = 0;
  // A 0.2 run hands a record over PART_BYTES in parts, so none has to stream on its own.
  const inMemoryMax = isChunkedManifest(run.manifest.document) ? Number.POSITIVE_INFINITY : MEMORY_RECORD_MAX;
  let failure: { error: unknown; entry: IndexEntry | undefined } | undefined;
  const interrupted = () =>
    new RecoverError('ERR_RECOVER_INTERRUPTED', 'interrupted; the record being written was discarded');
  const start = (item: PlannedRecord, body: RecordBody, release: () => void) => {
    const { entry } = item;
    inFlightBytes += entry.size;
    const task = target
      .write(item.segments, body, metadataOf(entry), `record ${quoteName(entry.name)}`)
      .then(
        () => hooks.onWritten(entry),
        (error: unknown) => {
          failure ??= { error, entry };
        },
      )
      .finally(() => {
        release();
        inFlightBytes -= entry.size;
        inFlight.delete(task);
      });
    inFlight.add(task);
  };
  const room = async (size: number) => {
    while (
      inFlight.size >= WRITE_CONCURRENCY ||
      (inFlight.size > 0 && inFlightBytes + size > WRITE_BUDGET_BYTES)
    )
      await Promise.race(inFlight);
  };
  /**
   * Reads `items` (in index order; an array, or windows of them) through `readRecords` and starts
   * each record's write as it is handed over. The records handed to the reader and not yet over
   * wait in `queue`, so the one a failure belongs to is known: the record whose parts were still
   * coming, else the next one.
   */
  const readAndWrite = async (items: readonly PlannedRecord[] | AsyncIterable<readonly PlannedRecord[]>) => {
    // The windows handed to the reader, oldest first, and the place of the next record to come
    // in the first (shift() on one list of 200,000 items was measured to double a held
    // extract's CPU; a window is dropped once read past).
    const queue: (readonly PlannedRecord[])[] = isItemArray(items) ? [items] : [];
    let at = 0;
    const upcoming = (): PlannedRecord | undefined => {
      while (queue.length > 0 && at >= queue[0]!.length) {
        queue.shift();
        at = 0;
      }
      return queue[0]?.[at];
    };
    let current: PlannedRecord | undefined;
    let last: RecordToWrite | undefined;
    const opts = { maxRecordBytes: inMemoryMax, partBytes: PART_BYTES };
    try {
      const reads = run.readRecords(
        isItemArray(items)
          ? items.map((p) => p.entry)
          : (async function* () {
              for await (const w of items) {
                queue.push(w);
                yield w.map((p) => p.entry);
              }
            })(),
        opts,
      );
      for await (const rec of recordsToWrite(reads, { signal: hooks.signal, interrupted })) {
        last = rec;
        current = upcoming()!;
        at++;
        await room(rec.entry.size);
        if (failure !== undefined || hooks.signal?.aborted) {
          rec.release();
          if (failure === undefined) failure = { error: interrupted(), entry: rec.entry };
          break;
        }
        const body = rec.parts === null ? bodyOf(rec.pieces!, rec.entry.size) : rec.parts.body();
        start(current, body, rec.release);
      }
    } catch (error) {
      const at = last?.parts != null && !last.parts.complete ? current : (upcoming() ?? current);
      failure ??= { error, entry: at?.entry };
    }
  };
  try {
    // Windows (extract in passes): a 0.2 run, every record through the pipelined reader.
    if (!isItemArray(plan)) await readAndWrite(plan);
    else
      for (let i = 0; i < plan.length && failure === undefined; ) {
        if (plan[i]!.entry.size > inMemoryMax) {
          const item = plan[i++]!;
          await room(Number.POSITIVE_INFINITY); // alone: its body streams
          if (failure !== undefined) break;
          if (hooks.signal?.aborted) {
            failure = { error: interrupted(), entry: item.entry };
            break;
          }
          start(item, guarded(run.readRecord(item.entry), hooks.signal, interrupted), () => {});
          await Promise.all(inFlight);
          continue;
        }
        let end = i;
        while (end < plan.length && plan[end]!.entry.size <= inMemoryMax) end++;
        const slice = plan.slice(i, end);
        i = end;
        await readAndWrite(slice);
      }
  } finally {
    await Promise.all(inFlight);
  }
  if (failure !== undefined)
    throw toRecoverError(
      failure.error,
      failure.entry === undefined ? hooks.runLabel : hooks.label(failure.entry),
    );
}

function isItemArray(
  items: readonly PlannedRecord[] | AsyncIterable<readonly PlannedRecord[]>,
): items is readonly PlannedRecord[] {
  return Array.isArray(items);
}

/** One record's pieces as a body for the writer (views of the reader's buffers, or one joined). */
function bodyOf(pieces: readonly Uint8Array[], size: number): RecordBody {
  if (pieces.length === 0) return new Uint8Array(0);
  if (pieces.length === 1) return pieces[0]!;
  if (size <= JOIN_MAX) return Buffer.concat(pieces, size);
  return (async function* () {
    yield* pieces;
  })();
}

async function* guarded(
  source: AsyncIterable<Uint8Array>,
  signal: AbortSignal | undefined,
  interrupted: () => RecoverError,
): AsyncIterable<Uint8Array> {
  for await (const chunk of source) {
    if (signal?.aborted) throw interrupted();
    yield chunk;
  }
}

/**
 * The writer's metadata from a record's: permission bits (never setuid/setgid/sticky) and the
 * mtime (`mtimeMs` as the files connector records it, or an ISO `mtime`).
 */
function metadataOf(entry: IndexEntry): { mode?: number; mtimeMs?: number } {
  const { mode, mtimeMs, mtime } = entry.metadata as { mode?: unknown; mtimeMs?: unknown; mtime?: unknown };
  const out: { mode?: number; mtimeMs?: number } = {};
  if (typeof mode === 'number' && Number.isInteger(mode) && mode >= 0) out.mode = mode & 0o777;
  if (typeof mtimeMs === 'number' && Number.isFinite(mtimeMs)) out.mtimeMs = mtimeMs;
  else if (typeof mtime === 'string') {
    const t = Date.parse(mtime);
    if (!Number.isNaN(t)) out.mtimeMs = t;
  }
  return out;
}
