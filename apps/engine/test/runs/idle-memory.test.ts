/**
 * A finished run's memory goes back once no run is in flight (src/runs/idle-memory.ts): the
 * archive's cached pack buffers and the runs' read memory are dropped, its idle worker threads stopped and one collection
 * runs; not while a run is in flight.
 */

import { spawnSync } from 'node:child_process';
import { dropSpareBuffers, stopIdleWorkers } from '@coffer/archive';
import { steadyWorkerThreads, waitForWorkerThreads as threadsBecome } from '@coffer/testkit';
import t from 'tap';
import { dropReadMemory } from '../../src/runs/feed.ts';
import { IDLE_DELAY_MS, idleMemory, LAST_RESORT } from '../../src/runs/idle-memory.ts';
import { makeWorld } from './helpers/world.ts';

const files: Record<string, Uint8Array> = {};
for (let i = 0; i < 10; i++) files[`f/${i}.bin`] = new Uint8Array(4000 + i).fill(i);
files['large.bin'] = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 2654435761) >>> 24);

const tick = (ms = 30) => new Promise((r) => setTimeout(r, ms));

t.test(
  'after the last run settles, the run buffers the archive cached are dropped and a collection runs',
  async (t) => {
    let collected = 0;
    const w = await makeWorld(t, {
      files,
      service: {
        idleMemory: { delayMs: 20, gc: () => collected++ },
        // One codec worker (the world's default is none): the run's threads are what is released.
        executor: { checkpointIntervalMs: 0, workers: 1 },
      },
    });
    await w.addJob({ id: 'inc', incremental: true });
    dropSpareBuffers();
    stopIdleWorkers();
    const before = await steadyWorkerThreads();
    const run = await w.runNow('inc');
    t.equal(run.status, 'ok', JSON.stringify(run.detail));
    await tick(100);
    t.equal(collected, 1, 'one collection once the run settled');
    t.equal(dropSpareBuffers(), 0, 'nothing left in the cache');
    t.equal(dropReadMemory(), 0, 'no read memory kept');
    t.equal(stopIdleWorkers(), 0, 'no idle archive thread left running');
    t.equal(await threadsBecome(before), before, 'the run’s worker threads ended');
  },
);

t.test('control: without the release, a run leaves its pack buffers in the cache', async (t) => {
  let collected = 0;
  const w = await makeWorld(t, {
    files,
    service: {
      idleMemory: { delayMs: 60_000, gc: () => collected++ },
      executor: { checkpointIntervalMs: 0, workers: 1 },
    },
  });
  await w.addJob({ id: 'inc', incremental: true });
  dropSpareBuffers();
  const run = await w.runNow('inc');
  t.equal(run.status, 'ok', JSON.stringify(run.detail));
  await tick(100);
  t.equal(collected, 0);
  t.ok(dropSpareBuffers() > 0, 'the writer left its buffers for a next pool');
  t.ok(dropReadMemory() > 0, 'and the run its read memory for a next run');
  t.ok(stopIdleWorkers() >= 2, 'and its codec worker and record-hash thread still run');
});

t.test('nothing is released while something is in flight; the release runs once it is not', async (t) => {
  let collected = 0;
  const idle = idleMemory({ delayMs: 0, gc: () => collected++ });
  idle.settled(() => true);
  await tick();
  t.equal(collected, 0, 'busy: no collection');
  idle.settled(() => false);
  idle.settled(() => false);
  await tick();
  t.equal(collected, 1, 'settled twice in a row: one release');
  idle.settled(() => false);
  idle.stop();
  await tick();
  t.equal(collected, 1, 'stopped: the pending release does not run');
  t.same(
    idleMemory({ gc: null }).release(),
    { buffers: 0, readBuffers: 0, workers: 0, collected: false },
    'without a collector: drops buffers and stops threads only',
  );
});

t.test('by default the release waits a second after the last run settled', async (t) => {
  let collected = 0;
  const idle = idleMemory({ gc: () => collected++ });
  t.equal(IDLE_DELAY_MS, 1000);
  const settledAt = performance.now();
  idle.settled(() => false);
  await tick(IDLE_DELAY_MS / 2);
  t.equal(collected, 0, 'a client asking right after the run is not held up by a collection');
  while (collected === 0 && performance.now() - settledAt < IDLE_DELAY_MS * 3) await tick(20);
  t.equal(collected, 1, 'released once the second passed');
  t.ok(performance.now() - settledAt >= IDLE_DELAY_MS - 5, 'not before the second');
});

t.test('the collection asked for is the memory-reducing one, and this Node accepts it', async (t) => {
  const asked: unknown[] = [];
  const idle = idleMemory({ gc: (o) => asked.push(o) });
  t.same(idle.release(), { buffers: 0, readBuffers: 0, workers: 0, collected: true });
  t.same(asked, [{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
  // The real collector under --expose-gc (the engine's own flag), with the same options.
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '-e', `globalThis.gc(${JSON.stringify(LAST_RESORT)}); process.stdout.write('collected')`],
    { encoding: 'utf8' },
  );
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout, 'collected');
});

t.test('a registered activity holds the release back while it reports busy', async (t) => {
  let collected = 0;
  let applying = true;
  const idle = idleMemory({ delayMs: 0, gc: () => collected++ });
  idle.addActivity(() => applying);
  idle.settled();
  await tick();
  t.equal(collected, 0, 'an apply in flight: no collection');
  applying = false;
  idle.settled();
  await tick();
  t.equal(collected, 1, 'released once it settled too');
});
