// EngineEvents on its own: delivery after raise returns, in order; unsubscribe; a slow async
// subscriber delays neither raise nor the other subscribers; a throwing or rejecting subscriber is
// logged and the others still get the event; unknown names and credential-like values refused.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import {
  ENGINE_EVENT_NAMES,
  type EngineEvent,
  type EngineEventName,
  EngineEvents,
  hashPrefix,
  isEngineEventName,
  NOTIFY_EVENT_OF,
} from '../../src/events.ts';
import { delivered } from './helpers.ts';

function logger() {
  const lines: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  return { lines, warn: (obj: Record<string, unknown>, msg: string) => lines.push({ obj, msg }) };
}

t.test('the closed set of 23 names', async (t) => {
  t.equal(ENGINE_EVENT_NAMES.length, 23);
  t.equal(new Set(ENGINE_EVENT_NAMES).size, 23, 'no duplicates');
  t.ok(isEngineEventName('run-failed'));
  t.notOk(isEngineEventName('backup-failure'));
  t.equal(hashPrefix('a'.repeat(64)), 'a'.repeat(16));
  t.equal(hashPrefix(null), null);
});

t.test('each engine event maps onto one @coffer/notify event', async (t) => {
  // The package's names as docs/notifications.md "Events" lists them (the package's own test keeps
  // that table in step with it; the engine does not depend on the package yet).
  const doc = readFileSync(
    fileURLToPath(new URL('../../../../docs/notifications.md', import.meta.url)),
    'utf8',
  );
  const start = doc.indexOf('\n## Events');
  const section = doc.slice(start, doc.indexOf('\n## ', start + 1));
  const NOTIFY_EVENTS = [...section.matchAll(/^\| `([a-z-]+)` \| \w+ \| \w+ \| .+ \|$/gm)].map((m) => m[1]!);
  t.equal(NOTIFY_EVENTS.length, 23);
  t.same(Object.keys(NOTIFY_EVENT_OF), [...ENGINE_EVENT_NAMES], 'every engine event, in order');
  for (const [name, to] of Object.entries(NOTIFY_EVENT_OF))
    t.ok(NOTIFY_EVENTS.includes(to.event), `${name} -> ${to.event}`);
  const covered = new Set(Object.values(NOTIFY_EVENT_OF).map((x) => x.event));
  t.same(
    NOTIFY_EVENTS.filter((n) => !covered.has(n)),
    ['notification-test'],
    'every package event but the test line has an engine source',
  );
});

t.test('delivered after raise returns, in order, each event frozen', async (t) => {
  const bus = new EngineEvents({ now: () => new Date('2030-01-02T03:04:05.000Z') });
  const got: EngineEvent[] = [];
  bus.subscribe((e) => {
    got.push(e);
  });
  const names: EngineEventName[] = ['run-failed', 'run-parked', 'run-succeeded', 'backup-stale'];
  for (const [i, name] of names.entries()) bus.raise({ name, jobId: 'docs', detail: { i } });
  t.equal(got.length, 0, 'nothing is delivered inside raise');
  await delivered();
  t.same(
    got.map((e) => e.name),
    names,
    'in the order raised',
  );
  t.same(got[0], { name: 'run-failed', at: '2030-01-02T03:04:05.000Z', jobId: 'docs', detail: { i: 0 } });
  t.ok(
    Object.isFrozen(got[0]) && Object.isFrozen(got[0]!.detail),
    'a subscriber cannot change what others see',
  );
  bus.raise({ name: 'drill-passed', at: '2031-01-01T00:00:00.000Z', jobId: null, detail: {} });
  await delivered();
  t.equal(got.at(-1)?.at, '2031-01-01T00:00:00.000Z', 'an explicit time is kept');
});

t.test('subscribe returns unsubscribe; queued events are not delivered after it', async (t) => {
  const bus = new EngineEvents();
  const a: string[] = [];
  const b: string[] = [];
  const offA = bus.subscribe((e) => {
    a.push(e.name);
  });
  bus.raise({ name: 'run-failed', jobId: null, detail: {} });
  const offB = bus.subscribe((e) => {
    b.push(e.name);
  });
  bus.raise({ name: 'run-parked', jobId: null, detail: {} });
  await delivered();
  t.same(a, ['run-failed', 'run-parked']);
  t.same(b, ['run-parked'], 'a late subscriber gets only what is raised after it subscribed');
  bus.raise({ name: 'run-abandoned', jobId: null, detail: {} });
  offA();
  offA(); // idempotent
  await delivered();
  t.same(a, ['run-failed', 'run-parked'], 'unsubscribed before delivery: not delivered');
  t.same(b, ['run-parked', 'run-abandoned']);
  offB();
  t.equal(bus.subscribers, 0);
  bus.raise({ name: 'run-failed', jobId: null, detail: {} });
  await delivered();
  t.same(b, ['run-parked', 'run-abandoned']);
});

t.test('a slow async subscriber delays neither raise nor the others', async (t) => {
  const bus = new EngineEvents();
  let slowDone = 0;
  const fast: number[] = [];
  bus.subscribe(async () => {
    await new Promise((r) => setTimeout(r, 400));
    slowDone++;
  });
  bus.subscribe((e) => {
    fast.push(Number(e.detail.i));
  });
  const t0 = performance.now();
  for (let i = 0; i < 1000; i++) bus.raise({ name: 'run-succeeded', jobId: 'docs', detail: { i } });
  const spent = performance.now() - t0;
  t.ok(spent < 200, `1000 raises took ${spent.toFixed(1)} ms with a 400 ms subscriber`);
  await delivered();
  t.equal(fast.length, 1000, 'the other subscriber got every event without waiting');
  t.same(fast.slice(0, 3), [0, 1, 2]);
  t.equal(slowDone, 0, 'the slow one is still busy');
});

t.test('a throwing or rejecting subscriber is logged; the others still get the event', async (t) => {
  const log = logger();
  const bus = new EngineEvents({ log });
  const got: string[] = [];
  bus.subscribe(() => {
    throw Object.assign(new Error('boom'), { code: 'ERR_BOOM' });
  });
  bus.subscribe(async () => {
    throw new Error('later boom');
  });
  bus.subscribe((e) => {
    got.push(e.name);
  });
  t.doesNotThrow(() => bus.raise({ name: 'verify-failed', jobId: 'docs', detail: {} }));
  await delivered();
  t.same(got, ['verify-failed']);
  const failures = log.lines.filter((l) => l.obj.event === 'engine-event-subscriber-failed');
  t.equal(failures.length, 2, 'both failures logged');
  t.equal(failures[0]?.obj.code, 'ERR_BOOM');
  t.notOk(JSON.stringify(log.lines).includes('boom'), 'the log names the code, not the message');
});

t.test('raise never throws; unknown names refused; credential-like values blanked', async (t) => {
  const log = logger();
  const bus = new EngineEvents({ log });
  const got: EngineEvent[] = [];
  bus.subscribe((e) => {
    got.push(e);
  });
  // biome-ignore lint/suspicious/noExplicitAny: deliberately malformed input
  const raw = bus.raise.bind(bus) as (e: any) => void;
  t.doesNotThrow(() => raw(null));
  t.doesNotThrow(() => raw({ name: 'backup-failure', jobId: null, detail: {} }));
  t.doesNotThrow(() =>
    raw({
      name: 'credential-minted',
      jobId: 7,
      detail: {
        scope: 'metrics',
        nested: { secret: 'x' },
        list: [1, 2],
        fn: () => 1,
        undef: undefined,
        nan: Number.NaN,
        url: 'https://user:pass@example.org/x',
        secret: 'dps_abcdefghijklmnopqrstuvwxyz012345',
        auth: 'Bearer abc.def',
        long: 'x'.repeat(1000),
      },
    }),
  );
  await delivered();
  t.equal(got.length, 1, 'only the well-named event is delivered');
  t.same(got[0]?.jobId, null, 'a non-string job id is dropped');
  t.same(got[0]?.detail, {
    scope: 'metrics',
    nan: null,
    url: '[redacted]',
    secret: '[redacted]',
    auth: '[redacted]',
    long: 'x'.repeat(256),
  });
  t.ok(log.lines.some((l) => l.obj.event === 'engine-event-refused' && l.obj.name === 'backup-failure'));
});
