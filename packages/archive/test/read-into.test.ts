// Read-back into pool buffers: verifyRun and readRecords fetch every shard frame into one of their
// pool buffers (objectstore `get(key, range, { into })`) and open it there in place, for stored
// (incompressible) and zstd shards, inline and on the codec workers.
import type { ObjectStore } from '@coffer/objectstore';
import t from 'tap';
import { openRun, type RecordInput, verifyRun } from '../src/index.ts';
import { fsStore, keys, pseudoRandom, sealRun, text } from './helpers.ts';

const SHARD = 64 * 1024;

/** Wraps a store, counting shard reads made into a caller buffer and answered from it. */
function countingStore(fs: ObjectStore): {
  store: ObjectStore;
  shardGets: () => number;
  intoHits: () => number;
} {
  let shardGets = 0;
  let intoHits = 0;
  const store: ObjectStore = {
    description: fs.description,
    put: (key, body, options) => fs.put(key, body, options),
    get: async (key, range, options) => {
      const r = await fs.get(key, range, options);
      if (key.includes('/shards/')) {
        shardGets++;
        if (options?.into !== undefined && r.buffer === options.into.buffer) intoHits++;
      }
      return r;
    },
    getStream: (key, range) => fs.getStream(key, range),
    head: (key) => fs.head(key),
    list: (prefix, options) => fs.list(prefix, options),
    listAll: (prefix) => fs.listAll(prefix),
    delete: (key) => fs.delete(key),
  };
  return { store, shardGets: () => shardGets, intoHits: () => intoHits };
}

for (const workers of [0, 2]) {
  t.test(`workers ${workers}: shards are read into pool buffers and opened in place`, async (t) => {
    const { store: fs } = fsStore(t);
    const k = keys();
    const records: RecordInput[] = [];
    for (let i = 0; i < 24; i++) {
      // Alternating compressible and random bodies: both zstd and stored shards.
      const body = i % 2 === 0 ? text(SHARD / 2 + i * 999, i) : pseudoRandom(SHARD / 2 + i * 777, i);
      records.push({ name: `f-${i}`, body });
    }
    const summary = await sealRun(fs, k, records, { shardSize: SHARD, workers });
    t.ok(summary.shards > 5, `${summary.shards} shards`);
    const { store, shardGets, intoHits } = countingStore(fs);
    const v = await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey, workers });
    t.ok(v.ok, JSON.stringify(v.failure));
    t.equal(v.checks.records, records.length, 'every record verified');
    t.equal(shardGets(), summary.shards, 'each shard fetched once');
    t.equal(intoHits(), summary.shards, 'each into a pool buffer');

    const run = await openRun(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
      workers,
    });
    const entries = [];
    for await (const e of run.records()) entries.push(e);
    let same = 0;
    for await (const r of run.readRecords(entries)) {
      const want = records[r.entry.seq]!.body as Uint8Array;
      if (Buffer.concat(r.pieces.map((p) => Buffer.from(p))).equals(want)) same++;
      r.release();
    }
    t.equal(same, records.length, 'readRecords gives every record intact');
    t.equal(intoHits(), 2 * summary.shards, 'readRecords reads into pool buffers too');
  });
}
