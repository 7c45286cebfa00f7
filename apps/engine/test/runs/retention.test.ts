/**
 * Retention never deletes the last good copy (docs/runs.md "Retention"): the latest ok run is
 * established from each destination's signed manifests, not from the 50-entry history ring; a
 * destination whose latest ok run cannot be established is not pruned at all; runs a fresh state
 * database does not know are adopted, not deleted. Real SQLite state, real runs through the run
 * service, real filesystem destinations and the loopback S3 server (radosgw).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layout, listRuns, MANIFEST_MAX_BYTES, verifyRun } from '@coffer/archive';
import { createS3Store, type ObjectStore } from '@coffer/objectstore';
import { openState } from '@coffer/state';
import { createTestBucket, tempDir } from '@coffer/testkit';
import t from 'tap';
import { RETENTION_SETTING_PREFIX } from '../../src/runs/retention.ts';
import { createRunService } from '../../src/runs/service.ts';
import { makeWorld, type World } from './helpers/world.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
type T = Parameters<typeof makeWorld>[0];

async function s3Store(): Promise<ObjectStore> {
  const b = await createTestBucket('retention');
  return createS3Store({
    bucket: b.bucket,
    prefix: 'dest/coffer',
    endpoint: b.endpoint,
    region: b.region,
    forcePathStyle: true,
    credentials: b.credentials,
  });
}

/** A world whose one destination is the filesystem (`fs`) or a fresh bucket on loopback S3. */
async function world(t: T, backend: 'fs' | 's3'): Promise<{ w: World; store: ObjectStore }> {
  if (backend === 'fs') {
    const w = await makeWorld(t);
    return { w, store: w.destinations.get('default')! };
  }
  const store = await s3Store();
  const w = await makeWorld(t, { service: { destinations: new Map([['default', store]]) } });
  return { w, store };
}

/** A second engine on a FRESH state database, same keys, pointed at the same destinations. */
async function freshEngine(t: T, w: World, stores: ReadonlyMap<string, ObjectStore>) {
  const dir = tempDir(t, 'coffer-retention-fresh-');
  const state = await openState({ dataDir: dir, now: () => w.clock.now });
  t.teardown(() => state.close());
  const service = createRunService({
    state,
    keys: w.keys,
    destinations: stores,
    log: { info() {}, warn() {}, error() {} },
    dataDir: dir,
    now: () => w.clock.now,
    executor: { checkpointIntervalMs: 0, workers: 0 },
  });
  t.teardown(() => service.stop());
  return { state, service };
}

const runIds = async (store: ObjectStore, job = 'docs') => (await listRuns(store, job)).map((r) => r.runId);

async function readsBack(w: World, store: ObjectStore, runId: string): Promise<boolean> {
  const v = await verifyRun(store, {
    job: 'docs',
    runId,
    secretKey: w.keys.operational.secretKey,
    signerPublicKey: w.keys.signer.publicKey,
  });
  return v.ok;
}

for (const backend of ['fs', 's3'] as const) {
  t.test(`${backend}: 55 failed runs after an ok run older than keepDays: the ok run survives`, async (t) => {
    const { w, store } = await world(t, backend);
    await w.addJob({ id: 'docs', retention: { keepDays: 1 } });
    const older = await w.runNow('docs');
    w.clock.now = new Date(w.clock.now.getTime() + HOUR);
    const ok = await w.runNow('docs');
    t.equal(ok.status, 'ok');
    w.faults.arm({ target: 'source', fault: 'missing', op: 'any', times: 0 });
    for (let i = 0; i < 55; i++) {
      w.clock.now = new Date(w.clock.now.getTime() + HOUR);
      const r = await w.runNow('docs');
      if (r.status !== 'failed') t.fail(`run ${i} ended ${r.status}`);
    }
    w.faults.disarm();
    t.equal(await w.state.runs.latestOk('docs'), null, 'the ok runs rolled out of the 50-run ring');
    w.clock.now = new Date(w.clock.now.getTime() + 10 * DAY);
    const [res] = await w.service.pruneAll();
    t.same(await runIds(store), [ok.id], 'the latest ok run is kept, the older one pruned');
    t.same(res?.pruned, [older.id]);
    t.equal(res?.destinations?.[0]?.latestOk, ok.id, 'established from the destination');
    t.ok(await readsBack(w, store, ok.id), 'and it still reads back verified');
  });

  t.test(
    `${backend}: a fresh state database adopts the destination's runs, never losing the latest`,
    async (t) => {
      const { w, store } = await world(t, backend);
      await w.addJob({ id: 'docs', retention: { keepLast: 10 } });
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        w.clock.now = new Date(w.clock.now.getTime() + HOUR);
        ids.push((await w.runNow('docs')).id);
      }
      // Disaster recovery: the state database is gone; a new engine points at the same destination.
      w.clock.now = new Date(w.clock.now.getTime() + 30 * DAY);
      const fresh = await freshEngine(t, w, new Map([['default', store]]));
      await fresh.state.jobs.upsert({
        id: 'docs',
        cadenceSeconds: 3600,
        source: { type: 'files', path: w.sourceDir },
        destinations: ['default'],
        retention: { keepDays: 7 },
      } as unknown as { id: string });
      t.same(await fresh.state.runs.listForJob('docs'), [], 'the new state knows no run');
      const [res] = await fresh.service.pruneAll();
      t.same(await runIds(store), [ids[3]], 'older adopted runs follow keepDays; the latest stays');
      const d = res?.destinations?.[0];
      t.same([...(d?.adopted ?? [])].sort(), [...ids].sort(), 'every run found is adopted');
      t.equal(d?.latestOk, ids[3], 'the newest adopted run counts as the latest ok run');
      t.ok(await readsBack(w, store, ids[3]!));
      const recorded = await fresh.state.settings.get<{ destinations: { latestOk: string }[] }>(
        `${RETENTION_SETTING_PREFIX}docs`,
      );
      t.equal(recorded?.destinations[0]?.latestOk, ids[3], 'the outcome is recorded');

      // keepLast counts adopted runs like known ones.
      const again = await freshEngine(t, w, new Map([['default', store]]));
      await again.state.jobs.upsert({
        id: 'docs',
        cadenceSeconds: 3600,
        source: { type: 'files', path: w.sourceDir },
        destinations: ['default'],
        retention: { keepLast: 1 },
      } as unknown as { id: string });
      w.clock.now = new Date(w.clock.now.getTime() + HOUR);
      const newer = await again.service.trigger('docs');
      await again.service.idle();
      t.equal(newer.kind, 'started');
      const newId = newer.kind === 'started' ? newer.runId : '';
      await again.service.pruneAll();
      t.same(await runIds(store), [newId], 'the adopted run is pruned once a newer ok run exists');
    },
  );
}

t.test('a destination whose manifests do not verify is not pruned at all', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', retention: { keepLast: 1 } });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    w.clock.now = new Date(w.clock.now.getTime() + HOUR);
    ids.push((await w.runNow('docs')).id);
  }
  const store = w.destinations.get('default')!;
  const manifest = join(w.destDirs.default!, layout.manifest('docs', ids[2]!));
  const original = readFileSync(manifest);
  // One byte of the newest manifest changed: it no longer matches its signature.
  const tampered = Buffer.from(original);
  tampered.writeUInt8(tampered.readUInt8(tampered.length - 2) ^ 1, tampered.length - 2);
  writeFileSync(manifest, tampered);
  const [res] = await w.service.pruneAll();
  t.same(res?.pruned, []);
  t.match(res?.destinations?.[0]?.blocked, {
    reason: 'manifest-unverified',
    code: 'ERR_ARCHIVE_MANIFEST_TAMPERED',
    runId: ids[2],
  });
  t.same((await runIds(store)).sort(), [...ids].sort(), 'nothing deleted');
  t.ok(
    w.logs.some((l) => l.event === 'retention-blocked' && l.reason === 'manifest-unverified'),
    'logged',
  );

  // A run signed by another engine's key (a planted archive) blocks pruning the same way.
  writeFileSync(manifest, original);
  const other = await makeWorld(t, { service: { destinations: w.destinations } });
  await other.addJob({ id: 'docs' });
  other.clock.now = new Date(w.clock.now.getTime() + HOUR);
  const planted = await other.runNow('docs');
  const [res2] = await w.service.pruneAll();
  t.match(res2?.destinations?.[0]?.blocked, {
    reason: 'manifest-unverified',
    code: 'ERR_ARCHIVE_SIGNER_NOT_PINNED',
    runId: planted.id,
  });
  t.equal((await runIds(store)).length, 4, 'nothing deleted');

  // With the planted run gone, pruning resumes.
  rmSync(join(w.destDirs.default!, layout.runPrefix('docs', planted.id)), { recursive: true });
  const [res3] = await w.service.pruneAll();
  t.same(res3?.destinations?.[0]?.blocked, undefined);
  t.same(await runIds(store), [ids[2]]);
});

t.test('a destination that cannot be listed is not pruned; the reason is recorded', async (t) => {
  const w = await makeWorld(t, { destinations: ['a', 'b'] });
  await w.addJob({ id: 'docs', retention: { keepLast: 1 } });
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    w.clock.now = new Date(w.clock.now.getTime() + HOUR);
    ids.push((await w.runNow('docs')).id);
  }
  w.faults.arm({ target: 'destination', destination: 'a', fault: 'fault', op: 'list', times: 0 });
  const [res] = await w.service.pruneAll();
  w.faults.disarm();
  const byDest = new Map((res?.destinations ?? []).map((d) => [d.destination, d]));
  t.match(byDest.get('a')?.blocked, { reason: 'listing-failed' });
  t.same((await runIds(w.destinations.get('a')!)).sort(), [...ids].sort(), 'a: nothing deleted');
  t.same(await runIds(w.destinations.get('b')!), [ids[1]], 'b: pruned as usual');
  const recorded = await w.state.settings.get<{ destinations: { destination: string; blocked?: unknown }[] }>(
    `${RETENTION_SETTING_PREFIX}docs`,
  );
  t.match(recorded?.destinations.find((d) => d.destination === 'a')?.blocked, { reason: 'listing-failed' });
});

t.test('an ok run with a missing shard is not the latest verified run: the one before is kept', async (t) => {
  const w = await makeWorld(t, {
    files: { 'big.bin': new Uint8Array(200_000).map((_, i) => (i * 7919) % 251) },
    service: { executor: { checkpointIntervalMs: 0, workers: 0, shardSize: 64 * 1024 } },
  });
  await w.addJob({ id: 'docs', retention: { keepLast: 1 } });
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    w.clock.now = new Date(w.clock.now.getTime() + HOUR);
    ids.push((await w.runNow('docs')).id);
  }
  const shards = join(w.destDirs.default!, layout.shardsPrefix('docs', ids[2]!));
  t.ok(readdirSync(shards).length > 1, 'the run has several shards');
  rmSync(join(shards, readdirSync(shards)[0]!));
  const [res] = await w.service.pruneAll();
  t.same(
    (await runIds(w.destinations.get('default')!)).sort(),
    [ids[1], ids[2]].sort(),
    'keepLast keeps the damaged newest run, the latest verified one is kept too',
  );
  t.equal(res?.destinations?.[0]?.latestOk, ids[1], 'the newest complete run');
  t.same(res?.pruned, [ids[0]]);
});

t.test('an oversized manifest is refused after a bounded read; nothing is pruned', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', retention: { keepLast: 1 } });
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    w.clock.now = new Date(w.clock.now.getTime() + HOUR);
    ids.push((await w.runNow('docs')).id);
  }
  // Read whole, this object would fail the signature check (ERR_ARCHIVE_MANIFEST_TAMPERED); read
  // with the ceiling it is refused as malformed before anything else looks at it.
  const manifest = join(w.destDirs.default!, layout.manifest('docs', ids[1]!));
  writeFileSync(manifest, Buffer.alloc(MANIFEST_MAX_BYTES + 1, 0x20));
  const [res] = await w.service.pruneAll();
  t.match(res?.destinations?.[0]?.blocked, {
    reason: 'manifest-unverified',
    code: 'ERR_ARCHIVE_MANIFEST_MALFORMED',
    runId: ids[1],
  });
  t.same((await runIds(w.destinations.get('default')!)).sort(), [...ids].sort(), 'nothing deleted');
});
