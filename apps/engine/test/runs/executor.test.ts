import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns, openRun, verifyRun } from '@coffer/archive';
import t from 'tap';
import { makeWorld } from './helpers/world.ts';

t.test('a run seals every record, reads back, and the break-glass key opens it', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs' });
  const run = await w.runNow('docs');
  t.equal(run.status, 'ok', JSON.stringify(run));
  t.equal(run.records, 3);
  t.equal(run.warnings, 0);
  t.equal(run.prevRunId, null);
  t.match(run.destinations.default, { state: 'verified' });
  const store = w.destinations.get('default')!;
  const verdict = await verifyRun(store, { job: 'docs', runId: run.id, secretKey: w.breakGlassSecret });
  t.ok(verdict.ok, 'break-glass verify');
  const opened = await openRun(store, { job: 'docs', runId: run.id, secretKey: w.breakGlassSecret });
  const names: string[] = [];
  for await (const e of opened.records()) names.push(e.name);
  t.same(names.sort(), ['a.txt', 'dir/b.txt', 'dir/c.bin']);
  t.equal(await w.state.checkpoints.get(run.id), null, 'checkpoint dropped once ok');
  t.ok(w.logs.some((l) => l.event === 'run-ok' && l.runId === run.id));

  const second = await w.runNow('docs');
  t.equal(second.prevRunId, run.id, 'second run chains to the first');
});

t.test('no break-glass key: engine not fully configured, nothing written', async (t) => {
  const w = await makeWorld(t, { breakGlass: false });
  await w.addJob({ id: 'docs' });
  const run = await w.runNow('docs');
  t.equal(run.status, 'failed');
  t.equal(run.reason, 'engine not fully configured');
  t.match(run.causeDigest, /^[0-9a-f]{12}$/);
  t.same(readdirSync(w.destDirs.default!), [], 'destination untouched');
  const line = w.logs.find((l) => l.event === 'run-failed');
  t.equal(line?.causeDigest, run.causeDigest, 'the log line carries the same cause digest');
});

t.test('destination faults classify into the closed list', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs' });
  w.faults.arm({ target: 'destination', fault: 'access-denied', times: 0 });
  const denied = await w.runNow('docs');
  t.equal(denied.reason, 'destination access error');
  w.faults.disarm();
  w.faults.arm({ target: 'destination', fault: 'reject', code: 'NoSuchBucket', times: 0 });
  const rejected = await w.runNow('docs');
  t.equal(rejected.reason, 'destination rejected the write (NoSuchBucket)');
  w.faults.disarm();
  t.same(await listRuns(w.destinations.get('default')!, 'docs'), [], 'no sealed run left behind');
});

t.test('source faults: missing resource fails; a vanished record is a warning', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'gone', source: { type: 'files', path: join(w.sourceDir, 'nope') } });
  const gone = await w.runNow('gone');
  t.equal(gone.status, 'failed');
  t.equal(gone.reason, 'source resource missing');

  await w.addJob({ id: 'docs' });
  w.faults.arm({ target: 'source', fault: 'vanish', times: 1 });
  const warned = await w.runNow('docs');
  t.equal(warned.status, 'ok');
  t.equal(warned.warnings, 1);
  t.equal(warned.records, 2);

  w.faults.arm({ target: 'source', fault: 'read-error', times: 1 });
  const bad = await w.runNow('docs');
  t.equal(bad.reason, 'source read error');
});

t.test('a throttle parks the run (no strike), the ladder resumes it from its checkpoint', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs' });
  // Let the first shard land, then throttle the next write.
  w.faults.arm({ target: 'destination', fault: 'throttle', times: 2, op: 'put' });
  const parked = await w.runNow('docs');
  t.equal(parked.status, 'parked');
  t.equal(parked.reason, null);
  t.match((parked.detail as { retryAt: string }).retryAt, /Z$/);
  t.equal((parked.detail as { strikes: number }).strikes, 0);
  // Before retryAt nothing happens.
  await w.service.poll();
  t.equal((await w.state.runs.get(parked.id))?.status, 'parked');
  // The ladder's first step is 60 s; the second park waits 120 s.
  w.clock.now = new Date(w.clock.now.getTime() + 61_000);
  await w.service.poll();
  await w.service.idle();
  const again = (await w.state.runs.get(parked.id))!;
  t.equal(again.status, 'parked');
  t.equal((again.detail as { parks: number }).parks, 2);
  w.clock.now = new Date(w.clock.now.getTime() + 121_000);
  await w.service.poll();
  await w.service.idle();
  const done = (await w.state.runs.get(parked.id))!;
  t.equal(done.status, 'ok');
  t.equal(done.reason, null);
  t.equal((await w.state.runs.listForJob('docs')).length, 1, 'one run, resumed');
  t.equal((await listRuns(w.destinations.get('default')!, 'docs')).length, 1, 'one archive');
});

t.test('several destinations: each gets a verified copy; one failing fails the run', async (t) => {
  const w = await makeWorld(t, { destinations: ['default', 'offsite'] });
  await w.addJob({ id: 'docs' });
  const run = await w.runNow('docs');
  t.equal(run.status, 'ok');
  t.match(run.destinations, { default: { state: 'verified' }, offsite: { state: 'verified' } });
  for (const id of ['default', 'offsite']) {
    const v = await verifyRun(w.destinations.get(id)!, {
      job: 'docs',
      runId: run.id,
      secretKey: w.breakGlassSecret,
    });
    t.ok(v.ok, `${id} copy verifies`);
  }
  w.faults.arm({ target: 'destination', destination: 'offsite', fault: 'access-denied', times: 0 });
  const half = await w.runNow('docs');
  t.equal(half.status, 'failed');
  t.equal(half.reason, 'destination access error');
  t.match(half.destinations, {
    default: { state: 'verified' },
    offsite: { state: 'failed', reason: 'destination access error' },
  });
});

t.test('a job with an unknown destination fails with a destination access error', async (t) => {
  const w = await makeWorld(t);
  await w.addJob({ id: 'docs', destinations: ['nowhere'] });
  const run = await w.runNow('docs');
  t.equal(run.reason, 'destination access error');
});
