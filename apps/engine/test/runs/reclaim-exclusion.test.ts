/**
 * Reclaiming an incremental job's packs excludes runs of the job for its whole length (docs/runs.md
 * "Packs of incremental jobs"): a run that started mid-reclaim could deduplicate against a pack the
 * reclaim already counted dead, pass its own read-back while the pack was still there, and be
 * recorded `ok` moments before the pack is deleted, unrestorable.
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { verifyRun } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import t, { type Test } from 'tap';
import { runLock } from '../../src/runs/instance-id.ts';
import { acquirePin, type PinPurpose, releasePin } from '../../src/runs/pins.ts';
import { clearReclaim, markReclaim, RECLAIM_PREFIX } from '../../src/runs/reclaim-marker.ts';
import { noise } from './helpers/noise.ts';
import { makeWorld } from './helpers/world.ts';

/**
 * Makes the store's first deletion under the job's packs wait until `release()`; `atDelete`
 * resolves when it is reached.
 */
function holdFirstPackDelete(store: ObjectStore): { atDelete: Promise<void>; release: () => void } {
  let reached!: () => void;
  const atDelete = new Promise<void>((r) => {
    reached = r;
  });
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const del = store.delete.bind(store);
  let held = false;
  store.delete = async (key: string) => {
    if (!held && key.includes('/packs/')) {
      held = true;
      reached();
      await gate;
    }
    return del(key);
  };
  return { atDelete, release };
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

const OLD = noise(12 * 1024 * 1024, 99);
const NEW = noise(12 * 1024 * 1024, 4242);

/** Two runs with `keepLast: 1`; the second replaced the large file, so the first run's packs are dead once it is pruned. */
async function twoRuns(t: Test) {
  const files: Record<string, Uint8Array> = { 'large.bin': OLD };
  for (let i = 0; i < 10; i++) files[`small/${i}.bin`] = noise(2000 + i, i + 1);
  const w = await makeWorld(t, { files });
  await w.addJob({ id: 'inc', incremental: true, retention: { keepLast: 1 } });
  const first = await w.runNow('inc');
  t.equal(first.status, 'ok');
  writeFileSync(join(w.sourceDir, 'large.bin'), NEW);
  w.clock.now = new Date(w.clock.now.getTime() + 60_000);
  const second = await w.runNow('inc');
  t.equal(second.status, 'ok');
  const [young] = await w.service.pruneAll();
  t.same(young!.pruned, [first.id], 'the first run is pruned; its packs are young and stay');
  // Past the grace period: the next pass reclaims the first run's packs.
  w.clock.now = new Date(w.clock.now.getTime() + 7 * 3_600_000);
  return w;
}
t.test(
  'a run triggered while packs are reclaimed does not start; the run after the reclaim verifies',
  async (t) => {
    const w = await twoRuns(t);
    const store = w.destinations.get('default')!;
    // Hold the reclaim at its first deletion: by then it has surveyed the runs and counted the old
    // large file's chunks dead, and the pack index describing them is still in the store.
    const { atDelete, release } = holdFirstPackDelete(store);
    const pass = w.service.pruneAll();
    await atDelete;

    // The source goes back to the old content: a run now would find every chunk of it described.
    writeFileSync(join(w.sourceDir, 'large.bin'), OLD);
    const during = await w.service.trigger('inc');
    t.equal(during.kind, 'reclaiming', 'the trigger is refused while the job is being reclaimed');
    await w.service.idle();
    t.equal((await w.state.runs.listForJob('inc')).length, 2, 'no run was started');

    release();
    const [res] = await pass;
    const packs = res!.destinations[0]!.packs!;
    t.ok(packs.complete && packs.deletedPacks + packs.repackedPacks >= 1, JSON.stringify(packs));

    // Every run recorded ok verifies offline (without the exclusion, the run started mid-reclaim was
    // recorded ok and then lost the packs it referenced; checked before any later run could store the
    // same chunks again).
    const verifyAll = async () => {
      for (const run of await w.state.runs.listForJob('inc')) {
        if (run.status !== 'ok' || run.prunedAt) continue;
        const v = await verifyRun(store, { job: 'inc', runId: run.id, secretKey: w.breakGlassSecret }).catch(
          (e: { code?: string }) => ({ ok: false, code: e.code }),
        );
        t.ok(v.ok, `run ${run.id} (recorded ok) verifies offline ${'code' in v ? v.code : ''}`);
      }
    };
    await verifyAll();
    const third = await w.runNow('inc');
    t.equal(third.status, 'ok', JSON.stringify(third.detail));
    await verifyAll();
  },
);

t.test('another engine holding the job: the reclaim waits for the next pass', async (t) => {
  const w = await twoRuns(t);
  const other = await w.state.leases.acquire(runLock('inc'), 'another-engine', 60_000);
  t.ok(other, 'another holder has the run lock of the job');
  t.match(
    await w.service.trigger('inc'),
    { kind: 'in-flight', runId: null },
    'running it, as far as this engine knows',
  );
  await markReclaim(w.state, 'inc', other!, w.clock.now);
  t.same(await w.service.trigger('inc'), { kind: 'reclaiming' }, 'reclaiming it: its marker says so');
  await clearReclaim(w.state, 'inc');
  const [deferred] = await w.service.pruneAll();
  t.equal(
    deferred!.destinations[0]!.packs,
    undefined,
    'no pack is reclaimed while another engine holds the job',
  );
  t.equal((await w.state.leases.get(runLock('inc')))?.holder, 'another-engine', 'its lock is left alone');

  await w.state.leases.release(runLock('inc'), 'another-engine', other!.fence);
  const [res] = await w.service.pruneAll();
  const packs = res!.destinations[0]!.packs!;
  t.ok(packs.complete && packs.deletedPacks + packs.repackedPacks >= 1, JSON.stringify(packs));
  t.equal(await w.state.leases.get(runLock('inc')), null, 'the reclaim gave the lock back');
  const third = await w.runNow('inc');
  t.equal(third.status, 'ok', 'the next run starts');
});

t.test('the hold lost mid-reclaim (another engine took the job over): nothing more is deleted', async (t) => {
  const w = await twoRuns(t);
  const store = w.destinations.get('default')!;
  const packsDir = join(w.destDirs.default!, 'jobs', 'inc', 'packs');
  const { atDelete, release } = holdFirstPackDelete(store);
  const pass = w.service.pruneAll();
  await atDelete;
  const before = filesUnder(packsDir);
  // This engine stalls past its lease; another one takes the job's run lock.
  w.clock.now = new Date(w.clock.now.getTime() + 3_600_000);
  const other = await w.state.leases.acquire(runLock('inc'), 'another-engine', 60_000);
  t.ok(other, 'the expired hold is taken over');
  release();
  const [res] = await pass;
  const packs = res!.destinations[0]!.packs!;
  t.equal(packs.complete, false, 'the reclaim did not complete');
  t.equal(packs.code, 'ERR_STATE_LEASE_LOST', 'it stopped on the lost hold');
  t.equal(packs.deletedPacks, 0, 'no pack was deleted after the hold was lost');
  const after = filesUnder(packsDir);
  t.equal(before.length - after.length, 1, 'only the deletion already under way happened');
  t.equal(
    (await w.state.leases.get(runLock('inc')))?.holder,
    'another-engine',
    "the other engine's lock is left alone",
  );
  const latest = (await w.state.runs.listForJob('inc', { limit: 1 }))[0]!;
  const v = await verifyRun(store, { job: 'inc', runId: latest.id, secretKey: w.breakGlassSecret });
  t.ok(v.ok, 'the kept run still verifies');
});

t.test(
  'readers defer the reclaim: a drill or apply pin of the job or of no named job; an approval does not',
  async (t) => {
    const w = await twoRuns(t);
    const latest = (await w.state.runs.listForJob('inc', { limit: 1 }))[0]!;
    const pin = (id: string, purpose: PinPurpose, job: string | null) =>
      acquirePin(w.state.settings, { id, purpose, job, runId: latest.id, now: w.clock.now });

    await pin('drill.d1', 'drill', 'inc');
    t.equal(
      (await w.service.pruneAll())[0]!.destinations[0]!.packs,
      undefined,
      'a drill of the job defers it',
    );
    await releasePin(w.state.settings, 'drill.d1');
    await pin('apply.a1', 'restore-apply', null);
    t.equal(
      (await w.service.pruneAll())[0]!.destinations[0]!.packs,
      undefined,
      'an apply whose job is not known defers it',
    );
    await releasePin(w.state.settings, 'apply.a1');
    await pin('apply.a2', 'restore-apply', 'another-job');
    await pin('approval.p1', 'restore-approval', 'inc');
    const packs = (await w.service.pruneAll())[0]!.destinations[0]!.packs!;
    t.ok(
      packs.complete && packs.deletedPacks + packs.repackedPacks >= 1,
      `another job's apply and a pending approval (nothing read yet) do not: ${JSON.stringify(packs)}`,
    );
    t.equal(await w.state.settings.get(`${RECLAIM_PREFIX}inc`), undefined, 'the reclaim marker is cleared');
  },
);
