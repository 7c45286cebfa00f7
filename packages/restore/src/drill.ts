/**
 * Restore drills: restore a run into a scratch target, read it back through a fresh connector,
 * compare every record's SHA-384 with the archive's (a redis key whose DUMP differs is compared by
 * value, drill-redis.ts: DUMP bytes are not canonical), and return evidence for the engine to record
 * (`drill.run`, `GET /admin/drill-all`, `GET /admin/drill-evidence`, `GET /admin/rto`).
 * docs/restore.md "Drills" is normative.
 *
 * Scratch targets: files -> a fresh directory under `scratch.dir`; sqlite -> a fresh database file
 * there; redis -> the keys under a random `coffer-drill:<id>:` prefix in `scratch.redis`; s3 -> a
 * random `coffer-drill-<id>/` prefix in `scratch.s3`. The scratch target is removed afterwards.
 *
 * Memory: records come from the archive's pipelined reader (a big one in parts, or staged in a file
 * while it verifies) and are hashed back as streams, so a drill of a run holding a file of many GiB
 * stays within the archive reader's shard buffers.
 *
 * Security-relevant behaviour: only bytes that verified against the archive are written; the
 * scratch target never overlaps a source (a fresh directory or a random key prefix); evidence
 * holds counts, sizes, timings and record names of mismatches only, never bytes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type IndexEntry, isArchiveError, isChunkedManifest, type OpenedRun, openRun } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import {
  isSkipped,
  openSource,
  redisKeyToName,
  redisNameToKey,
  type S3SourceConfig,
  type SourceConfig,
  type SourceConnector,
} from '@coffer/sources';
import type { Redis } from 'ioredis';
import { redisValueMatches } from './drill-redis.ts';
import { removeRedisScratch, removeS3Scratch } from './drill-scratch.ts';
import { codeOf } from './errors.ts';
import { type FedRecord, FileStager, feedRecords, MEMORY_STAGE } from './internal/record-feed.ts';
import { PART_BYTES } from './internal/verify-records.ts';
import { readVerified } from './plan.ts';
import { unsafeFileName } from './target.ts';

/** ioredis, loaded by the first redis drill rather than with this package (about 2.3 MiB of heap). */
async function redisClass(): Promise<typeof import('ioredis').Redis> {
  return (await import('ioredis')).Redis;
}

export interface DrillScratch {
  /** Directory for files and sqlite drills (a fresh sub-directory is made and removed). */
  dir: string;
  /**
   * Redis drills: the server to restore into (keys under a random prefix, removed afterwards).
   * `prefix` (default none) goes before that random prefix, so a caller that records it before the
   * drill can remove a crashed drill's keys later (removeRedisScratch).
   */
  redis?: { url: string; db?: number; prefix?: string };
  /** S3 drills: a bucket to restore into (objects under a random prefix, removed afterwards). */
  s3?: Omit<S3SourceConfig, 'type' | 'binding'>;
}

export interface DrillOptions {
  store: ObjectStore;
  runId: string;
  /** The run whose archive holds `runId`'s data, when it is another (an unchanged run). */
  archiveRunId?: string;
  job?: string;
  operationalSecretKey: Uint8Array;
  signerPublicKey?: Uint8Array;
  scratch: DrillScratch;
  /** What started it (`manual`, `schedule`). */
  trigger?: string;
  now?: () => Date;
}

export interface DrillEvidence {
  kind: 'coffer-drill-evidence';
  v: 1;
  id: string;
  job: string | null;
  runId: string;
  /** The run whose archive was restored: `runId`, or the run an unchanged run points to. */
  archiveRunId: string;
  sourceType: string | null;
  trigger: string;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  timings: { restoreMs: number; compareMs: number; cleanupMs: number };
  records: number;
  bytes: number;
  matched: number;
  /** Expired keys and names a target cannot hold: not restored, not counted as mismatches. */
  notRestorable: number;
  mismatched: Array<{ name: string; reason: string }>;
  verdict: 'pass' | 'fail' | 'error';
  reason?: string;
}

interface Scratch {
  config: SourceConfig;
  /** Archive name -> name in the scratch target (null: cannot be restored there). */
  map(name: string): string | null;
  /**
   * A second look at a restored record whose bytes differ from the archive's (redis: a DUMP is not
   * canonical, drill-redis.ts): true when its value is nonetheless the archived one.
   */
  equivalent?(name: string, archived: Uint8Array): Promise<boolean>;
  cleanup(): Promise<void>;
}

/**
 * The drill's restore step: every record of `run` the scratch target can hold, written through
 * `writer` (counted in `ev`), as an apply's phase two reads them (internal/record-feed.ts). Returns
 * the records written, by their scratch name. Throws the archive's error for a record that does not
 * verify (the drill then ends with `error`).
 */
async function restoreIntoScratch(
  run: OpenedRun,
  scratch: Scratch,
  writer: SourceConnector,
  stagingDir: string,
  ev: DrillEvidence,
): Promise<Map<string, IndexEntry>> {
  const expected = new Map<string, IndexEntry>();
  const names: string[] = [];
  const entries: IndexEntry[] = [];
  for await (const entry of run.records()) {
    ev.records++;
    const name = scratch.map(entry.name);
    if (name === null) ev.notRestorable++;
    else {
      names.push(name);
      entries.push(entry);
    }
  }
  // Through the archive's pipelined reader, as an apply's phase two (internal/record-feed.ts):
  // each record is handed over only once it verified; a files scratch target of a 0.2 run takes
  // a big record in parts (a body that fails instead of ending when the record does not verify,
  // which the files writer then never puts in place), any other record over MEMORY_STAGE is
  // staged in a 0600 file while it verifies. A record that does not verify ends the drill
  // (`error`). One write at a time, in archive order (a sqlite target's schema record first);
  // each write starts before the next record is asked for, since asking is what feeds the parts
  // of a record in parts to the write (@coffer/archive `recordsToWrite`).
  const inParts = scratch.config.type === 'files' && isChunkedManifest(run.manifest.document);
  const stager = new FileStager(stagingDir);
  const write = async (name: string, rec: FedRecord): Promise<void> => {
    try {
      const r = await writer.write(name, rec.body(), { ...rec.entry.metadata });
      if (!r.written) {
        ev.notRestorable++;
        return;
      }
    } finally {
      await rec.release();
    }
    ev.bytes += rec.entry.size;
    expected.set(name, rec.entry);
  };
  let writing: Promise<void> | null = null;
  try {
    const feed = feedRecords(run, entries, {
      memoryLimit: inParts ? Number.POSITIVE_INFINITY : MEMORY_STAGE,
      stager,
      ownBodies: scratch.config.type !== 'files',
      ...(inParts ? { partBytes: PART_BYTES } : {}),
    });
    let i = 0;
    for await (const rec of feed.records) {
      await writing;
      writing = write(names[i++]!, rec);
      // Awaited above or below; until then a failure must not count as unhandled.
      writing.catch(() => undefined);
    }
    await writing;
  } finally {
    await writing?.catch(() => undefined);
    await stager.close();
  }
  return expected;
}

async function scratchFor(sourceType: string, scratch: DrillScratch, id: string): Promise<Scratch> {
  switch (sourceType) {
    case 'files': {
      const dir = await mkdtemp(join(scratch.dir, 'coffer-drill-'));
      return {
        config: { type: 'files', root: join(dir, 'tree'), binding: 'drill' },
        map: (n) => (unsafeFileName(n) === null ? n : null),
        cleanup: () => rm(dir, { recursive: true, force: true }),
      };
    }
    case 'sqlite': {
      const dir = await mkdtemp(join(scratch.dir, 'coffer-drill-'));
      return {
        config: { type: 'sqlite', path: join(dir, 'drill.sqlite'), workDir: dir, binding: 'drill' },
        map: (n) => n,
        cleanup: () => rm(dir, { recursive: true, force: true }),
      };
    }
    case 'redis': {
      const r = scratch.redis;
      if (r === undefined) throw new Error('no scratch redis configured');
      const prefix = `${r.prefix ?? ''}coffer-drill:${id}:`;
      const p = Buffer.from(prefix);
      let compare: Redis | null = null;
      return {
        config: { type: 'redis', url: r.url, db: r.db ?? 0, prefix, binding: 'drill', replace: true },
        map: (n) => {
          const key = redisNameToKey(n);
          return key === null ? null : redisKeyToName(Buffer.concat([p, key]));
        },
        equivalent: async (name, archived) => {
          const key = redisNameToKey(name);
          if (key === null) return false;
          compare ??= new (await redisClass())(r.url, { db: r.db ?? 0, maxRetriesPerRequest: 2 });
          // The temporary key lies under the scratch prefix, so the cleanup below also removes it.
          return redisValueMatches(compare, key, archived, `${prefix}~compare:`);
        },
        cleanup: async () => {
          compare?.disconnect();
          // The scheduler's own clean-up of a crashed drill's keys, the same way (prefix escaped).
          await removeRedisScratch(r.url, r.db ?? 0, prefix);
        },
      };
    }
    case 's3': {
      const s = scratch.s3;
      if (s === undefined) throw new Error('no scratch bucket configured');
      const prefix = `${s.prefix ? `${s.prefix.replace(/\/+$/, '')}/` : ''}coffer-drill-${id}`;
      const config: S3SourceConfig = { ...s, type: 's3', prefix, binding: 'drill' };
      return {
        config,
        map: (n) => n,
        cleanup: async () => {
          await removeS3Scratch(config);
        },
      };
    }
    default:
      throw new Error('unsupported source type');
  }
}

/**
 * Runs one drill. Never throws: a run that cannot be read, a scratch target that cannot be made
 * or any fault gives `verdict: 'error'` with a reason; a restored record whose bytes differ gives
 * `verdict: 'fail'`.
 */
export async function runDrill(options: DrillOptions): Promise<DrillEvidence> {
  const now = options.now ?? (() => new Date());
  const started = now();
  const t0 = performance.now();
  const id = randomBytes(8).toString('hex');
  const ev: DrillEvidence = {
    kind: 'coffer-drill-evidence',
    v: 1,
    id: `drl_${id}`,
    job: options.job ?? null,
    runId: options.runId,
    archiveRunId: options.archiveRunId ?? options.runId,
    sourceType: null,
    trigger: options.trigger ?? 'manual',
    startedAt: started.toISOString(),
    finishedAt: started.toISOString(),
    durationMs: 0,
    timings: { restoreMs: 0, compareMs: 0, cleanupMs: 0 },
    records: 0,
    bytes: 0,
    matched: 0,
    notRestorable: 0,
    mismatched: [],
    verdict: 'error',
  };
  const done = (): DrillEvidence => {
    ev.finishedAt = now().toISOString();
    ev.durationMs = Math.round(performance.now() - t0);
    return ev;
  };
  let scratch: Scratch | null = null;
  let writer: SourceConnector | null = null;
  let reader: SourceConnector | null = null;
  try {
    const run = await openRun(options.store, {
      runId: ev.archiveRunId,
      secretKey: options.operationalSecretKey,
      ...(options.job === undefined ? {} : { job: options.job }),
      ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
    });
    const doc = run.manifest.document;
    ev.job = doc.job;
    ev.sourceType = doc.source.type;
    try {
      scratch = await scratchFor(doc.source.type, options.scratch, id);
    } catch (e) {
      ev.reason = `no scratch target for a ${doc.source.type} drill`;
      void e;
      return done();
    }
    // Restore.
    const tRestore = performance.now();
    writer = openSource(scratch.config);
    const expected = await restoreIntoScratch(run, scratch, writer, options.scratch.dir, ev);
    await writer.close();
    writer = null;
    ev.timings.restoreMs = Math.round(performance.now() - tRestore);
    // Compare through a fresh connector on the scratch target.
    const tCompare = performance.now();
    reader = openSource(scratch.config);
    const seen = new Set<string>();
    for await (const item of reader.enumerate()) {
      if (isSkipped(item)) continue;
      const entry = expected.get(item.name);
      if (entry === undefined) continue;
      seen.add(item.name);
      const h = createHash('sha384');
      for await (const piece of await reader.read(item.name)) h.update(piece);
      if (`sha384:${h.digest('hex')}` === entry.sha384) ev.matched++;
      // Only a redis value (held whole by redis and its connector anyway) is read whole here.
      else if (scratch.equivalent && (await scratch.equivalent(item.name, await readVerified(run, entry))))
        ev.matched++;
      else ev.mismatched.push({ name: entry.name, reason: 'restored bytes differ from the archive' });
    }
    for (const [name, entry] of expected)
      if (!seen.has(name))
        ev.mismatched.push({ name: entry.name, reason: 'missing from the scratch target after restore' });
    ev.timings.compareMs = Math.round(performance.now() - tCompare);
    ev.verdict = ev.mismatched.length === 0 ? 'pass' : 'fail';
    if (ev.verdict === 'fail') ev.reason = `${ev.mismatched.length} record(s) differ after restore`;
  } catch (e) {
    ev.verdict = 'error';
    ev.reason = isArchiveError(e) ? `run cannot be read back: ${e.reason}` : `drill failed (${codeOf(e)})`;
  } finally {
    await writer?.close().catch(() => undefined);
    await reader?.close().catch(() => undefined);
    const tClean = performance.now();
    if (scratch !== null) await scratch.cleanup().catch(() => undefined);
    ev.timings.cleanupMs = Math.round(performance.now() - tClean);
  }
  return done();
}
