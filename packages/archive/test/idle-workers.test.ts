/**
 * `stopIdleWorkers`: the archive's worker threads with nothing in flight are stopped (their OS
 * threads end) and started again by the next use; a record hash half-way or a request in flight
 * keeps its thread. The record-hash thread is started by its first request, not by a writer.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  steadyWorkerThreads,
  waitForWorkerThreads as threadsBecome,
  workerThreadCount as workerThreads,
} from '@coffer/testkit';
import t from 'tap';
import { createChunkedWriter, loadChunkedBase, stopIdleWorkers, verifyRun } from '../src/index.ts';
import { frameCodec } from '../src/internal/codec-pool.ts';
import { BEGIN, END, recordHasher } from '../src/internal/record-hash.ts';
import { chunkedOptions, fsStore, keys, pseudoRandom } from './helpers.ts';

const sha384 = (b: Uint8Array) => createHash('sha384').update(b).digest('hex');
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function shared(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(new SharedArrayBuffer(bytes.length));
  out.set(bytes);
  return out;
}

t.test('idle threads stop, their OS threads end, and the next use starts them again', async (t) => {
  stopIdleWorkers();
  const base = await steadyWorkerThreads();
  const { store } = fsStore(t);
  const k = keys();
  const write = async (runId: string) => {
    const w = await createChunkedWriter(
      chunkedOptions(store, k, { runId, writeRecovery: false, workers: 1 }),
    );
    // Over 512 KiB: hashed on the record-hash thread; sealed on a codec worker.
    await w.addRecord({ name: 'big', body: pseudoRandom(2 * 1024 * 1024, Number(runId.slice(-1))) });
    const s = await w.finish();
    const v = await verifyRun(store, { job: 'job-a', runId, secretKey: k.operational.secretKey, workers: 1 });
    t.ok(v.ok, `${runId} verifies`);
    return s;
  };
  await write('run-0001');
  const running = workerThreads();
  t.ok(running >= base + 2, `a codec worker and the record-hash thread ran (${running - base} threads)`);
  const stopped = stopIdleWorkers();
  t.equal(stopped, running - base, 'every one of them was idle and is stopped');
  t.equal(await threadsBecome(base), base, 'their OS threads ended');
  t.equal(stopIdleWorkers(), 0, 'nothing left to stop');

  await write('run-0002');
  t.ok(workerThreads() >= base + 2, 'the next run started them again');
  t.equal(stopIdleWorkers(), stopped);
  await threadsBecome(base);
});

t.test('a record hash half-way keeps its thread; once it ended the thread stops', async (t) => {
  stopIdleWorkers();
  const hasher = recordHasher(true);
  const bytes = shared(randomBytes(4096));
  const key = hasher.newKey();
  await hasher.run(bytes, [key, 0, 1000, BEGIN]);
  t.equal(stopIdleWorkers(), 0, 'the running hash lives on the thread: not stopped');
  const [d] = await hasher.run(bytes, [key, 1000, 4096, END]);
  t.equal(hex(d!.digest), sha384(bytes), 'the hash went on where it was');
  t.equal(stopIdleWorkers(), 1, 'stopped once the hash ended');
  // The same hasher object (as a long-lived writer holds it) starts a fresh thread.
  const again = hasher.newKey();
  const [d2] = await hasher.run(bytes, [again, 0, 4096, BEGIN | END]);
  t.equal(hex(d2!.digest), sha384(bytes), 'and hashes on a fresh thread');

  // A forgotten (abandoned) record no longer holds it.
  const left = hasher.newKey();
  await hasher.run(bytes, [left, 0, 10, BEGIN]);
  t.equal(stopIdleWorkers(), 0);
  hasher.forget([left]);
  t.equal(stopIdleWorkers(), 1, 'a forgotten record does not hold the thread');
});

t.test('a request in flight keeps its thread', async (t) => {
  stopIdleWorkers();
  const hasher = recordHasher(true);
  const bytes = shared(randomBytes(32 * 1024 * 1024));
  const key = hasher.newKey();
  const pending = hasher.run(bytes, [key, 0, bytes.length, BEGIN | END]);
  t.equal(stopIdleWorkers(), 0, 'in flight: not stopped');
  const [d] = await pending;
  t.equal(hex(d!.digest), sha384(bytes), 'and its answer arrives');

  const codec = frameCodec(1);
  const msg = () => ({
    domain: 2,
    seq: 0,
    final: true,
    plain: randomBytes(8 * 1024 * 1024),
    compress: false,
    key: randomBytes(32),
    binding: new Uint8Array(4),
    runTag: new Uint8Array(16),
    salt: randomBytes(6),
    out: null,
  });
  const sealing = codec.seal(msg());
  const stoppedWhileBusy = stopIdleWorkers();
  const r = await sealing;
  t.ok(r.frame.length > 8 * 1024 * 1024, 'the seal in flight completed');
  t.equal(stoppedWhileBusy, 1, 'the idle hash thread was stopped, the busy codec worker was not');
  t.equal(stopIdleWorkers(), 1, 'the codec worker stops once idle');
  const again = await codec.seal(msg());
  t.ok(again.frame.length > 8 * 1024 * 1024, 'and a fresh one seals the next frame');
  stopIdleWorkers();
});

t.test(
  'a run with nothing changed starts no thread; a record read starts the codec, a large one the hash thread',
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    const records = [
      { name: 'a', body: pseudoRandom(1024 * 1024, 1), change: 'a-1' },
      { name: 'b', body: pseudoRandom(4096, 2), change: 'b-1' },
    ];
    const opts = { writeRecovery: false, workers: 1 };
    stopIdleWorkers();
    const base0 = await steadyWorkerThreads();

    const w1 = await createChunkedWriter(chunkedOptions(store, k, { ...opts, runId: 'run-0002' }));
    t.equal(workerThreads(), base0, 'a new writer starts no thread');
    await w1.addRecord(records[1]!); // small: hashed inline, but its pack is sealed on a worker
    t.equal(await threadsBecome(base0 + 1), base0 + 1, 'the first record read starts the codec worker');
    await new Promise((r) => setTimeout(r, 100));
    t.equal(workerThreads(), base0 + 1, 'and only it: no record needed the hash thread yet');
    await w1.addRecord(records[0]!); // 1 MiB: hashed on the record-hash thread
    t.equal(await threadsBecome(base0 + 2), base0 + 2, 'a large record starts the hash thread');
    await w1.finish();
    stopIdleWorkers();
    await threadsBecome(base0);

    const base = await loadChunkedBase(store, {
      job: 'job-a',
      runId: 'run-0002',
      secretKey: k.operational.secretKey,
    });
    const w2 = await createChunkedWriter(
      chunkedOptions(store, k, { ...opts, runId: 'run-0003', prevRunId: 'run-0002', base }),
    );
    for (const r of [records[1]!, records[0]!])
      await w2.addRecord({ ...r, body: new Uint8Array(0), size: r.body.length });
    const s = await w2.finish();
    t.equal(s.unchangedRecords, 2, 'both records taken from the base unread');
    const v = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0003',
      secretKey: k.operational.secretKey,
      newPacks: s.packIds,
      knownRecords: base!,
      workers: 1,
    });
    t.ok(v.ok, 'and read back');
    t.equal(workerThreads(), base0, 'no thread was started by the run or its read-back');
  },
);
