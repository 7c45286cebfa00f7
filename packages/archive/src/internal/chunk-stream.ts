/**
 * The pipelined read of a 0.2 run's records (docs/archive-format.md §12.7 steps 8-9), shared by
 * `readRecords` and the full verify.
 *
 * Why a pipeline rather than chunk by chunk on the calling thread: a chunk id is an HMAC of the
 * chunk and a record's digest a SHA-384 of the record, so a read hashes every byte twice after
 * the pack's own digest, decryption and decompression. Done on the calling thread, those hashes
 * bounded a restore (the codec worker sat idle half the time) and every pack opened into a fresh
 * buffer left the garbage collector a pack's worth of work. Here:
 * - the records' chunk uses are planned first, in record order, into pack *visits*: consecutive
 *   uses of a pack that stays among the PACK_WINDOW most recently used share one visit, so a pack
 *   whose chunks interleave with a few others is opened once, and one that comes back much later
 *   is opened again (memory stays bounded by the window, not by the run);
 * - each visit opens its pack on a codec worker into a reused shared buffer, and that worker also
 *   checks every chunk the visit uses against its signed id (ChunkCheck), a few visits ahead;
 * - the records' SHA-384s run on the record-hash thread, one batched request per visit, reading
 *   the same shared buffer in place;
 * - a record is handed over only once its digest matched, as views of the visit buffers, which
 *   return to the pool when the consumer releases the record (readRecords' contract); without
 *   `digest` (`checkRecordDigest: false`), once every chunk it uses matched its signed id.
 * Failures surface in stream order: records before a bad chunk or pack are handed over first.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import type { ChunkRef, IndexEntry, RecordRead } from '../types.ts';
import { BufferPool } from './buffer-pool.ts';
import type { ChunkKeys } from './chunk-keys.ts';
import type { ChunkLocation, ChunkMap, PackLine } from './chunked-index.ts';
import { type FrameCodec, inlineCodec, laneCodec } from './codec-pool.ts';
import { openPack } from './pack-codec.ts';
import { BEGIN, END, type HashDigest, recordHasher } from './record-hash.ts';
import { isWindowed } from './streamed-index.ts';

/** Packs a plan keeps visiting before it opens one again (the live visits at any point). */
const PACK_WINDOW = 4;
/** Visits kept opened but not yet reached, beyond the codec's parallelism (measured: more only costs memory). */
const EXTRA_AHEAD = 0;
/** Windows of a windowed read planned at most (ChunkedRunReader's streamed verify: 4,096 records each). */
const PLANS_AHEAD = 4;
/** Hash requests in flight before the oldest one is waited for. */
const HASH_QUEUE = 1;
/** SHA-384 of nothing: the digest of an empty record, which has no chunk to hash. */
const EMPTY_SHA384 =
  'sha384:38b060a751ac96384cd9327eb1b1e36a21fdb71114be07434c0cc7bf63f6e1da274edebfe76f65fbd51ad2f14898b95b';

export interface ChunkStreamContext {
  store: ObjectStore;
  codec: FrameCodec;
  keys: ChunkKeys;
  job: string;
  runId: string;
  map: ChunkMap;
  /** Where a chunk is, describing undescribed packs when no index names it (undefined: missing). */
  locate(ref: ChunkRef): Promise<ChunkLocation | undefined>;
  /** Called once per pack the first time one of its visits opened (digest, tag and chunks checked). */
  onPackOpened?: (pack: string, plainSize: number) => void;
}

interface Visit {
  pack: string;
  line: PackLine;
  /** Chunk uses not consumed yet. */
  uses: number;
  /** Hash requests and handed-over records still reading the buffer. */
  holds: number;
  /**
   * The chunks to check, by offset (a chunk used twice is checked once): the record's own chunk
   * reference, whose length is the location's. Dropped once the visit's open started.
   */
  checks: Map<number, ChunkRef> | null;
  buf: Uint8Array | null;
  plain: Promise<Uint8Array> | null;
}

/**
 * The chunk uses of a window of records, in record order, as flat arrays: record r's uses are
 * `first[r]` up to `first[r + 1]`; use u is `length[u]` bytes at `offset[u]` in visit `visit[u]`
 * (an index into the stream's visits), or, with `visit[u]` -1, the error `errors.get(u)`. An
 * array of use objects per record cost about 240 bytes per single-chunk record (the list, grown by
 * push, keeps room for 17), 48 MiB for a 200,000-record run held for the whole read; these cost
 * 16 bytes per use.
 */
interface Plan {
  entries: readonly IndexEntry[];
  first: Uint32Array;
  visit: Int32Array;
  offset: Uint32Array;
  length: Uint32Array;
  errors: Map<number, ArchiveError>;
}

interface Pending {
  entry: IndexEntry;
  key: number;
  /** The pieces (and the visits they hold) not handed over yet: all, or since the last part. */
  pieces: Uint8Array[];
  visits: Set<Visit>;
  bytes: number;
  /** Parts handed over so far (a record handed over in parts). */
  parts: number;
}

/**
 * Plans windows of records one after another into one list of pack visits (see the module
 * comment): a pack still among the PACK_WINDOW most recently used continues its visit across a
 * window's end, unless that visit already started (its checks went to the worker), in which case
 * the pack gets a new visit.
 */
function planner(
  ctx: ChunkStreamContext,
  visits: Visit[],
): (entries: readonly IndexEntry[]) => Promise<Plan> {
  // Visit indexes by pack, most recently used last.
  const recent = new Map<string, number>();
  const run = `${ctx.job}/${ctx.runId}`;
  return async (entries) => {
    let total = 0;
    for (const entry of entries) total += entry.chunks!.length;
    const out: Plan = {
      entries,
      first: new Uint32Array(entries.length + 1),
      visit: new Int32Array(total),
      offset: new Uint32Array(total),
      length: new Uint32Array(total),
      errors: new Map(),
    };
    const { errors } = out;
    let u = 0;
    const fail = (error: ArchiveError) => {
      out.visit[u] = -1;
      errors.set(u++, error);
    };
    for (let r = 0; r < entries.length; r++) {
      out.first[r] = u;
      for (const ref of entries[r]!.chunks!) {
        const loc = ctx.map.chunks.get(ref.id) ?? (await ctx.locate(ref));
        if (loc === undefined) {
          fail(
            new ArchiveError('ERR_ARCHIVE_CHUNK_MISSING', {
              object: layout.packIndexPrefix(ctx.job, ctx.keys.keyId),
              detail: `chunk ${ref.id} of run ${run}`,
            }),
          );
          continue;
        }
        const line = ctx.map.packs.get(loc.pack);
        if (line === undefined || loc.length !== ref.length) {
          fail(
            new ArchiveError(line === undefined ? 'ERR_ARCHIVE_PACK_MISSING' : 'ERR_ARCHIVE_CHUNK_TAMPERED', {
              object: layout.pack(ctx.job, ctx.keys.keyId, loc.pack),
              detail: line === undefined ? 'no pack index describes it' : `chunk ${ref.id}: length differs`,
            }),
          );
          continue;
        }
        let i = recent.get(loc.pack);
        if (i === undefined || visits[i]!.checks === null) {
          i = visits.length;
          visits.push({ pack: loc.pack, line, uses: 0, holds: 0, checks: new Map(), buf: null, plain: null });
          if (!recent.delete(loc.pack) && recent.size >= PACK_WINDOW)
            recent.delete(recent.keys().next().value!);
        } else recent.delete(loc.pack);
        recent.set(loc.pack, i);
        const visit = visits[i]!;
        const checks = visit.checks!;
        const known = checks.get(loc.offset);
        if (known === undefined) checks.set(loc.offset, ref);
        else if (known.id !== ref.id) {
          // Two signed ids for the same bytes: one of them is not what the pack holds.
          fail(
            new ArchiveError('ERR_ARCHIVE_CHUNK_TAMPERED', {
              object: layout.pack(ctx.job, ctx.keys.keyId, loc.pack),
              detail: `chunk ${ref.id} of run ${run}`,
            }),
          );
          continue;
        }
        visit.uses++;
        out.visit[u] = i;
        out.offset[u] = loc.offset;
        out.length[u++] = loc.length;
      }
    }
    out.first[entries.length] = u;
    return out;
  };
}

/**
 * Reads `entries` (records of the run, in index order) and yields each once its chunks and its
 * SHA-384 verified. `keep` false (a verify): the pieces are dropped at once and never handed out.
 * `partBytes` (with `keep`): a record larger than that is handed over in parts (RecordRead.part),
 * a part whenever the record's pieces not handed over reach `partBytes` and its next chunk is in
 * another visit; its last part only once its SHA-384 matched.
 *
 * `entries` may come in windows (an index read as its frames open: a streamed verify,
 * `recordWindows`): the next window is planned before the one before it is read, so the pipeline
 * runs on across a window's end, and more (up to PLANS_AHEAD) while a visit about to start is the
 * last one planned (`planAhead`), so the records held stay a few windows.
 */
export async function* streamRecords(
  ctx: ChunkStreamContext,
  entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
  keep: boolean,
  partBytes = Number.POSITIVE_INFINITY,
  digest = true,
): AsyncGenerator<RecordRead> {
  const visits: Visit[] = [];
  const plan = planner(ctx, visits);
  const windows = isWindowed(entries) ? entries[Symbol.asyncIterator]() : null;
  // The windows planned and not yet read, the one being read first.
  const plans: Plan[] = windows === null ? [await plan(entries as readonly IndexEntry[])] : [];
  let exhausted = windows === null;
  /**
   * Plans windows ahead of the read: always the next one (so the pipeline runs on across a
   * window's end), and more while the visit about to start would be the last one planned. A
   * window may continue that visit only while it has not started: a pack holding many windows'
   * records (200,000 small files: about 8,000 a pack) would otherwise be opened once per window.
   * At most PLANS_AHEAD windows are held; past that a pack is opened again.
   */
  const planAhead = async (vi: number) => {
    while (
      !exhausted &&
      (plans.length < 2 || (vi + ahead >= visits.length - 1 && plans.length < PLANS_AHEAD))
    ) {
      const n = await windows!.next();
      if (n.done === true) exhausted = true;
      else plans.push(await plan(n.value));
    }
  };
  // Buffers are sized for the largest pack: of the whole plan when it is one, else of every pack
  // the job's indexes describe (a window planned later may visit any of them). A pack described
  // later (scanned, its index lost) that is larger gets a pool of its own size from then on.
  let size = 1;
  if (windows === null) for (const v of visits) size = Math.max(size, v.line.size, v.line.plainSize);
  else for (const line of ctx.map.packs.values()) size = Math.max(size, line.size, line.plainSize);
  // Shared whenever a worker opens or hashes: a plain buffer would be copied there and back. The
  // pool never makes the reader wait (its bound is the plan's window plus what the consumer
  // holds), so a consumer holding records cannot deadlock it; released buffers are reused. (Sizing
  // each buffer for its own pack instead was tried: reuse got worse and peak memory rose.)
  const shared = ctx.codec !== inlineCodec;
  let pool = new BufferPool({ size, count: Number.MAX_SAFE_INTEGER, shared });
  const pools = [pool];
  const lender = new Map<Uint8Array, BufferPool>();
  // Without `digest` (a second read of records a full read already checked, RecordsReadOptions
  // checkRecordDigest) no record is hashed: each is handed over once its chunks' ids matched.
  const hasher = digest ? recordHasher(shared) : null;
  const opened = new Set<string>();
  // With no record to hash, the record-hash thread's core is free: this thread opens every
  // (workers + 1)-th visit itself, as the writer's read-back does (an 8 MiB pack holds its event
  // loop ~50 ms), one more visit ahead so both lanes have one.
  const lanes = hasher === null && shared ? ctx.codec.parallel + 1 : 1;
  const ahead = ctx.codec.parallel + EXTRA_AHEAD + (lanes > 1 ? 1 : 0);
  await planAhead(0);
  /** The window after the one just read (planning on: a window of empty records started none). */
  const nextWindow = async (): Promise<Plan | undefined> => {
    plans.shift();
    await planAhead(started);
    return plans[0];
  };
  let started = 0;
  const start = (v: Visit) => {
    const need = Math.max(v.line.size, v.line.plainSize);
    if (need > pool.size) {
      pool = new BufferPool({ size: need, count: Number.MAX_SAFE_INTEGER, shared });
      pools.push(pool);
    }
    const buf = pool.tryAcquire()!;
    lender.set(buf, pool);
    v.buf = buf;
    const checks = [...v.checks!].map(([offset, ref]) => ({ id: ref.id, offset, length: ref.length }));
    v.checks = null;
    const codec = laneCodec(ctx.codec, lanes, started);
    v.plain = openPack(ctx.store, codec, ctx.job, ctx.keys, v.pack, v.line, v.line.size, buf, {
      chunks: checks,
      run: `${ctx.job}/${ctx.runId}`,
    }).then((r) => {
      if (!opened.has(v.pack)) {
        opened.add(v.pack);
        ctx.onPackOpened?.(v.pack, v.line.plainSize);
      }
      return r.plain;
    });
    v.plain.catch(() => undefined);
  };
  const startUpTo = (i: number) => {
    for (; started < visits.length && started <= i + ahead; started++) start(visits[started]!);
  };
  const drop = (v: Visit) => {
    if (v.uses === 0 && v.holds === 0 && v.buf !== null) {
      const b = v.buf;
      v.buf = null;
      const from = lender.get(b)!;
      lender.delete(b);
      from.release(b);
    }
  };
  // The batch being gathered (chunk uses of one visit in a row) and the hash requests in flight.
  let batch: { visit: Visit; plain: Uint8Array; ops: number[]; ends: Pending[] } | null = null;
  const hashing: { done: Promise<HashDigest[]>; ends: Pending[] }[] = [];
  const openKeys = new Set<number>();
  // A batch holds its visit from its first range, and hands that hold to its hash request: the
  // visit's uses may reach zero while the batch is still gathering, and an earlier request on the
  // same visit (a pack revisited after another) settling then must not return the buffer the
  // batch is about to hash (it would be reopened with another pack's bytes under it).
  const gather = (visit: Visit, plain: Uint8Array) => {
    visit.holds++;
    return { visit, plain, ops: [] as number[], ends: [] as Pending[] };
  };
  const flush = () => {
    if (batch === null) return;
    const { visit, plain, ops, ends } = batch;
    batch = null;
    if (ops.length === 0) {
      visit.holds--;
      drop(visit);
      hashing.push({ done: Promise.resolve([]), ends });
      return;
    }
    const done = hasher!.run(plain, ops);
    done
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        visit.holds--;
        drop(visit);
      });
    hashing.push({ done, ends });
  };
  const tampered = (p: Pending) =>
    new ArchiveError('ERR_ARCHIVE_RECORD_TAMPERED', {
      object: layout.index(ctx.job, ctx.runId),
      detail: `record ${p.entry.seq}`,
    });
  const handOver = (p: Pending, last = true): RecordRead => {
    if (!keep) {
      for (const v of p.visits) {
        v.holds--;
        drop(v);
      }
      return { entry: p.entry, pieces: [], release() {} };
    }
    let released = false;
    const held = p.visits;
    const read: RecordRead = {
      entry: p.entry,
      pieces: p.pieces,
      release() {
        if (released) return;
        released = true;
        for (const v of held) {
          v.holds--;
          drop(v);
        }
      },
    };
    if (p.parts > 0 || !last) read.part = { index: p.parts++, last };
    return read;
  };
  /** Waits for the oldest hash request and returns its records, each checked. */
  const settle = async (): Promise<Pending[]> => {
    const h = hashing.shift()!;
    const replies = await h.done;
    const digests = new Map<number, Uint8Array>();
    for (const r of replies) digests.set(r.key, r.digest);
    for (const p of h.ends) {
      const want = p.entry.sha384;
      if (p.key === 0) {
        if (want !== EMPTY_SHA384) throw tampered(p);
        continue;
      }
      openKeys.delete(p.key);
      const got = digests.get(p.key);
      if (got === undefined || `sha384:${Buffer.from(got).toString('hex')}` !== want) throw tampered(p);
    }
    return h.ends;
  };
  /** Sends the batch being gathered and hands over every record whose hash settles, in order. */
  async function* settleAll(): AsyncGenerator<RecordRead> {
    if (hasher === null) return;
    flush();
    while (hashing.length > 0) for (const q of await settle()) yield handOver(q);
  }
  /**
   * One chunk use of record `p` (`length` bytes at `offset` in visit `v`), its visit opened and
   * checked: its range goes to the hash batch (`first` and `last` use of the record begin and end
   * its hash) and, when records are kept, to the record's pieces.
   */
  const take = (
    p: Pending,
    v: Visit,
    offset: number,
    length: number,
    plain: Uint8Array,
    first: boolean,
    last: boolean,
  ) => {
    if (hasher !== null) {
      if (batch !== null && batch.visit !== v) flush();
      batch ??= gather(v, plain);
      batch.ops.push(p.key, offset, offset + length, (first ? BEGIN : 0) | (last ? END : 0));
    }
    // A record handed over with its pieces holds their visits until it is released; one that
    // only verifies does not (its ranges are read by the hash request, which holds the visit
    // until the hash thread replied): a verify's buffers return as soon as they are hashed
    // rather than once the longest record over them verified (a record over eight packs held
    // eight 10 MiB buffers: a verify's pool grew to 9).
    if (keep) {
      p.pieces.push(plain.subarray(offset, offset + length));
      p.bytes += length;
      if (!p.visits.has(v)) {
        p.visits.add(v);
        v.holds++;
      }
    }
    v.uses--;
    // Without hash requests nothing else holds the visit: its buffer goes back once no use and
    // no handed-over record needs it.
    if (hasher === null) drop(v);
  };
  try {
    for (let planned = plans[0]; planned !== undefined; planned = await nextWindow())
      for (let r = 0; r < planned.entries.length; r++) {
        const entry = planned.entries[r]!;
        const from = planned.first[r]!;
        const to = planned.first[r + 1]!;
        const p: Pending = {
          entry,
          key: from === to || hasher === null ? 0 : hasher.newKey(),
          pieces: [],
          visits: new Set(),
          bytes: 0,
          parts: 0,
        };
        if (p.key !== 0) openKeys.add(p.key);
        const inParts = keep && entry.size > partBytes;
        for (let u = from; u < to; u++) {
          const vi = planned.visit[u]!;
          const visit = vi < 0 ? null : visits[vi]!;
          if (inParts && visit !== null && p.bytes >= partBytes && !p.visits.has(visit)) {
            // A part: the records before this one come first (their hashes settle; a mismatch
            // throws from here, so no record after it comes out), then the pieces so far, whose
            // chunks the codec worker checked against their keyed ids. The hash request reading
            // them holds their visits on its own, so the consumer may release the part before the
            // record's digest is known.
            if (!exhausted) await planAhead(vi);
            startUpTo(vi);
            yield* settleAll();
            yield handOver(p, false);
            p.pieces = [];
            p.visits = new Set();
            p.bytes = 0;
          }
          let plain: Uint8Array;
          try {
            if (visit === null) throw planned.errors.get(u)!;
            if (!exhausted) await planAhead(vi);
            startUpTo(vi);
            plain = await visit.plain!;
          } catch (e) {
            yield* settleAll(); // earlier records' verdicts come first
            throw e;
          }
          take(p, visit!, planned.offset[u]!, planned.length[u]!, plain, u === from, u === to - 1);
        }
        if (hasher === null) {
          if (from === to && entry.sha384 !== EMPTY_SHA384) throw tampered(p);
          yield handOver(p);
          continue;
        }
        // The record is complete once the request carrying its last range settles (an empty record
        // goes with whatever request is last, so records still come out in order).
        // (`batch` is set by `take`, which the compiler's narrowing does not see.)
        const gathering = batch as { ends: Pending[] } | null;
        if (gathering !== null) gathering.ends.push(p);
        else if (hashing.length > 0) hashing.at(-1)!.ends.push(p);
        else {
          if (entry.sha384 !== EMPTY_SHA384) throw tampered(p);
          yield handOver(p);
          continue;
        }
        while (hashing.length > HASH_QUEUE) for (const q of await settle()) yield handOver(q);
      }
    yield* settleAll();
  } finally {
    hasher?.forget([...openKeys]);
    // Records never handed over give their holds back; buffers go back once nothing reads them
    // (a hash request still running releases its own when it settles).
    const left = batch as { visit: Visit; ends: Pending[] } | null;
    if (left !== null) left.visit.holds--;
    const pendings = left === null ? [] : [...left.ends];
    for (const h of hashing) pendings.push(...h.ends);
    for (const p of pendings) for (const v of p.visits) v.holds--;
    for (let i = 0; i < started; i++) {
      const v = visits[i]!;
      await v.plain!.catch(() => undefined);
      v.uses = 0;
      drop(v);
    }
    for (const p of pools) p.dispose();
    await windows?.return?.();
  }
}
