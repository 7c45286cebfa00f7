/**
 * What a kept base holds: a run's read-back on its base keeps the records it shares with it, and
 * a changed record's line as a string of its own, not as a slice of the index frame it was
 * decoded from (internal/index-codec.ts `flatLine`). A base is carried from run to run for as long as the
 * engine lives, so a slice kept its whole frame (up to 1 MiB) alive for one changed line, and a
 * run with changes spread over its listing kept every frame of its index.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t from 'tap';
import {
  type ChunkedBase,
  createChunkedWriter,
  loadChunkedBase,
  type RecordInput,
  verifyRun,
} from '../src/index.ts';
import { flatLine } from '../src/internal/index-codec.ts';
import { chunkedOptions, fsStore, keys, text } from './helpers.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MIB = 1024 * 1024;

/** Heap and external memory (a frame's text over ~1 MB is an external string) after full collections. */
function held(): number {
  for (let i = 0; i < 4; i++) gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/** Records whose index lines are ~5 KB each (metadata), so 600 of them fill three frames. */
const wide = (changed: ReadonlySet<number> = new Set()): RecordInput[] =>
  Array.from({ length: 600 }, (_, i) => ({
    name: `r/${String(i).padStart(3, '0')}`,
    body: text(300 + i, changed.has(i) ? i + 1000 : i),
    change: changed.has(i) ? `c${i}-2` : `c${i}`,
    metadata: { note: `${i}`.padEnd(5_000, 'x') },
  }));

t.test('flatLine returns an equal string', async (t) => {
  for (const s of ['', 'a', 'x'.repeat(12), 'y'.repeat(13), `{"name":"é✓"}`.repeat(40)])
    t.equal(flatLine(s), s);
});

t.test('a base read back on its base holds a changed line without its frame', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w1 = await createChunkedWriter(chunkedOptions(store, k));
  for (const r of wide()) await w1.addRecord(r);
  await w1.finish();

  const none = held();
  let base1: ChunkedBase | null = await loadChunkedBase(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  const withBase1 = held() - none;
  t.ok(
    withBase1 > 2.5 * MIB,
    `the first base holds its ~3 MB of lines (${(withBase1 / MIB).toFixed(2)} MiB)`,
  );

  // One record changed in each frame of the next run's index: every frame has a changed line.
  // Written and read back in a function of its own, so that nothing but the kept base outlives it.
  const changed = new Set([50, 250, 450]);
  const nextBase = async (on: ChunkedBase): Promise<ChunkedBase> => {
    const w2 = await createChunkedWriter(
      chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base: on }),
    );
    for (const r of wide(changed)) {
      if (changed.has(Number(r.name.slice(2)))) await w2.addRecord(r);
      else if (w2.addUnchanged(r) === null) t.fail(`${r.name} was not taken unread`);
    }
    t.equal((await w2.finish()).unchangedRecords, 597);
    const v = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0002',
      secretKey: k.operational.secretKey,
      knownRecords: on,
      keepBase: true,
    });
    t.ok(v.ok, 'the second run verifies');
    return v.base!;
  };
  let base2: ChunkedBase | null = await nextBase(base1!);
  t.equal(base2.records.get('r/050')!.change, 'c50-2', 'the kept base has the changed record');
  base1 = null;
  const withBase2 = held() - none;
  // With slices, the second base also held the three frames of its own index (measured 3.8 MiB
  // more; 0.8 MiB more without them: its own maps and entries, and the three new lines).
  t.ok(
    withBase2 < withBase1 + 2 * MIB,
    `the second base holds about what the first did (${(withBase2 / MIB).toFixed(2)} against ${(withBase1 / MIB).toFixed(2)} MiB)`,
  );
  t.equal(base2.records.size, 600);
  base2 = null;
});
