import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { writeTree } from './helpers/world.ts';

async function engine(
  t: { teardown(fn: () => void | Promise<void>): void },
  extra: Record<string, string> = {},
) {
  const root = tempDir(t, 'coffer-routes-');
  const bg = generateRecipient();
  const pub = join(root, 'bg.pub');
  writeFileSync(pub, encodeKeyFile('recipient-public', bg.publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha', 'b/c.txt': 'charlie' });
  const started = await startEngine(t, {
    ENGINE_BREAK_GLASS_PUBLIC_KEY: pub,
    ENGINE_DESTINATIONS: `offsite=${join(root, 'offsite')}`,
    ...extra,
  });
  const get = (path: string) => http(`${started.url}/admin${path}`, { headers: bearer() });
  const post = (path: string, body: unknown = {}) =>
    http(`${started.url}/admin${path}`, { headers: bearer(), body });
  return { ...started, source, get, post };
}

t.test('trigger, history, runs/at, replication, destination, estate size', async (t) => {
  const e = await engine(t);
  const job = {
    id: 'docs',
    cadenceSeconds: 3600,
    source: { type: 'files', path: e.source },
    destinations: ['default', 'offsite'],
  };
  t.equal((await e.post('/jobs', job)).status, 200);
  const trig = await e.post('/trigger', { id: 'docs' });
  t.equal(trig.status, 200, trig.text);
  const runId = trig.json().runId;
  t.match(runId, /^\d{8}T\d{9}Z-[0-9a-f]{8}$/);
  const again = await e.post('/trigger', { id: 'docs' });
  t.equal(again.status, 409, 'a run is in flight');
  t.equal(again.json().runId, runId);
  await e.app.runs.idle();
  t.equal((await e.post('/trigger', { id: 'nope' })).status, 404);
  t.equal((await e.post('/trigger', {})).status, 400);

  const one = (await e.get('/history?id=docs')).json();
  t.equal(one.runs.length, 1);
  t.match(one.runs[0], {
    runId,
    job: 'docs',
    status: 'ok',
    reason: null,
    warnings: 0,
    records: 2,
    prevRunId: null,
    prevRunIdStatus: 'none',
    destinations: { default: { state: 'verified' }, offsite: { state: 'verified' } },
  });
  const all = (await e.get('/history')).json();
  t.match(all, {
    runsRecordedTotal: 1,
    runsRetainedCount: 1,
    runsRolledOverCount: 0,
    runlogCounterReset: false,
  });
  t.equal(all.jobs[0].id, 'docs');

  const future = new Date(Date.now() + 60_000).toISOString();
  const hit = (await e.get(`/runs/at?job=docs&at=${future}`)).json();
  t.match(hit, { found: true, run: { runId } });
  const miss = (await e.get('/runs/at?job=docs&at=2000-01-01T00:00:00Z')).json();
  t.match(miss, { found: false, window: { count: 1 } });
  t.equal((await e.get('/runs/at?job=docs&at=yesterday')).status, 400);

  const rep = (await e.get('/replication?id=docs')).json();
  t.match(rep.destinations, [
    { id: 'default', configured: true, lastVerified: { runId }, verifiedCopies: 1 },
    { id: 'offsite', configured: true, lastVerified: { runId }, verifiedCopies: 1 },
  ]);
  const dests = (await e.get('/destination')).json().destinations;
  t.same(
    dests.map((d: { id: string }) => d.id),
    ['default', 'offsite'],
  );
  t.same(dests[1].jobs, ['docs']);
  const size = (await e.get('/cost/estate-size')).json();
  t.ok(size.totalBytes > 0);
  t.match(size.destinations[0], { id: 'default', jobs: [{ id: 'docs', runs: 1 }] });

  const hygiene = (await e.get('/jobs/roster-hygiene')).json();
  t.same(hygiene.ghosts, []);
  t.same(hygiene.neverRun, []);
  t.equal((await e.post('/jobs/reconcile-roster')).status, 200);
});

t.test('GET /admin/jobs reports lastRun; run-trigger and job-roster-reconcile are audited', async (t) => {
  const e = await engine(t);
  const job = { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: e.source } };
  t.equal((await e.post('/jobs', job)).status, 200);
  const before = (await e.get('/jobs')).json().jobs[0];
  t.equal(before.state.lastRun, null, 'a job that never ran has no lastRun');

  const runId = (await e.post('/trigger', { id: 'docs' })).json().runId;
  const inFlight = (await e.get('/jobs')).json().jobs[0].state.lastRun;
  t.match(inFlight, { runId, job: 'docs' }, 'a run in flight is the last run');
  t.equal((await e.post('/trigger', { id: 'docs' })).status, 409);
  await e.app.runs.idle();
  t.equal((await e.post('/trigger', { id: 'nope' })).status, 404);
  const rows = (await e.get('/jobs')).json().jobs;
  const history = (await e.get('/history?id=docs')).json();
  t.same(rows[0].state.lastRun, history.runs[0], 'lastRun is the run object of the newest run');
  t.match(rows[0].state.lastRun, { runId, status: 'ok', records: 2 });
  await e.post('/jobs', { ...job, enabled: false });
  t.equal((await e.post('/trigger', { id: 'docs' })).status, 409);

  // Ghost rows of a job that no longer exists: an orphan run and a stand-down record.
  await e.app.state.runs.start({ id: 'ghost-run', jobId: 'gone' });
  await e.app.state.settings.set('scheduler.standDown.gone', { at: new Date().toISOString() });
  const repaired = await e.post('/jobs/reconcile-roster');
  t.equal(repaired.status, 200);
  t.equal(repaired.json().repaired.length, 2);
  const events = (await e.get('/audit?limit=50')).json().events as Array<{
    action: string;
    outcome: string;
    target: string | null;
    detail: Record<string, unknown>;
    actor: { method: string };
  }>;
  const triggers = events.filter((ev) => ev.action === 'run-trigger').reverse();
  t.same(
    triggers.map((ev) => [ev.outcome, ev.target, ev.detail]),
    [
      ['applied', 'docs', { runId }],
      ['refused', 'docs', { reason: 'in-flight', runId }],
      ['refused', 'nope', { reason: 'not-found' }],
      ['refused', 'docs', { reason: 'paused' }],
    ],
  );
  const reconcile = events.filter((ev) => ev.action === 'job-roster-reconcile');
  t.equal(reconcile.length, 1);
  t.match(reconcile[0], { outcome: 'applied', target: null, detail: { repaired: 2, runs: 1, records: 1 } });
});

t.test('without the flag the test-fault prefix is 404 before authentication', async (t) => {
  const e = await engine(t);
  const r = await http(`${e.url}/admin/test-fault/status`);
  t.equal(r.status, 404);
  t.equal(r.text, 'not found');
  t.equal((await e.get('/test-fault/status')).status, 404, 'also for an owner');
});

t.test(
  'test faults drive the real engine: throttle parks, access denied fails, stand-down recorded',
  async (t) => {
    const e = await engine(t, { HARNESS_TEST_FAULTS: '1' });
    t.equal((await http(`${e.url}/admin/test-fault/status`)).status, 401, 'authenticated');
    const job = { id: 'docs', cadenceSeconds: 3600, source: { type: 'files', path: e.source } };
    await e.post('/jobs', job);
    const armed = await e.post('/test-fault/arm', {
      target: 'destination',
      fault: 'access-denied',
      times: 0,
    });
    t.equal(armed.status, 200, armed.text);
    await e.post('/trigger', { id: 'docs' });
    await e.app.runs.idle();
    let runs = (await e.get('/history?id=docs')).json().runs;
    t.equal(runs[0].status, 'failed');
    t.equal(runs[0].reason, 'destination access error');
    t.match(runs[0].causeDigest, /^[0-9a-f]{12}$/);
    const logged = e.logs.some((l) => l.includes('"event":"run-failed"') && l.includes(runs[0].causeDigest));
    t.ok(logged, 'the log line carries the cause digest');

    t.equal((await e.post('/test-fault/disarm')).json().disarmed, 1);
    await e.post('/test-fault/arm', { target: 'destination', fault: 'throttle', times: 1 });
    await e.post('/trigger', { id: 'docs' });
    await e.app.runs.idle();
    runs = (await e.get('/history?id=docs')).json().runs;
    t.equal(runs[0].status, 'parked');
    t.match(runs[0].retryAt, /Z$/);
    t.equal((await e.post('/trigger', { id: 'docs' })).status, 409, 'a parked run is in flight');

    await e.post('/jobs', { ...job, enabled: false });
    const tick = (await e.post('/test-fault/canary-tick', { wait: true })).json();
    t.ok(tick.tick.standDowns.includes('docs'));
    const ret = (await e.post('/test-fault/retention-tick')).json();
    t.same(ret.standDowns, ['docs']);
    const status = (await e.get('/test-fault/status')).json();
    t.equal(status.lastTick.reason, 'canary-tick');
    t.equal(status.faults.length, 1);
    t.equal((await e.post('/test-fault/arm', { target: 'source', fault: 'reject' })).status, 400);
  },
);
