// OpenedRun.readRecords: the pipelined reader of many records (internal/record-stream.ts).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type IndexEntry, type OpenedRun, openRun, type RecordInput, type RecordRead } from '../src/index.ts';
import { collect, fsStore, keys, pseudoRandom, runEntries, sealRun, text } from './helpers.ts';

const SHARD = 64 * 1024;

/** Small text and random records, empty ones, and a few spanning 2-4 shards. */
function records(): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 120; i++) {
    const size = i % 17 === 0 ? 0 : i % 29 === 5 ? 150_000 + i * 300 : 300 + ((i * 7919) % 9000);
    out.push({
      name: `r/${String(i).padStart(3, '0')}`,
      body: i % 2 ? pseudoRandom(size, i + 1) : text(size, i),
    });
  }
  return out;
}

async function sealed(tt: { teardown(fn: () => void): void }, workers: number) {
  const { store, root } = fsStore(tt);
  const k = keys();
  const input = records();
  const summary = await sealRun(store, k, input, { shardSize: SHARD, workers });
  const run = await openRun(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    workers,
  });
  const entries = await runEntries(run);
  const want = new Map(input.map((r) => [r.name, r.body as Uint8Array]));
  return { store, root, k, run, entries, want, summary };
}

const bytesOf = (r: RecordRead) => Buffer.concat(r.pieces.map((p) => Buffer.from(p)));

for (const workers of [0, 2]) {
  t.test(
    `workers ${workers}: every record, a subset, in order, bytes as readRecord gives them`,
    async (t) => {
      const { run, entries, want, summary } = await sealed(t, workers);
      t.ok(summary.shards > 10, `${summary.shards} shards`);
      t.ok(
        entries.some((e) => e.size > 2 * SHARD),
        'some records span several shards',
      );
      for (const subset of [
        entries,
        entries.filter((_, i) => i % 3 === 1),
        entries.filter((e) => e.size > SHARD),
      ]) {
        const seen: string[] = [];
        for await (const r of run.readRecords(subset)) {
          seen.push(r.entry.name);
          t.ok(Buffer.from(want.get(r.entry.name)!).equals(bytesOf(r)), r.entry.name);
          r.release();
          r.release(); // idempotent
        }
        t.same(
          seen,
          subset.map((e) => e.name),
        );
      }
      // The same bytes readRecord gives.
      const e = entries.find((x) => x.size > 2 * SHARD)!;
      for await (const r of run.readRecords([e])) {
        t.same(bytesOf(r), Buffer.from(await collect(run.readRecord(e))));
        r.release();
      }
    },
  );
}

t.test('held records keep their bytes until released; buffers come back', async (t) => {
  const { run, entries, want } = await sealed(t, 2);
  // Hold up to 6 records at a time, releasing the oldest a little later (as concurrent writes do),
  // and check each one's bytes only when it is released.
  const held: RecordRead[] = [];
  const check = (r: RecordRead) => {
    if (!Buffer.from(want.get(r.entry.name)!).equals(bytesOf(r)))
      t.fail(`changed while held: ${r.entry.name}`);
    r.release();
  };
  let n = 0;
  for await (const r of run.readRecords(entries, { holdShards: 2 })) {
    held.push(r);
    n++;
    if (held.length > 6) {
      await new Promise((resolve) => setImmediate(resolve));
      check(held.shift()!);
    }
  }
  for (const r of held) check(r);
  t.equal(n, entries.length);
  // Stopping early (break) ends the pipeline; the run reads again afterwards.
  for await (const r of run.readRecords(entries)) {
    r.release();
    break;
  }
  let again = 0;
  for await (const r of run.readRecords(entries.slice(0, 10))) {
    again++;
    r.release();
  }
  t.equal(again, 10);
});

t.test('arguments are checked before anything is read', async (t) => {
  const { run, entries } = await sealed(t, 0);
  const drain = async (it: AsyncIterable<RecordRead>) => {
    for await (const r of it) r.release();
  };
  await t.rejects(drain(run.readRecords([entries[3]!, entries[2]!])), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await t.rejects(drain(run.readRecords([entries[3]!, entries[3]!])), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  const bigOne = entries.find((e) => e.size > SHARD)!;
  await t.rejects(drain(run.readRecords([bigOne], { maxRecordBytes: SHARD })), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await drain(run.readRecords([]));
  t.pass('no entries: nothing read');
});

/** Yields until the failure; returns the names yielded and the error. */
async function until(run: OpenedRun, entries: IndexEntry[]): Promise<{ names: string[]; err: unknown }> {
  const names: string[] = [];
  try {
    for await (const r of run.readRecords(entries)) {
      names.push(r.entry.name);
      r.release();
    }
  } catch (err) {
    return { names, err };
  }
  return { names, err: null };
}

t.test('a record whose digest does not match: the records before it, then RECORD_TAMPERED', async (t) => {
  const { run, entries } = await sealed(t, 2);
  const k = 40;
  const forged = entries.map((e, i) =>
    i === k ? { ...e, sha384: `sha384:${'00'.repeat(48)}` as const } : e,
  );
  const { names, err } = await until(run, forged);
  t.same(
    names,
    entries.slice(0, k).map((e) => e.name),
  );
  t.match(err, { code: 'ERR_ARCHIVE_RECORD_TAMPERED' });
});

t.test('a tampered shard: every record wholly before it, then the shard error', async (t) => {
  const { root, run, entries } = await sealed(t, 2);
  const bad = 7;
  const p = join(root, 'jobs/job-a/runs/run-0001/shards', `${String(bad).padStart(6, '0')}.bin`);
  const b = readFileSync(p);
  b[b.length >> 1] = b[b.length >> 1]! ^ 1;
  writeFileSync(p, b);
  const { names, err } = await until(run, entries);
  t.match(err, { code: 'ERR_ARCHIVE_SHARD_TAMPERED' });
  const before = entries.filter((e) => e.shard < bad && e.offset + e.size <= SHARD * (bad - e.shard));
  t.same(
    names,
    before.map((e) => e.name),
  );
});

t.test('a 0.1 run hands its records out in windows, and reads windows as it reads a list', async (t) => {
  const { store, k, entries, want } = await sealed(t, 1);
  const run = await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
  const windows: IndexEntry[][] = [];
  for await (const w of run.recordWindows(50)) windows.push([...w]);
  t.same(
    windows.map((w) => w.length),
    [50, 50, 20],
    'windows of 50 of the 120 records',
  );
  t.same(windows.flat(), entries, 'the records, in order');
  const names: string[] = [];
  for await (const r of run.readRecords(run.recordWindows(7))) {
    t.same(bytesOf(r), Buffer.from(want.get(r.entry.name)!), `${r.entry.name}: its bytes`);
    names.push(r.entry.name);
    r.release();
  }
  t.same(
    names,
    entries.map((e) => e.name),
    'every record, read from windows',
  );
});
