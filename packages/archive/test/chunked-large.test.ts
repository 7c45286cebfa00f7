// Format 0.2 with the default chunk sizes (512 KiB / 1 MiB / 8 MiB) and a codec worker: records
// of at least 512 KiB are hashed on the record-hash thread chunk by chunk, straight from the pack
// buffer the chunk was cut in, and packs are sealed in place in that buffer; the writer's
// read-back reads new packs into a pool of shared buffers. These tests feed the cases where a
// buffer region is reused (a duplicate chunk is overwritten by the next one; a pack is sealed
// over its plaintext) and check that every record's digest is the SHA-384 of its bytes.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { createChunkedWriter, openRun, type RecordInput, stopIdleWorkers, verifyRun } from '../src/index.ts';
import { recordHasher } from '../src/internal/record-hash.ts';
import { fsStore, hashThreadUp, keys, pseudoRandom, readAll, writerOptions } from './helpers.ts';

const MIB = 1024 * 1024;

function sha384(b: Uint8Array): string {
  return `sha384:${createHash('sha384').update(b).digest('hex')}`;
}

/** A body yielded in `piece`-byte pieces, as a streaming source would. */
async function* pieces(b: Uint8Array, piece: number): AsyncIterable<Uint8Array> {
  for (let o = 0; o < b.length; o += piece) yield b.subarray(o, Math.min(b.length, o + piece));
}

t.test(
  'large records hashed off-thread keep their SHA-384 through duplicates and in-place seals',
  async (t) => {
    const { store, root } = fsStore(t);
    const k = keys();
    const a = pseudoRandom(6 * MIB, 11);
    const x = pseudoRandom(3 * MIB, 12);
    // The same 3 MiB three times: every chunk after the first copy's is a duplicate within the record.
    const repeated = Buffer.concat([x, x, x]);
    const edited = Buffer.from(a);
    edited.fill(7, 3 * MIB, 3 * MIB + 4096);
    const bodies: Record<string, Uint8Array> = {
      a,
      'a-again': a,
      repeated,
      edited,
      small: pseudoRandom(100 * 1024, 13),
      'just-over': pseudoRandom(512 * 1024 + 1, 14),
    };
    const records: RecordInput[] = [
      { name: 'a', body: pieces(a, 64 * 1024), size: a.length },
      // Every chunk a duplicate of record a's: the hash thread must read each before the next overwrites it.
      { name: 'a-again', body: pieces(a, 1024 * 1024), size: a.length },
      { name: 'repeated', body: pieces(repeated, 256 * 1024), size: repeated.length },
      { name: 'edited', body: edited },
      { name: 'small', body: pieces(bodies.small!, 4096), size: bodies.small!.length },
      { name: 'just-over', body: pieces(bodies['just-over']!, 100_000), size: bodies['just-over']!.length },
    ];
    // Packs of 2 MiB: records span packs, so packs are sealed while a record's hash is still running.
    const w = await createChunkedWriter({ ...writerOptions(store, k), packSize: 2 * MIB, workers: 1 });
    await hashThreadUp();
    for (const r of records) {
      const got = await w.addRecord(r);
      t.equal(got.sha384, sha384(bodies[r.name]!), `${r.name}: the digest is the SHA-384 of its bytes`);
    }
    const summary = await w.finish();
    t.ok(summary.newPacks >= 4, `several packs (${summary.newPacks})`);
    t.ok(summary.newBytes < summary.bytes - a.length, 'the repeated bytes were stored once');

    const readBack = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
      newPacks: summary.packIds,
      workers: 1,
    });
    t.ok(readBack.ok, 'the read-back passes');
    t.equal(readBack.checks.shards, summary.newPacks, 'every new pack was read');
    const full = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.breakGlass.secretKey,
    });
    t.ok(full.ok, 'a full verify with the break-glass key passes (every record re-hashed)');
    t.equal(full.checks.records, records.length);

    const run = await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    for (const { entry, body } of await readAll(run)) {
      t.same(
        Buffer.compare(Buffer.from(body), Buffer.from(bodies[entry.name]!)),
        0,
        `${entry.name} reads back`,
      );
    }

    // A flipped byte in one new pack: the read-back (reading into its pool) names that pack,
    // whether this thread opened it (every other pack with one worker) or the worker did.
    for (const which of [1, 2]) {
      const packFile = readdirSync(join(root, 'jobs/job-a/packs'), {
        recursive: true,
        withFileTypes: true,
      }).find(
        (e) => e.isFile() && e.parentPath.includes('/data/') && e.name.startsWith(summary.packIds[which]!),
      )!;
      const path = join(packFile.parentPath, packFile.name);
      const original = readFileSync(path);
      const bytes = Buffer.from(original);
      bytes[bytes.length >> 1]! ^= 1;
      writeFileSync(path, bytes);
      const bad = await verifyRun(store, {
        job: 'job-a',
        runId: 'run-0001',
        secretKey: k.operational.secretKey,
        newPacks: summary.packIds,
        workers: 1,
      });
      t.equal(bad.failure?.code, 'ERR_ARCHIVE_SHARD_TAMPERED', `pack ${which}`);
      t.match(bad.failure?.object, summary.packIds[which]!);
      writeFileSync(path, original);
    }
  },
);

t.test(
  'a large record met while the record-hash thread is stopped is hashed on the writer thread, which starts it for the next',
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    const a = pseudoRandom(3 * MIB, 31);
    stopIdleWorkers();
    const hasher = recordHasher(true);
    t.equal(hasher.ready, false, 'no record-hash thread runs');
    // The requests the writer hands to the thread, counted on the process's one hasher.
    let requests = 0;
    const run = hasher.run;
    hasher.run = (buf, ops) => {
      requests++;
      return run.call(hasher, buf, ops);
    };
    t.teardown(() => {
      hasher.run = run;
    });
    const w = await createChunkedWriter({ ...writerOptions(store, k), packSize: 2 * MIB, workers: 1 });
    const first = await w.addRecord({ name: 'a', body: pieces(a, 64 * 1024), size: a.length });
    t.equal(first.sha384, sha384(a), 'the first large record: the SHA-384 of its bytes');
    t.equal(requests, 0, 'hashed on the writer thread, nothing asked of the one booting');
    while (!hasher.ready) await new Promise((r) => setTimeout(r, 5));
    t.pass('the thread was started by that record');
    // Every chunk a duplicate of the first record's, hashed on the thread now.
    const again = await w.addRecord({ name: 'a-again', body: pieces(a, 1024 * 1024), size: a.length });
    t.equal(again.sha384, sha384(a));
    t.ok(requests > 0, `the next large record went to the running thread (${requests} requests)`);
    await w.finish();
    const v = await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
    t.ok(v.ok, 'the run verifies');
  },
);

t.test('the read-back reports progress pack by pack up to every byte of the run', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w = await createChunkedWriter({ ...writerOptions(store, k), packSize: MIB, workers: 1 });
  let total = 0;
  for (let i = 0; i < 5; i++) {
    const body = pseudoRandom(MIB + i * 1000, 20 + i);
    total += body.length;
    await w.addRecord({ name: `r${i}`, body });
  }
  const summary = await w.finish();
  const seen: { shardsDone: number; bytesDone: number }[] = [];
  const v = await verifyRun(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    newPacks: summary.packIds,
    onProgress: (p) => seen.push({ shardsDone: p.shardsDone, bytesDone: p.bytesDone }),
  });
  t.ok(v.ok);
  t.equal(seen.length, summary.newPacks, 'one report per pack');
  t.same(
    seen.map((s) => s.shardsDone),
    seen.map((_, i) => i + 1),
    'packs counted in order',
  );
  t.ok(
    seen.every((s, i) => i === 0 || s.bytesDone >= seen[i - 1]!.bytesDone),
    'bytes done never go back',
  );
  t.equal(seen.at(-1)!.bytesDone, total, 'the last report covers every byte');
});

t.test(
  'a full verify and a read of every record open each pack once (packs opened ahead are kept)',
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    const w = await createChunkedWriter({ ...writerOptions(store, k), packSize: MIB, workers: 1 });
    // Small records one chunk each, many to a pack: the reader moves through packs record by record.
    for (let i = 0; i < 400; i++)
      await w.addRecord({ name: `r${String(i).padStart(4, '0')}`, body: pseudoRandom(40_000, 100 + i) });
    const summary = await w.finish();
    t.ok(summary.newPacks >= 10, `many packs (${summary.newPacks})`);
    const gets = new Map<string, number>();
    const counting = new Proxy(store, {
      get(target, p) {
        const v = Reflect.get(target, p);
        if (p === 'get')
          return (key: string, ...rest: unknown[]) => {
            if (key.includes('/data/')) gets.set(key, (gets.get(key) ?? 0) + 1);
            return (v as (...a: unknown[]) => unknown).call(target, key, ...rest);
          };
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const v = await verifyRun(counting, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.breakGlass.secretKey,
      workers: 1,
    });
    t.ok(v.ok);
    t.equal(gets.size, summary.newPacks, 'every pack read');
    t.same([...new Set(gets.values())], [1], 'no pack read twice by the full verify');
    gets.clear();
    const run = await openRun(counting, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
      workers: 1,
    });
    const entries = [];
    for await (const e of run.records()) entries.push(e);
    let n = 0;
    for await (const r of run.readRecords(entries)) {
      n++;
      r.release();
    }
    t.equal(n, 400);
    t.same([...new Set(gets.values())], [1], 'no pack read twice by readRecords');
  },
);
