/**
 * Retention's pack reclaim and the readers of a job's runs keep out of each other's way
 * (runs/reclaim-marker.ts), through HTTP against a started engine on a real SQLite state store: a
 * restore apply in progress defers the reclaim of its job's packs, and a reclaim under way makes a
 * restore apply or a drill of the job refuse to start (409) rather than find its packs repacked
 * half-way.
 */
import { join } from 'node:path';
import t from 'tap';
import { runLock } from '../../src/runs/instance-id.ts';
import { PIN_PREFIX } from '../../src/runs/pins.ts';
import { markReclaim, RECLAIM_REFUSAL } from '../../src/runs/reclaim-marker.ts';
import { holdReads, incrementalJob, restoreWorld } from './helpers.ts';

const w = await restoreWorld(t);
const state = w.e.app.state;
const store = w.e.app.destinations.get('default')!;

/** An incremental job with `keepLast: 1`, two ok runs over `n` small files. */
function smallFiles(job: string, n: number): Promise<string> {
  const files: Record<string, string> = {};
  for (let i = 0; i < n; i++) files[`f${i}.txt`] = `record ${i}\n`.repeat(20);
  return incrementalJob(w, job, files, { 'f0.txt': 'changed\n' });
}

const packsOf = async (job: string) =>
  (await w.e.app.runs.pruneAll()).find((r) => r.job === job)!.destinations[0]!.packs;

t.test("a restore apply in progress defers the reclaim of its job's packs", async (t) => {
  const runId = await smallFiles('inc-apply', 1500);
  // Every pack read waits until released, so the apply is surely still reading during the pass.
  const release = holdReads(store, (key) => key.includes('/packs/') && key.includes('/data/'));
  t.teardown(release);
  const r = await w.post('/restore', {
    runId,
    target: { namespaceId: join(w.roots, 'inc-apply') },
    confirm: true,
  });
  t.equal(r.status, 202, r.text);
  const applyId = r.json().applyId as string;
  t.equal(await packsOf('inc-apply'), undefined, 'no reclaim while the apply reads the job packs');
  release();
  let view = (await w.get(`/restore/applies?id=${applyId}`)).json();
  for (let i = 0; i < 2400 && view.status === 'running'; i++) {
    await new Promise((res) => setTimeout(res, 25));
    view = (await w.get(`/restore/applies?id=${applyId}`)).json();
  }
  t.equal(view.status, 'succeeded', 'the apply read the whole run');
  // Its pin is released as the apply settles (the status may show a moment before).
  for (let i = 0; i < 400 && (await state.settings.get(`${PIN_PREFIX}apply.${applyId}`)) !== undefined; i++)
    await new Promise((res) => setTimeout(res, 25));
  t.ok(await packsOf('inc-apply'), 'the next pass reclaims once the apply ended');
});

t.test('a reclaim under way: a restore apply and a drill of the job are refused (409)', async (t) => {
  const job = 'inc-busy';
  const runId = await smallFiles(job, 5);
  // Another engine sharing the state store is reclaiming the job's packs: it holds the job's run
  // lock and has set the marker.
  const lease = await state.leases.acquire(runLock(job), 'another-engine', 60_000);
  t.ok(lease);
  await markReclaim(state, job, lease!, new Date());
  const body = { runId, target: { namespaceId: join(w.roots, job) }, confirm: true };
  const refused = await w.post('/restore', body);
  t.equal(refused.status, 409, refused.text);
  t.equal(refused.json().error, RECLAIM_REFUSAL);
  const pins = await state.settings.list(PIN_PREFIX);
  t.notOk(
    pins.some((p) => (p.value as { runId?: string }).runId === runId),
    'the refused apply left no pin behind',
  );
  const drill = await w.post('/drill/run', { job });
  t.equal(drill.status, 409, drill.text);
  t.equal(drill.json().error, RECLAIM_REFUSAL);

  // The other engine crashed without clearing its marker and, restarted (same holder id), runs the
  // job: its lock is taken again under a new fence, so the marker is stale.
  await state.leases.release(runLock(job), 'another-engine', lease!.fence);
  const again = await state.leases.acquire(runLock(job), 'another-engine', 60_000);
  t.ok(again && again.fence > lease!.fence, 'taken again under a new fence');
  const view = await w.apply(body);
  t.equal(view.status, 'succeeded', 'a stale marker does not hold readers back');
  await state.leases.release(runLock(job), 'another-engine', again!.fence);
});
