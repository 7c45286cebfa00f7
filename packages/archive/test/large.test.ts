/** Big-data round trips: a 300 MiB record in bounded memory, and 100k tiny records. */
import t from 'tap';
import { createArchiveWriter, openRun, verifyRun } from '../src/index.ts';
import { fsStore, keys, writerOptions } from './helpers.ts';

const MIB = 1024 * 1024;

t.test('a 300 MiB record streams through in bounded memory', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  // 1 MiB of pseudo-random bytes, varied per piece so no shard repeats.
  const base = new Uint8Array(MIB);
  for (let i = 0; i < base.length; i++) base[i] = (i * 2654435761) >>> 24;
  async function* body() {
    for (let i = 0; i < 300; i++) {
      const piece = new Uint8Array(base);
      piece[0] = i;
      piece[MIB - 1] = i >> 8;
      yield piece;
    }
  }
  globalThis.gc?.();
  const baseline = process.memoryUsage().rss;
  let peak = baseline;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const w = await createArchiveWriter(writerOptions(store, k, { compress: false }));
  const r = await w.addRecord({ name: 'huge.bin', body: body(), size: 300 * MIB });
  await w.finish();
  const v = await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey });
  clearInterval(timer);
  peak = Math.max(peak, process.memoryUsage().rss);
  t.equal(r.size, 300 * MIB);
  t.equal(v.ok, true, JSON.stringify(v.failure));
  t.equal(v.checks.bytes, 300 * MIB);
  const growth = (peak - baseline) / MIB;
  t.comment(`RSS growth ${growth.toFixed(0)} MiB`);
  t.ok(growth < 200, `RSS growth ${growth.toFixed(0)} MiB < 200 MiB`);
});

t.test('100k tiny records', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w = await createArchiveWriter(writerOptions(store, k));
  const enc = new TextEncoder();
  for (let i = 0; i < 100_000; i++)
    await w.addRecord({ name: `kv/key-${i}`, body: enc.encode(`value ${i}`), sourceType: 'redis' });
  const s = await w.finish();
  t.equal(s.records, 100_000);
  const run = await openRun(store, { runId: 'run-0001', secretKey: k.breakGlass.secretKey });
  let n = 0;
  let ok = true;
  for await (const e of run.records()) {
    if (e.name !== `kv/key-${n}`) ok = false;
    n++;
  }
  t.equal(n, 100_000);
  t.ok(ok, 'names in order');
  const v = await verifyRun(store, { runId: 'run-0001', secretKey: k.operational.secretKey });
  t.equal(v.ok, true);
  t.equal(v.checks.records, 100_000);
});
