/**
 * `app.canary` as the update lifecycle uses it, on SQLite and on PostgreSQL: `onVerdict`
 * listeners after every flight set (awaited, a failing one logged), not after a `settle` set;
 * concurrent calls sharing one set; a listener that flies again starts a new set; the schedule
 * (first flight one interval after start, stopped on close); the in-memory self-check; no
 * destination at all is undecided; the settings store keeps the last flights per destination.
 */
import { createS3Store } from '@coffer/objectstore';
import t from 'tap';
import { CanaryHistory, type CanaryResult, CanaryService, FLIGHT_PREFIX } from '../../src/canary/index.ts';
import { BACKENDS, engine, world } from './helpers.ts';

const silent = { info() {}, warn() {}, error() {} };

for (const backend of BACKENDS) {
  t.test(`${backend}: listeners, shared sets, settle, self-check`, async (t) => {
    const w = await world(t, backend);
    const e = await engine(t, w);
    t.equal(await e.app.canary.selfCheck(), 'alive', 'the build seals and verifies in memory');

    const heard: CanaryResult[] = [];
    e.app.canary.onVerdict(async (r) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      heard.push(r);
    });
    e.app.canary.onVerdict(() => {
      throw Object.assign(new Error('listener bug'), { code: 'ERR_TEST_LISTENER' });
    });
    const tick = await e.post('/test-fault/canary-tick');
    t.equal(tick.status, 200, 'a failing listener does not fail the tick');
    t.equal(heard.length, 1, 'the listener ran (awaited) before the reply');
    t.same(heard[0], tick.json().canary, 'with the set the reply carries');
    t.ok(
      e.logs.some((l) => l.includes('"event":"canary-listener-failed"') && l.includes('ERR_TEST_LISTENER')),
      'the failing listener was logged',
    );

    const [a, b] = await Promise.all([e.app.canary.fly('schedule'), e.app.canary.fly('boot')]);
    t.equal(a, b, 'concurrent calls share one set');
    t.equal(a.flights.length, 2);
    t.ok(
      a.flights.every((f) => f.trigger === 'schedule'),
      'the set is the first caller’s',
    );
    t.equal(heard.length, 2, 'listeners ran once for the shared set');

    const settle = await e.app.canary.fly('settle');
    t.equal(settle.verdict, 'alive');
    t.equal(heard.length, 2, 'a settle set does not call the listeners (its caller acts on it)');

    // A listener that flies again (the update lifecycle's retries do) starts a new set.
    let nested: CanaryResult | null = null;
    e.app.canary.onVerdict(async (r) => {
      if (nested === null && r.flights[0]?.trigger === 'tick') nested = await e.app.canary.fly('settle');
    });
    const outer = await e.app.canary.fly('tick');
    t.ok(nested, 'the nested flight finished');
    t.not(nested!.flights[0]!.id, outer.flights[0]!.id, 'as a set of its own');

    const view = await e.app.canary.last();
    const def = view.destinations.find((d) => d.destination === 'default')!;
    t.same(
      def.flights.map((f) => f.trigger),
      ['settle', 'tick', 'settle', 'schedule', 'tick'],
      'every set stored, newest first',
    );
  });

  t.test(`${backend}: the schedule flies one interval after start and stops on close`, async (t) => {
    const w = await world(t, backend);
    const e = await engine(t, w, { canary: { intervalMs: 400, sweepGraceMs: 0 } });
    const heard: string[] = [];
    e.app.canary.onVerdict((r) => {
      heard.push(r.flights[0]!.trigger);
    });
    e.app.canary.start();
    t.equal((await e.get('/canary')).json().verdict, null, 'nothing flies at start');
    const until = Date.now() + 30_000;
    let view = (await e.get('/canary')).json();
    while (view.verdict === null && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 100));
      view = (await e.get('/canary')).json();
    }
    t.equal(view.verdict, 'alive', 'a scheduled set flew');
    t.equal(view.destinations[0].last.trigger, 'schedule');
    // The flights are readable as soon as they are stored; the listeners run just after.
    while (!heard.includes('schedule') && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    t.ok(heard.includes('schedule'), 'listeners heard the scheduled set');
    await e.app.close();
    const flights = (await e.app.canary.last().catch(() => null))?.destinations[0]?.flights.length;
    const count = heard.length;
    await new Promise((r) => setTimeout(r, 1000));
    t.equal(heard.length, count, `no flight after close (${flights ?? 'state closed'})`);
    t.same(
      await e.app.canary.fly('tick'),
      { verdict: 'undecided', flights: [] },
      'nothing flies once stopped',
    );
    t.equal(heard.length, count, 'and no listener runs');
  });

  t.test(`${backend}: no destination is undecided; the store keeps the last flights`, async (t) => {
    const w = await world(t, backend);
    const e = await engine(t, w);
    const heard: CanaryResult[] = [];
    const lonely = new CanaryService({
      settings: e.app.state.settings,
      keys: e.app.keys,
      destinations: () => new Map(),
      log: silent,
      instanceId: 'lonely',
      intervalSeconds: 3600,
    });
    lonely.onVerdict((r) => {
      heard.push(r);
    });
    const r = await lonely.fly('tick');
    t.same(r, { verdict: 'undecided', flights: [] });
    t.equal(heard.length, 1, 'listeners hear an undecided set too');
    const view = await lonely.last();
    t.same(view, {
      intervalSeconds: 3600,
      verdict: 'undecided',
      lastFlightAt: view.lastFlightAt,
      destinations: [],
    });
    t.ok(Date.parse(view.lastFlightAt!) > 0);

    // A destination with a wrong secret: dead, and its credential, endpoint and bucket appear in
    // no flight, log line, audit row or stored row.
    const secret = `wrong-secret-${Math.random().toString(36).slice(2)}`;
    const lines: string[] = [];
    const rows: unknown[] = [];
    const capture = (obj: Record<string, unknown>, msg: string) =>
      void lines.push(JSON.stringify({ obj, msg }));
    const refused = new CanaryService({
      settings: e.app.state.settings,
      keys: e.app.keys,
      destinations: () =>
        new Map([
          [
            'wrong',
            createS3Store({
              bucket: w.bucket.bucket,
              prefix: 'dest',
              endpoint: w.bucket.endpoint,
              region: w.bucket.region,
              forcePathStyle: true,
              credentials: { accessKeyId: w.bucket.credentials.accessKeyId, secretAccessKey: secret },
              maxAttempts: 1,
            }),
          ],
        ]),
      log: { info: capture, warn: capture, error: capture },
      audit: {
        append: async (input) => {
          rows.push(input);
        },
      },
      instanceId: 'refused',
      intervalSeconds: 3600,
    });
    const bad = await refused.fly('tick');
    t.equal(bad.verdict, 'dead');
    t.equal(bad.flights[0]!.code, 'ERR_OBJECTSTORE_ACCESS_DENIED');
    t.equal(rows.length, 1, 'one audit row');
    t.ok(lines.length >= 2, 'logged');
    const stored = JSON.stringify(await refused.last());
    for (const [what, text] of [
      ['flights', JSON.stringify(bad)],
      ['log lines', lines.join('\n')],
      ['audit rows', JSON.stringify(rows)],
      ['stored rows', stored],
    ] as const) {
      for (const s of [secret, w.bucket.endpoint, w.bucket.bucket, w.bucket.credentials.accessKeyId])
        t.notOk(text.includes(s), `${what}: no credential, endpoint or bucket`);
    }

    const history = new CanaryHistory(e.app.state.settings, 3);
    const flight = (i: number) => ({
      id: `20250101T00000${i}000Z-0000000${i}`,
      destination: 'x.y',
      trigger: 'tick' as const,
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      verdict: 'alive' as const,
      code: null,
      message: null,
      bytes: 1,
      engineVersion: '1.0.0',
      instanceId: 'i',
    });
    const set = {
      verdict: 'alive' as const,
      trigger: 'tick' as const,
      startedAt: new Date().toISOString(),
      finishedAt: new Date().toISOString(),
      destinations: ['x.y'],
      engineVersion: '1.0.0',
      instanceId: 'i',
    };
    for (let i = 1; i <= 5; i++) await history.record(set, [flight(i)]);
    await history.record(set, [{ ...flight(6), destination: 'x' }]);
    t.same(
      (await history.flights('x.y')).map((f) => f.id),
      [flight(5).id, flight(4).id, flight(3).id],
      'the newest three of x.y, newest first',
    );
    t.equal((await e.app.state.settings.list(`${FLIGHT_PREFIX}x.y:`)).length, 3, 'older rows deleted');
    t.same(
      (await history.flights('x')).map((f) => f.id),
      [flight(6).id],
      'destination x is not confused with x.y',
    );
    await e.app.state.settings.set(`${FLIGHT_PREFIX}x:garbage`, { id: 1 });
    t.equal((await history.flights('x')).length, 1, 'a malformed row is skipped');
  });
}
