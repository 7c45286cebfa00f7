import { listRuns } from '@coffer/archive';
import t from 'tap';
import { STAND_DOWN_PREFIX, TICK_SETTING, type TickRecord } from '../../src/runs/service.ts';
import { runObjects } from '../../src/runs/view.ts';
import { makeWorld } from './helpers/world.ts';

const HOUR = 3_600_000;

t.test('the tick dispatches due jobs by cadence and records itself', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', cadenceSeconds: 3600 });
  const first = await w.service.tick('test');
  await w.service.idle();
  t.equal(first?.dispatched.length, 1, 'a never-run job is due');
  const tick = await w.state.settings.get<TickRecord>(TICK_SETTING);
  t.equal(tick?.reason, 'test');
  t.equal(tick?.by, w.service.holder);
  const second = await w.service.tick('test');
  t.equal(second?.dispatched.length, 0, 'not due again within its cadence');
  w.clock.now = new Date(w.clock.now.getTime() + HOUR + 1000);
  const third = await w.service.tick('test');
  await w.service.idle();
  t.equal(third?.dispatched.length, 1, 'due again after its cadence');
  const ring = await w.state.runs.listForJob('docs');
  t.equal(ring.length, 2);
  t.ok(ring.every((r) => r.status === 'ok' && r.trigger === 'schedule'));
});

t.test('a paused job gets no dispatch and no prune; the stand-down is recorded', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', retention: { keepLast: 1 } });
  await w.runNow('docs');
  w.clock.now = new Date(w.clock.now.getTime() + 1000);
  await w.runNow('docs');
  await w.addJob({ id: 'docs', retention: { keepLast: 1 }, enabled: false });
  w.clock.now = new Date(w.clock.now.getTime() + 2 * HOUR);
  const tick = await w.service.tick('test');
  await w.service.idle();
  t.same(tick?.dispatched, []);
  t.ok(tick?.standDowns.includes('docs'));
  t.equal((await listRuns(w.destinations.get('default')!, 'docs')).length, 2, 'nothing pruned while paused');
  const marker = await w.state.settings.get<Record<string, string>>(`${STAND_DOWN_PREFIX}docs`);
  t.ok(marker?.dispatch && marker.prune, 'both stand-downs recorded');
  t.equal((await w.service.trigger('docs')).kind, 'paused', 'no manual dispatch either');
});

t.test('retention keeps the newest N, never the latest ok run, and marks successors', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', retention: { keepLast: 2 } });
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    w.clock.now = new Date(w.clock.now.getTime() + 1000);
    ids.push((await w.runNow('docs')).id);
  }
  const pruned = await w.service.pruneAll();
  t.same(pruned[0]?.pruned.sort(), ids.slice(0, 2).sort());
  const left = (await listRuns(w.destinations.get('default')!, 'docs')).map((r) => r.runId).sort();
  t.same(left, ids.slice(2).sort());
  const objects = await runObjects(w.state, await w.state.runs.listForJob('docs'));
  const byId = new Map(objects.map((o) => [o.runId, o]));
  t.equal(byId.get(ids[0]!)?.prevRunIdStatus, 'none');
  t.equal(byId.get(ids[1]!)?.prevRunIdStatus, 'pruned');
  t.equal(byId.get(ids[2]!)?.prevRunIdStatus, 'pruned', 'successor of a pruned run says so');
  t.equal(byId.get(ids[3]!)?.prevRunIdStatus, 'retained');
  t.match(byId.get(ids[0]!)?.destinations, { default: { state: 'pruned' } });

  // keepDays alone, with every run old: the latest ok run is still kept.
  await w.addJob({ id: 'docs', retention: { keepDays: 1 } });
  w.clock.now = new Date(w.clock.now.getTime() + 10 * 24 * HOUR);
  await w.service.pruneAll();
  const last = (await listRuns(w.destinations.get('default')!, 'docs')).map((r) => r.runId);
  t.same(last, [ids[3]], 'never the latest ok run');
});

t.test('deleting a job stops scheduling and drops its ring but keeps archives', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs' });
  const run = await w.runNow('docs');
  await w.state.jobs.delete('docs');
  w.clock.now = new Date(w.clock.now.getTime() + 2 * HOUR);
  const tick = await w.service.tick('test');
  t.same(tick?.dispatched, []);
  t.same(await w.state.runs.listForJob('docs'), []);
  t.same(
    (await listRuns(w.destinations.get('default')!, 'docs')).map((r) => r.runId),
    [run.id],
    'archive untouched',
  );
});

t.test('one run per job at a time: a second trigger is refused while one is in flight', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs' });
  const a = await w.service.trigger('docs');
  const b = await w.service.trigger('docs');
  t.equal(a.kind, 'started');
  t.equal(b.kind, 'in-flight');
  t.equal(b.kind === 'in-flight' && b.runId, a.kind === 'started' && a.runId);
  await w.service.idle();
  t.equal((await w.service.trigger('nope')).kind, 'not-found');
});
