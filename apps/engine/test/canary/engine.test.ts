/**
 * The integrity canary in a started engine, on SQLite and on PostgreSQL, with the default
 * destination and an S3 destination (a real bucket on the loopback server, under a prefix):
 * `POST /admin/test-fault/canary-tick` flies it; its objects land under `_canary/` only, runs,
 * retention and the estate size never see them, and an earlier flight is swept; destination
 * faults armed through `/admin/test-fault/arm` make it dead (access denied: one `canary-dead`
 * audit row) or undecided (throttled); `GET /admin/canary` answers any authenticated caller (401
 * without credentials) and still shows the flights after a restart.
 */
import { listRuns } from '@coffer/archive';
import t from 'tap';
import { http } from '../helpers/engine.ts';
import { BACKENDS, canaryFlightIds, engine, keysIn, world } from './helpers.ts';

for (const backend of BACKENDS) {
  t.test(`${backend}: alive flights under _canary/, invisible to runs and retention, swept`, async (t) => {
    const w = await world(t, backend);
    const e = await engine(t, w);
    const job = {
      id: 'docs',
      cadenceSeconds: 3600,
      source: { type: 'files', path: w.source },
      destinations: ['s3dest'],
      retention: { keepLast: 1 },
    };
    const tick = await e.post('/test-fault/canary-tick', { wait: true });
    t.equal(tick.status, 200, tick.text);
    const body = tick.json();
    t.equal(body.ok, true);
    t.ok(body.tick, 'the reconciliation tick still ran');
    t.equal(body.canary.verdict, 'alive');
    t.same(body.canary.flights.map((f: { destination: string }) => f.destination).sort(), [
      'default',
      's3dest',
    ]);
    const holder = (await e.get('/test-fault/status')).json().holder;
    for (const f of body.canary.flights) {
      t.match(f, {
        id: /^\d{8}T\d{9}Z-[0-9a-f]{8}$/,
        trigger: 'tick',
        verdict: 'alive',
        code: null,
        message: null,
        engineVersion: e.app.canary.engineVersion,
        instanceId: holder,
      });
      t.ok(f.bytes > 1024, `${f.destination}: ${f.bytes} bytes sealed`);
      t.ok(Date.parse(f.finishedAt) >= Date.parse(f.startedAt));
    }
    const first = body.canary.flights.find((f: { destination: string }) => f.destination === 's3dest').id;
    t.same(await canaryFlightIds(w.root), [first], 'the flight is in the bucket under dest/_canary/');
    const objects = await keysIn(w.root, `dest/_canary/jobs/canary/runs/${first}/`);
    t.ok(
      objects.some((k) => k.endsWith('/manifest.json')) && objects.some((k) => k.endsWith('/manifest.sig')),
    );
    t.ok(
      objects.some((k) => /\/shards\/000000\.bin$/.test(k)),
      'a sealed shard',
    );

    // Two runs of a job: retention (keepLast 1) prunes the older; the canary's objects stay.
    t.equal((await e.post('/jobs', job)).status, 200);
    for (let i = 0; i < 2; i++) {
      const trig = await e.post('/trigger', { id: 'docs' });
      t.equal(trig.status, 200, trig.text);
      await e.app.runs.idle();
    }
    const runs = (await e.get('/history?id=docs')).json().runs;
    t.equal(runs.length, 2);
    t.ok(runs.every((r: { status: string }) => r.status === 'ok'));
    t.same(
      (await listRuns(w.dest)).map((r) => r.job),
      ['docs', 'docs'],
      'a run listing of the destination shows the job only',
    );
    const canaryBefore = await keysIn(w.root, 'dest/_canary/');
    const ret = await e.post('/test-fault/retention-tick');
    t.equal(ret.status, 200, ret.text);
    const pruned = ret.json().pruned.flatMap((p: { pruned: string[] }) => p.pruned);
    t.same(pruned, [runs[1].runId], 'retention pruned the older run');
    t.same(await keysIn(w.root, 'dest/_canary/'), canaryBefore, 'retention left every canary object alone');
    t.same(
      (await listRuns(w.dest)).map((r) => r.runId),
      [runs[0].runId],
      'the kept run is the only run listed',
    );
    const estate = (await e.get('/cost/estate-size')).json();
    const s3 = estate.destinations.find((d: { id: string }) => d.id === 's3dest');
    t.same(
      s3.jobs.map((j: { id: string }) => j.id),
      ['docs'],
      'the estate size counts no canary',
    );

    // A second flight sweeps the first (the grace is 0 here): only the latest stays.
    const again = (await e.post('/test-fault/canary-tick')).json();
    t.equal(again.canary.verdict, 'alive');
    const second = again.canary.flights.find((f: { destination: string }) => f.destination === 's3dest').id;
    t.not(second, first);
    t.same(await canaryFlightIds(w.root), [second], 'the earlier flight was swept, the latest kept');
    t.same(
      (await listRuns(w.dest)).map((r) => r.runId),
      [runs[0].runId],
      'the sweep left the run alone',
    );
  });

  t.test(`${backend}: armed faults: access denied is dead (audited), throttled is undecided`, async (t) => {
    const w = await world(t, backend);
    const e = await engine(t, w);
    const arm = await e.post('/test-fault/arm', {
      target: 'destination',
      destination: 's3dest',
      fault: 'access-denied',
      op: 'put',
      times: 0,
    });
    t.equal(arm.status, 200, arm.text);
    const dead = (await e.post('/test-fault/canary-tick')).json().canary;
    t.equal(dead.verdict, 'dead', 'one dead destination makes the set dead');
    const byDest = Object.fromEntries(dead.flights.map((f: { destination: string }) => [f.destination, f]));
    t.match(byDest.s3dest, {
      verdict: 'dead',
      code: 'ERR_OBJECTSTORE_ACCESS_DENIED',
      message: /refused the canary write \(ERR_OBJECTSTORE_ACCESS_DENIED, AccessDenied\)/,
      bytes: 0,
    });
    t.equal(byDest.default.verdict, 'alive', 'the other destination is unaffected');
    t.same(await canaryFlightIds(w.root), [], 'nothing reached the bucket');
    const audit = (await e.get('/audit?limit=100'))
      .json()
      .events.filter((ev: { action: string }) => ev.action === 'canary-dead');
    t.equal(audit.length, 1, 'one audit row for the dead flight');
    t.match(audit[0], {
      outcome: 'failed',
      target: 's3dest',
      actor: { method: 'engine' },
      detail: {
        destination: 's3dest',
        code: 'ERR_OBJECTSTORE_ACCESS_DENIED',
        flight: byDest.s3dest.id,
        trigger: 'tick',
      },
    });

    t.equal((await e.post('/test-fault/disarm')).json().disarmed, 1);
    await e.post('/test-fault/arm', {
      target: 'destination',
      destination: 's3dest',
      fault: 'throttle',
      times: 0,
    });
    const throttled = (await e.post('/test-fault/canary-tick')).json().canary;
    t.equal(throttled.verdict, 'undecided', 'alive + undecided is undecided');
    const s3 = throttled.flights.find((f: { destination: string }) => f.destination === 's3dest');
    t.match(s3, {
      verdict: 'undecided',
      code: 'ERR_OBJECTSTORE_THROTTLED',
      message: /throttled the canary write/,
    });

    // Throttled on the read-back only: written, then undecided.
    await e.post('/test-fault/disarm');
    await e.post('/test-fault/arm', {
      target: 'destination',
      destination: 's3dest',
      fault: 'throttle',
      op: 'get',
      times: 0,
    });
    const readBack = (await e.post('/test-fault/canary-tick')).json().canary;
    const r = readBack.flights.find((f: { destination: string }) => f.destination === 's3dest');
    t.match(r, { verdict: 'undecided', code: 'ERR_OBJECTSTORE_THROTTLED', message: /canary read-back/ });
    t.ok(
      (await canaryFlightIds(w.root)).includes(r.id),
      'the flight was written before its read was throttled',
    );
    const rows = (await e.get('/audit?limit=100'))
      .json()
      .events.filter((ev: { action: string }) => ev.action === 'canary-dead');
    t.equal(rows.length, 1, 'undecided flights write no audit row');
    const text = JSON.stringify([dead, throttled, readBack]);
    t.notOk(
      text.includes(w.bucket.endpoint) || text.includes(w.bucket.bucket),
      'no endpoint or bucket in flights',
    );
    t.notOk(text.includes(w.bucket.credentials.secretAccessKey), 'no credential in flights');
  });

  t.test(
    `${backend}: GET /admin/canary: any authenticated caller, contents, kept across a restart`,
    async (t) => {
      const w = await world(t, backend);
      const first = await engine(t, w);
      const before = await first.get('/canary');
      t.equal(before.status, 200, before.text);
      t.same(before.json(), {
        intervalSeconds: 3600,
        verdict: null,
        lastFlightAt: null,
        destinations: [
          { destination: 'default', last: null, flights: [] },
          { destination: 's3dest', last: null, flights: [] },
        ],
      });
      t.equal((await http(`${first.url}/admin/canary`)).status, 401, 'no credentials: 401');
      await first.post('/test-fault/arm', {
        target: 'destination',
        destination: 's3dest',
        fault: 'reject',
        code: 'NoSuchBucket',
        times: 1,
      });
      const a = (await first.post('/test-fault/canary-tick')).json().canary;
      const b = (await first.post('/test-fault/canary-tick')).json().canary;
      t.equal(a.verdict, 'dead');
      t.equal(b.verdict, 'alive');
      const viewer = await first.session('viewer');
      const view = await first.get('/canary', viewer);
      t.equal(view.status, 200, 'a viewer reads it');
      const body = view.json();
      t.equal(body.verdict, 'alive', 'the latest set');
      t.ok(Date.parse(body.lastFlightAt) > 0);
      const s3 = body.destinations.find((d: { destination: string }) => d.destination === 's3dest');
      const mine = (f: { id: string }) => f.id;
      const s3b = b.flights.find((f: { destination: string }) => f.destination === 's3dest');
      const s3a = a.flights.find((f: { destination: string }) => f.destination === 's3dest');
      t.same(s3.flights.map(mine), [s3b.id, s3a.id], 'newest first');
      t.same(s3.last, s3b);
      t.match(s3.flights[1], { verdict: 'dead', code: 'ERR_OBJECTSTORE_REJECTED', message: /NoSuchBucket/ });
      await first.app.close();

      const second = await engine(t, w);
      const after = (await second.get('/canary')).json();
      t.same(after, body, 'the same view from a restarted engine');
      t.equal(second.app.canary.instanceId, first.app.canary.instanceId, 'the same stable instance id');
    },
  );
}
