/**
 * `incremental: true` (archive format 0.2): a second run stores only what changed, never opens an
 * unchanged file, is read back (its new packs in full) and opens offline with the break-glass key
 * alone; a base that does not verify is passed over; two destinations each build on their own base.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isChunkedManifest, openRun, readRunManifest, verifyRun } from '@coffer/archive';
import t from 'tap';
import { baseCacheWeightOf, ChunkedBaseCache } from '../../src/runs/base-cache.ts';
import { noise } from './helpers/noise.ts';
import { makeWorld } from './helpers/world.ts';

function bytesUnder(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += statSync(join(e.parentPath, e.name)).size;
  }
  return n;
}

const files: Record<string, Uint8Array> = {};
for (let i = 0; i < 30; i++) files[`small/${i}.bin`] = noise(3000 + i * 100, i + 1);
files['large.bin'] = noise(16 * 1024 * 1024, 99);

t.test('a second incremental run stores what changed and reads back; the chain opens offline', async (t) => {
  const w = await makeWorld(t, { files });
  const store = w.destinations.get('default')!;
  await w.addJob({ id: 'inc', incremental: true });
  const first = await w.runNow('inc');
  t.equal(first.status, 'ok', JSON.stringify(first.detail));
  const m1 = await readRunManifest(store, { job: 'inc', runId: first.id });
  t.ok(isChunkedManifest(m1.document), 'sealed in format 0.2');
  const packsDir = join(w.destDirs.default!, 'jobs', 'inc', 'packs');
  const afterFirst = bytesUnder(packsDir);

  // One small file rewritten, 64 KiB in the middle of the large one; any source read past those two
  // fails, which proves the unchanged files are not opened (referenced unread by change token).
  writeFileSync(join(w.sourceDir, 'small/3.bin'), noise(3300, 1234));
  const large = Buffer.from(files['large.bin']!);
  large.set(noise(65536, 7), 8 * 1024 * 1024);
  writeFileSync(join(w.sourceDir, 'large.bin'), large);
  w.faults.arm({ target: 'source', fault: 'read-error', op: 'read', after: 2, times: 0 });

  const second = await w.runNow('inc');
  t.equal(second.status, 'ok', JSON.stringify(second.detail));
  t.equal(second.warnings, 0, 'no read failed: only the two changed files were opened');
  w.faults.disarm();
  t.equal(second.records, first.records);
  t.match(second.destinations.default, { state: 'verified' });
  const grown = bytesUnder(packsDir) - afterFirst;
  t.ok(grown < afterFirst / 4, `the job's packs grew by ${grown} bytes (a full copy is ${afterFirst})`);
  const m2 = await readRunManifest(store, { job: 'inc', runId: second.id });
  const d2 = m2.document;
  t.ok(
    isChunkedManifest(d2) && d2.totals.newBytes < d2.totals.bytes / 4,
    'the manifest counts few new bytes',
  );

  // Offline, break-glass key alone: the second run reads back whole, following its references.
  const v = await verifyRun(store, { job: 'inc', runId: second.id, secretKey: w.breakGlassSecret });
  t.ok(v.ok, 'full verify with the break-glass key');
  const run = await openRun(store, { job: 'inc', runId: second.id, secretKey: w.breakGlassSecret });
  for await (const e of run.records()) {
    if (e.name !== 'large.bin') continue;
    const parts: Uint8Array[] = [];
    for await (const p of run.readRecord(e)) parts.push(p);
    t.ok(Buffer.concat(parts).equals(large), 'the modified large file reads back exactly');
  }
});

t.test('a base that does not verify is passed over: the run stores everything and is still ok', async (t) => {
  // Nothing kept from the read-back (as after an engine restart): the base is read from the store.
  const w = await makeWorld(t, {
    files,
    service: { executor: { checkpointIntervalMs: 0, workers: 0, baseCache: null } },
  });
  await w.addJob({ id: 'inc', incremental: true });
  const first = await w.runNow('inc');
  t.equal(first.status, 'ok');
  // The first run's index is damaged after the fact.
  const index = join(w.destDirs.default!, 'jobs', 'inc', 'runs', first.id, 'index.bin');
  const bytes = readFileSync(index);
  bytes[40] = bytes[40]! ^ 1;
  writeFileSync(index, bytes);
  const second = await w.runNow('inc');
  t.equal(second.status, 'ok', 'the run does not build on a base that fails its digest');
  t.ok(
    w.logs.some((l) => l.event === 'incremental-base-skipped' && l.base === first.id),
    'the skipped base is logged',
  );
  const m2 = await readRunManifest(w.destinations.get('default')!, { job: 'inc', runId: second.id });
  const d2 = m2.document;
  t.ok(isChunkedManifest(d2) && d2.totals.newBytes === d2.totals.bytes, 'everything was stored again');
});

t.test(
  "the next run builds on the base its predecessor's read-back kept, unless the pack indexes changed since",
  async (t) => {
    const w = await makeWorld(t, { files });
    await w.addJob({ id: 'inc', incremental: true });
    const first = await w.runNow('inc');
    t.equal(first.status, 'ok');
    t.equal(w.service.baseCache.size, 1, 'the read-back kept the run as the next base');
    t.ok(
      w.service.baseCache.weight > 31,
      `weighed by its 31 records and its chunks (${w.service.baseCache.weight})`,
    );
    const baseLogs = () => w.logs.filter((l) => l.event === 'incremental-base');
    // The kept base, looked at and put back (a base is taken out of the cache once used).
    const store = w.service.stores.get('default')!;
    const op = w.keys.operational.publicKey;
    const kept = (runId: string) => {
      const b = w.service.baseCache.take(store, 'inc', runId, op)!;
      w.service.baseCache.put(store, b, op);
      return b;
    };
    const base1 = kept(first.id);
    const indexes1 = [...base1.map.indexes];

    writeFileSync(join(w.sourceDir, 'small/3.bin'), noise(3300, 4321));
    const second = await w.runNow('inc');
    t.equal(second.status, 'ok', JSON.stringify(second.detail));
    t.match(baseLogs(), [{ runId: second.id, base: first.id, kept: true }], 'built on the kept base');
    // Its read-back took the records unchanged since that base from it rather than parsing them.
    const base2 = kept(second.id);
    t.equal(base2.records.size, base1.records.size);
    const shared = [...base2.records.values()].filter((e) => e.chunks === base1.records.get(e.name)?.chunks);
    t.same(
      shared.map((e) => e.name).sort(),
      [...base1.records.keys()].filter((n) => n !== 'small/3.bin').sort(),
      'every record but the rewritten one is the base’s own (not parsed again)',
    );
    t.equal(base2.map, base1.map, 'and its chunk map is the base’s, extended rather than read again');
    t.same(base2.map.indexes.slice(0, -1), indexes1, 'by the second run’s pack index');
    t.equal(base2.map.indexes.length, indexes1.length + 1);
    const m2 = (await readRunManifest(w.destinations.get('default')!, { job: 'inc', runId: second.id }))
      .document;
    t.ok(isChunkedManifest(m2) && m2.totals.newBytes < 10_000, 'only the rewritten file was stored');

    // Another pack index appears (as when a prune or another engine wrote one): the kept base no
    // longer describes the store and the next run reads its base again.
    const indexDir = join(w.destDirs.default!, 'jobs', 'inc', 'packs');
    const [keyDir] = readdirSync(indexDir);
    const ixDir = join(indexDir, keyDir!, 'index');
    const [one] = readdirSync(ixDir);
    writeFileSync(join(ixDir, `${'f'.repeat(32)}.bin`), readFileSync(join(ixDir, one!)));
    const third = await w.runNow('inc');
    t.equal(third.status, 'ok', JSON.stringify(third.detail));
    t.match(baseLogs()[1], { runId: third.id, base: second.id, kept: false }, 'the stale base was not used');
    const m3 = (await readRunManifest(w.destinations.get('default')!, { job: 'inc', runId: third.id }))
      .document;
    t.ok(isChunkedManifest(m3) && m3.totals.newBytes === 0, 'built on the base read again: nothing stored');
    const v = await verifyRun(w.destinations.get('default')!, {
      job: 'inc',
      runId: third.id,
      secretKey: w.breakGlassSecret,
    });
    t.ok(v.ok, 'and it verifies offline');
  },
);

t.test(
  'a budget of 0 MiB (ENGINE_INCREMENTAL_BASE_CACHE_MIB=0) keeps no base: the next run reads it',
  async (t) => {
    const w = await makeWorld(t, { files, service: { baseCacheMiB: 0 } });
    await w.addJob({ id: 'inc', incremental: true });
    const first = await w.runNow('inc');
    t.equal(first.status, 'ok');
    t.equal(w.service.baseCache.size, 0, 'nothing kept');
    const second = await w.runNow('inc');
    t.equal(second.status, 'ok', JSON.stringify(second.detail));
    t.same(
      w.logs.filter((l) => l.event === 'incremental-base'),
      [],
      'no kept base to use (the event is logged only for one): the base was read from the destination',
    );
    const m2 = (await readRunManifest(w.destinations.get('default')!, { job: 'inc', runId: second.id }))
      .document;
    t.ok(isChunkedManifest(m2) && m2.totals.newBytes === 0, 'still incremental: nothing stored again');
  },
);

t.test('a parked incremental run resumes from its checkpoint and stores no pack twice', async (t) => {
  const w = await makeWorld(t, { files });
  const store = w.destinations.get('default')!;
  await w.addJob({ id: 'inc', incremental: true });
  // The first pack and the pack index its checkpoint writes land; the next write is throttled.
  w.faults.arm({ target: 'destination', fault: 'throttle', op: 'put', after: 2, times: 0 });
  const parked = await w.runNow('inc');
  t.equal(parked.status, 'parked', JSON.stringify(parked.detail));
  const packDir = join(w.destDirs.default!, 'jobs', 'inc', 'packs');
  const count = () =>
    readdirSync(packDir, { withFileTypes: true, recursive: true }).filter(
      (e) => e.isFile() && e.parentPath.includes(`${join('/', 'data')}`),
    ).length;
  const storedBefore = count();
  t.ok(storedBefore >= 1, 'a pack was stored before the park');
  w.faults.disarm();
  w.clock.now = new Date(w.clock.now.getTime() + 61_000);
  await w.service.poll();
  await w.service.idle();
  const done = (await w.state.runs.get(parked.id))!;
  t.equal(done.status, 'ok', JSON.stringify(done.detail));
  const m = (await readRunManifest(store, { job: 'inc', runId: parked.id })).document;
  t.ok(isChunkedManifest(m));
  if (isChunkedManifest(m)) {
    t.same(
      readdirSync(packDir),
      [m.chunkKey],
      'the resumed attempt kept the chunk key its checkpoint carries',
    );
    t.ok(
      count() <= m.totals.packs + storedBefore,
      'at most the packs stored before the park are left over (none when their pack index was written)',
    );
  }
  const v = await verifyRun(store, { job: 'inc', runId: parked.id, secretKey: w.breakGlassSecret });
  t.ok(v.ok, 'the resumed run verifies offline');
});

t.test('retention reclaims the packs only pruned runs used; the kept run still verifies', async (t) => {
  const w = await makeWorld(t, { files });
  const store = w.destinations.get('default')!;
  await w.addJob({ id: 'inc', incremental: true, retention: { keepLast: 1 } });
  const first = await w.runNow('inc');
  t.equal(first.status, 'ok');
  // The large file replaced whole: its old chunks are used by the first run only. (The clock moves
  // on so the two runs have distinct start times: retention orders by them.)
  writeFileSync(join(w.sourceDir, 'large.bin'), noise(16 * 1024 * 1024, 4242));
  w.clock.now = new Date(w.clock.now.getTime() + 60_000);
  const second = await w.runNow('inc');
  t.equal(second.status, 'ok');
  const packsDir = join(w.destDirs.default!, 'jobs', 'inc', 'packs');
  const before = bytesUnder(packsDir);

  // Young packs are never reclaimed (a run may be writing them): the first pass prunes the run only.
  const [young] = await w.service.pruneAll();
  t.same(young!.pruned, [first.id], 'the older run is pruned');
  t.equal(young!.destinations[0]!.packs?.deletedPacks ?? 0, 0, 'packs younger than the grace period stay');

  w.clock.now = new Date(w.clock.now.getTime() + 7 * 3_600_000);
  const [res] = await w.service.pruneAll();
  const packs = res!.destinations[0]!.packs!;
  t.ok(packs.complete, JSON.stringify(packs));
  t.ok(packs.deletedPacks + packs.repackedPacks >= 1, 'packs only the pruned run used are reclaimed');
  t.ok(packs.freedBytes > 8 * 1024 * 1024, `freed ${packs.freedBytes} bytes (the old large file)`);
  t.ok(bytesUnder(packsDir) <= before - packs.freedBytes + 1024 * 1024, 'the destination shrank accordingly');
  const v = await verifyRun(store, { job: 'inc', runId: second.id, secretKey: w.breakGlassSecret });
  t.ok(v.ok, 'the kept run verifies offline after the reclaim');
});

t.test('a cache that could not keep a base of this size: the read-back builds none', async (t) => {
  // The budget (10) is under the run's 31 records: mayKeep says no before anything is built, so
  // the read-back is asked for no base and the cache is never handed one to refuse.
  class Counting extends ChunkedBaseCache {
    puts = 0;
    override put(...args: Parameters<ChunkedBaseCache['put']>): void {
      this.puts++;
      super.put(...args);
    }
  }
  const small = new Counting(10);
  const roomy = new Counting(baseCacheWeightOf(undefined));
  for (const [label, cache, puts] of [
    ['under budget', small, 0],
    ['the default budget', roomy, 1],
  ] as const) {
    const w = await makeWorld(t, {
      files,
      service: { executor: { checkpointIntervalMs: 0, workers: 0, baseCache: cache } },
    });
    await w.addJob({ id: 'inc', incremental: true });
    const first = await w.runNow('inc');
    t.equal(first.status, 'ok', label);
    t.equal(cache.puts, puts, `${label}: ${puts} base handed to the cache`);
    t.equal(cache.size, puts, `${label}: ${puts} kept`);
    // Either way the next run builds on the first (read from the store when nothing was kept).
    const second = await w.runNow('inc');
    t.equal(second.status, 'ok');
    const m2 = (await readRunManifest(w.destinations.get('default')!, { job: 'inc', runId: second.id }))
      .document;
    t.ok(isChunkedManifest(m2) && m2.totals.newBytes === 0, `${label}: nothing stored again`);
  }
});
