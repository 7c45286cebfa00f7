/**
 * The cache of incremental bases (src/runs/base-cache.ts): one base per job and destination, taken
 * once, only for the run it is of and the operational key it was opened for, within its budget.
 */
import type { ChunkedBase } from '@coffer/archive';
import { createFsStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { BASE_CACHE_DEFAULT_WEIGHT, baseCacheWeightOf, ChunkedBaseCache } from '../../src/runs/base-cache.ts';

/** A base's shape as the cache reads it (job, runId, record count, chunk count). */
function base(job: string, runId: string, records: number, chunks: number): ChunkedBase {
  const recs = new Map(Array.from({ length: records }, (_, i) => [`r${i}`, {}]));
  return { job, runId, records: recs, chunkCount: chunks } as unknown as ChunkedBase;
}

t.test('a kept base is taken once, for its run and key only', async (t) => {
  const a = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
  const b = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
  const key = new Uint8Array([1, 2, 3]);
  const cache = new ChunkedBaseCache(1000);
  const one = base('job', 'run-1', 10, 40);
  cache.put(a, one, key);
  t.equal(cache.weight, 10 + 10, 'records plus a quarter of the chunks');
  t.equal(cache.take(b, 'job', 'run-1', key), null, 'another destination has its own');
  t.equal(cache.take(a, 'other', 'run-1', key), null, 'another job has its own');
  t.equal(cache.take(a, 'job', 'run-1', key), one);
  t.equal(cache.take(a, 'job', 'run-1', key), null, 'taken once');
  t.equal(cache.weight, 0);

  cache.put(a, one, key);
  t.equal(cache.take(a, 'job', 'run-2', key), null, 'of another run: not used');
  t.equal(cache.size, 0, '... and dropped (the job moved on)');
  cache.put(a, one, key);
  t.equal(cache.take(a, 'job', 'run-1', new Uint8Array([9])), null, 'opened for another key: not used');
  const copy = new Uint8Array([4, 5]);
  cache.put(a, one, copy);
  copy[0] = 0;
  t.equal(cache.take(a, 'job', 'run-1', new Uint8Array([4, 5])), one, 'the key is copied when kept');
});

t.test('the budget: the least recently kept goes first; a base heavier than it is not kept', async (t) => {
  const s = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
  const key = new Uint8Array([1]);
  const cache = new ChunkedBaseCache(100);
  cache.put(s, base('a', 'r', 40, 0), key);
  cache.put(s, base('b', 'r', 40, 0), key);
  cache.put(s, base('a', 'r2', 30, 0), key); // replaces a's
  t.equal(cache.weight, 70);
  cache.put(s, base('c', 'r', 50, 0), key); // b (older) goes
  t.equal(cache.take(s, 'b', 'r', key), null);
  t.ok(cache.take(s, 'a', 'r2', key));
  t.ok(cache.take(s, 'c', 'r', key));
  cache.put(s, base('big', 'r', 101, 0), key);
  t.equal(cache.size, 0, 'heavier than the budget: not kept');
  t.equal(cache.mayKeep(100), true, 'a base of 100 records may fit a budget of 100');
  t.equal(cache.mayKeep(101), false, 'one of 101 cannot, whatever its chunks: the read-back builds none');
  t.equal(new ChunkedBaseCache(0).weight, 0);
  t.throws(() => new ChunkedBaseCache(-1), TypeError);
});

t.test(
  'the budget in MiB (ENGINE_INCREMENTAL_BASE_CACHE_MIB): 1,000 units each; unset: the default',
  async (t) => {
    t.equal(baseCacheWeightOf(undefined), BASE_CACHE_DEFAULT_WEIGHT);
    t.equal(baseCacheWeightOf(100), BASE_CACHE_DEFAULT_WEIGHT, 'the default is 100 MiB');
    t.equal(baseCacheWeightOf(400), 400_000);
    t.equal(baseCacheWeightOf(0), 0);
    const s = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
    const none = new ChunkedBaseCache(baseCacheWeightOf(0));
    none.put(s, base('a', 'r', 1, 0), new Uint8Array([1]));
    t.equal(none.size, 0, '0 MiB keeps nothing');
  },
);

t.test('peek: the kept base of that run and key, without taking it', async (t) => {
  const a = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
  const b = createFsStore({ root: tempDir(t, 'coffer-base-cache-') });
  const key = new Uint8Array([1, 2, 3]);
  const cache = new ChunkedBaseCache(1000);
  const one = base('job', 'run-1', 10, 40);
  (one as unknown as { lines: Map<string, string> }).lines = new Map([['r0', '{}']]);
  (one as unknown as { map: unknown }).map = { chunks: new Map() };
  cache.put(a, one, key);
  // The base itself (records, lines, and the chunk map a reader borrows read-only).
  t.equal(cache.peek(a, 'job', 'run-1', key), one);
  t.equal(cache.peek(b, 'job', 'run-1', key), null, 'another destination');
  t.equal(cache.peek(a, 'other', 'run-1', key), null, 'another job');
  t.equal(cache.peek(a, 'job', 'run-2', key), null, 'another run');
  t.equal(cache.peek(a, 'job', 'run-1', new Uint8Array([9])), null, 'another key');
  t.equal(cache.size, 1, 'peeking (even at another run) keeps the base');
  t.equal(cache.take(a, 'job', 'run-1', key), one, 'still there for the next run');
});
