/**
 * `GET /admin/retention` (what the job's last retention pass did) and `GET /admin/retention/packs`
 * (the dry run of the pack reclaim: what it would delete, repack and free now), through HTTP
 * against a started engine on a real SQLite state store and a filesystem destination. The dry run
 * changes nothing; the reclaim that follows frees what it announced.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { incrementalJob, restoreWorld } from '../restore/helpers.ts';

const w = await restoreWorld(t);
const packsDir = (job: string) => join(w.e.dataDir, 'destination', 'jobs', job, 'packs');

/** Every file under `dir` with its size and modification time. */
function snapshot(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => {
      const st = statSync(join(e.parentPath, e.name));
      return `${join(e.parentPath, e.name)} ${st.size} ${st.mtimeMs}`;
    })
    .sort();
}

t.test('the dry run reports what the reclaim then frees; the last pass is readable', async (t) => {
  // A 2 MiB file replaced whole: the first run's pack holds mostly chunks the second does not use.
  await incrementalJob(
    w,
    'dry',
    { 'big.bin': randomBytes(2 * 1024 * 1024), 'small.txt': 'small\n' },
    { 'big.bin': randomBytes(2 * 1024 * 1024) },
  );
  const [pass] = (await w.e.app.runs.pruneAll()).filter((r) => r.job === 'dry');
  t.equal(pass!.pruned.length, 1, 'the older run is pruned (its packs are young and stay)');

  const last = await w.get('/retention?id=dry');
  t.equal(last.status, 200, last.text);
  t.same(last.json().last.destinations[0].pruned, pass!.pruned, 'the last pass, as recorded');

  const young = await w.get('/retention/packs?id=dry');
  t.equal(young.status, 200, young.text);
  const y = young.json().destinations[0].plan;
  t.equal(y.runs, 1);
  t.ok(
    y.packs.total >= 2 && y.packs.young === y.packs.total,
    `every pack is young: ${JSON.stringify(y.packs)}`,
  );
  t.equal(y.freesBytes, 0, 'young packs are never reclaimed, so nothing would be freed');

  // Seven hours later (file times moved back, as the store lists them).
  const past = (Date.now() - 7 * 3_600_000) / 1000;
  for (const f of snapshot(packsDir('dry'))) utimesSync(f.split(' ')[0]!, past, past);
  const before = snapshot(packsDir('dry'));
  const plan = await w.get('/retention/packs?id=dry');
  t.equal(plan.status, 200, plan.text);
  const p = plan.json().destinations[0].plan;
  t.equal(p.packs.young, 0);
  t.ok(p.packs.dead + p.packs.repack >= 1, `packs to reclaim: ${JSON.stringify(p.packs)}`);
  const announced = p.freesBytes + p.repackFreesBytes;
  t.ok(announced > 1024 * 1024, `about the old 2 MiB file would be freed (${announced} bytes)`);
  t.same(snapshot(packsDir('dry')), before, 'the dry run changed nothing');

  const [res] = (await w.e.app.runs.pruneAll()).filter((r) => r.job === 'dry');
  const packs = res!.destinations[0]!.packs!;
  t.ok(packs.complete, JSON.stringify(packs));
  t.ok(
    Math.abs(packs.freedBytes - announced) < 256 * 1024,
    `freed ${packs.freedBytes} bytes, announced ${announced}`,
  );
  const after = (await w.get('/retention/packs?id=dry')).json().destinations[0].plan;
  t.equal(after.packs.dead + after.packs.repack, 0, 'nothing left to reclaim');

  // Two callers at once: one survey, shared (a third asks once it is done: a new plan).
  const [a, b] = await Promise.all([w.get('/retention/packs?id=dry'), w.get('/retention/packs?id=dry')]);
  t.equal(a.json().destinations[0].plan.plannedAt, b.json().destinations[0].plan.plannedAt, 'one plan');
  await new Promise((r) => setTimeout(r, 5));
  const c = await w.get('/retention/packs?id=dry');
  t.not(c.json().destinations[0].plan.plannedAt, a.json().destinations[0].plan.plannedAt, 'then a fresh one');
});

t.test("the dry run takes one of the engine's restore read slots: none free, 429 at once", async (t) => {
  const slots = w.e.app.restores.reads;
  // Other callers hold every slot of the engine (as restore dry runs or verifies would).
  const held: Array<() => void> = [];
  for (let i = 0; i < slots.perEngine; i++) held.push(slots.acquire(`subject:other-${i}`)!);
  t.teardown(() => {
    for (const release of held) release();
  });
  const busy = await w.get('/retention/packs?id=dry');
  t.equal(busy.status, 429, busy.text);
  t.equal(busy.headers.get('retry-after'), '1');
  for (const release of held.splice(0)) release();
  t.equal((await w.get('/retention/packs?id=dry')).status, 200, 'a slot free: planned');
});

t.test('a job without packs, an unknown job and a bad id', async (t) => {
  const full = await w.post('/jobs', {
    id: 'full',
    cadenceSeconds: 3600,
    source: { type: 'files', path: w.roots },
  });
  t.equal(full.status, 200, full.text);
  const none = await w.get('/retention/packs?id=full');
  t.equal(none.status, 200);
  t.same(none.json().destinations, [{ destination: 'default' }], 'no packs: no plan');
  t.same((await w.get('/retention?id=full')).json(), { id: 'full', last: null }, 'no pass yet');
  t.equal((await w.get('/retention/packs?id=nope')).status, 404);
  t.equal((await w.get('/retention?id=nope')).status, 404);
  t.equal((await w.get('/retention/packs?id=..%2Fx')).status, 400);
  t.equal((await w.get('/retention/packs')).status, 400);
});
