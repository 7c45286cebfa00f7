// Digests: due times from the cron patterns, one summary per channel, state only in the store so a
// new scheduler (a restart) sends what fell due, and the croner schedule firing for real.

import { tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  createNotifier,
  type DigestEntry,
  type DigestLine,
  DigestScheduler,
  MemoryDigestStore,
  normaliseChannel,
  type Rule,
} from '../src/index.ts';
import { makePki } from './helpers/pki.ts';
import { hookResolver, startReceiver } from './helpers/receivers.ts';
import { testBox } from './helpers/secrets.ts';

const THU = new Date('2025-05-01T10:00:00.000Z'); // a Thursday

t.test('due times follow the daily and weekly patterns (UTC by default, time zone honoured)', async (t) => {
  const s = new DigestScheduler({ store: new MemoryDigestStore(), send: async () => {}, now: () => THU });
  t.equal(s.nextDue('daily', THU).toISOString(), '2025-05-02T08:00:00.000Z');
  t.equal(s.nextDue('weekly', THU).toISOString(), '2025-05-05T08:00:00.000Z');
  const berlin = new DigestScheduler({
    store: new MemoryDigestStore(),
    send: async () => {},
    schedules: { daily: '30 6 * * *', timezone: 'Europe/Berlin' },
  });
  t.equal(berlin.nextDue('daily', THU).toISOString(), '2025-05-02T04:30:00.000Z', '06:30 CEST');
  t.throws(
    () =>
      new DigestScheduler({
        store: new MemoryDigestStore(),
        send: async () => {},
        schedules: { daily: 'nonsense' },
      }),
  );
});

t.test(
  'a restart: a new scheduler over the same store sends what is due, one summary per channel',
  async (t) => {
    const store = new MemoryDigestStore();
    let clock = THU;
    const first = new DigestScheduler({
      store,
      send: async () => t.fail('nothing due yet'),
      now: () => clock,
    });
    await first.add('a', 'daily', {
      event: 'backup-success',
      jobId: 'j1',
      jobName: 'db',
      detail: 'run ok',
      at: '2025-05-01T09:00:00.000Z',
    });
    await first.add('a', 'daily', {
      event: 'drill-passed',
      jobId: 'j1',
      jobName: 'db',
      detail: 'drill ok',
      at: '2025-05-01T09:30:00.000Z',
    });
    clock = new Date('2025-05-01T11:00:00.000Z');
    await first.add('b', 'daily', {
      event: 'backup-success',
      jobId: 'j2',
      detail: 'run ok',
      at: '2025-05-01T11:00:00.000Z',
    });
    await first.add('a', 'weekly', {
      event: 'restore-applied',
      jobId: 'j1',
      detail: 'applied 10 records',
      at: '2025-05-01T11:00:00.000Z',
    });
    t.equal(await first.flushDue(new Date('2025-05-01T23:59:00.000Z')), 0);
    t.equal(store.entries.length, 4);
    first.stop(); // "the engine stops"

    const sent: { channelId: string; cadence: string; lines: DigestLine[] }[] = [];
    const second = new DigestScheduler({
      store,
      send: async (channelId, cadence, lines) => {
        sent.push({ channelId, cadence, lines });
      },
      now: () => new Date('2025-05-02T09:00:00.000Z'),
    });
    t.equal(await second.flushDue(), 2, 'two channels, two summaries');
    t.same(
      sent.map((s) => [s.channelId, s.cadence, s.lines.map((l) => l.event)]),
      [
        ['a', 'daily', ['backup-success', 'drill-passed']],
        ['b', 'daily', ['backup-success']],
      ],
    );
    t.same(sent[0]!.lines[0], {
      event: 'backup-success',
      severity: 'info',
      jobId: 'j1',
      jobName: 'db',
      detail: 'run ok',
      at: '2025-05-01T09:00:00.000Z',
    });
    t.equal(store.entries.length, 1, 'the weekly entry waits');
    t.equal(await second.flushDue(new Date('2025-05-02T09:00:00.000Z')), 0, 'nothing sent twice');
    t.equal(await second.flushDue(new Date('2025-05-05T08:00:00.000Z')), 1);
    t.equal(sent[2]!.cadence, 'weekly');
  },
);

t.test('start() sends what fell due while stopped, then the croner schedule fires', async (t) => {
  const store = new MemoryDigestStore();
  const past: DigestEntry = {
    channelId: 'a',
    cadence: 'daily',
    dueAt: '2020-01-01T08:00:00.000Z',
    event: 'backup-success',
    severity: 'info',
    detail: 'old',
    at: '2019-12-31T10:00:00.000Z',
  };
  store.add(past);
  const sent: string[][] = [];
  const s = new DigestScheduler({
    store,
    schedules: { daily: '*/1 * * * * *' }, // every second (croner reads six fields as seconds first)
    send: async (_c, _k, lines) => {
      sent.push(lines.map((l) => l.detail));
    },
  });
  t.teardown(() => s.stop());
  s.start();
  await new Promise((r) => setTimeout(r, 50));
  t.same(sent, [['old']], 'caught up at start');
  await s.add('a', 'daily', { event: 'backup-success', detail: 'fresh' });
  await new Promise((r) => setTimeout(r, 2200));
  t.same(sent[1], ['fresh'], 'the cron firing sent it');
  t.equal(store.entries.length, 0);
});

t.test(
  'end to end: success events digested by the notifier, sent as one summary after a restart',
  async (t) => {
    const pki = makePki(tempDir(t, 'coffer-notify-digest-'));
    const r = await startReceiver(pki, () => ({ status: 200 }));
    t.teardown(() => r.close());
    const box = testBox();
    const c = normaliseChannel(
      { kind: 'webhook', url: `https://hooks.example.com:${r.port}/d`, allowPrivateTarget: true },
      { secrets: box },
    );
    const rules: Rule[] = [
      { id: 'r', scope: 'global', minSeverity: 'info', events: 'all', channelIds: [c.id], digest: 'daily' },
    ];
    const store = new MemoryDigestStore();
    const base = {
      secrets: box,
      ca: pki.caCert,
      resolver: hookResolver({ 'hooks.example.com': '127.0.0.1' }),
      load: () => ({ channels: [c], rules }),
      digestStore: store,
    };
    const before = createNotifier({ ...base, now: () => THU });
    for (const job of ['j1', 'j2', 'j3']) {
      const o = await before.notify({ event: 'backup-success', jobId: job, detail: 'run ok', at: THU });
      t.same(o.digest, [{ channelId: c.id, cadence: 'daily' }]);
    }
    const fail = await before.notify({ event: 'backup-failure', jobId: 'j1', detail: 'run failed', at: THU });
    t.same(fail.now, [c.id], 'a problem is not digested');
    t.equal(r.seen.length, 1);
    before.stop();

    const after = createNotifier({ ...base, now: () => new Date('2025-05-02T08:00:05.000Z') });
    t.equal(await after.flushDigests(), 1);
    t.equal(r.seen.length, 2, 'one summary');
    const doc = JSON.parse(r.seen[1]!.body);
    t.equal(doc.event, 'digest');
    t.equal(doc.digest.cadence, 'daily');
    t.same(
      doc.digest.entries.map((e: { jobId: string }) => e.jobId),
      ['j1', 'j2', 'j3'],
    );
    t.equal(doc.detail, '3 events: 3 backup-success');
    t.equal(await after.flushDigests(), 0);
  },
);
