// Rules and routing vectors: per-job suppression, dedup, deleted channels, delivering nowhere,
// success events off by default, digests, a success event raised to warning, recoveries, and the
// first channel's automatic rules.
import t from 'tap';
import {
  isNotifyError,
  normaliseRule,
  type Rule,
  route,
  rulesDeliveringNowhere,
  rulesForFirstChannel,
  type StoredChannel,
} from '../src/index.ts';

const ch = (id: string, kind: StoredChannel['kind'] = 'webhook', enabled = true): StoredChannel => ({
  id,
  name: id,
  kind,
  enabled,
  allowPrivateTarget: false,
});
const rule = (id: string, r: Partial<Rule>): Rule => ({
  id,
  scope: 'global',
  minSeverity: 'info',
  events: 'all',
  channelIds: ['a'],
  digest: 'off',
  ...r,
});
const channels = [ch('a'), ch('b'), ch('c'), ch('pd', 'incident'), ch('off', 'webhook', false)];

t.test('a global rule routes; minSeverity filters', async (t) => {
  const rules = [
    rule('r1', { minSeverity: 'critical', channelIds: ['a'] }),
    rule('r2', { minSeverity: 'warning', channelIds: ['b'] }),
  ];
  t.same(route('backup-failure', { jobId: 'j1' }, rules, channels), {
    now: ['a', 'b'],
    digest: [],
    nowhere: [],
  });
  t.same(route('backup-stale', { jobId: 'j1' }, rules, channels).now, ['b']);
  t.same(
    route('backup-stale', { jobId: 'j1', severity: 'critical' }, rules, channels).now,
    ['a', 'b'],
    'raised severity',
  );
  t.same(route('update-available', {}, rules, channels).now, [], 'info below both');
});

t.test(
  'a per-job rule that selects an event suppresses global rules for that event on that job',
  async (t) => {
    const rules = [
      rule('global', { channelIds: ['a'] }),
      rule('job1', { scope: { job: 'j1' }, events: ['backup-failure'], channelIds: ['b'] }),
      rule('job1-quiet', {
        scope: { job: 'j1' },
        events: ['backup-stale'],
        minSeverity: 'critical',
        channelIds: ['c'],
      }),
    ];
    t.same(route('backup-failure', { jobId: 'j1' }, rules, channels).now, ['b'], 'job rule wins on j1');
    t.same(
      route('backup-failure', { jobId: 'j2' }, rules, channels).now,
      ['a'],
      'other jobs keep the global rule',
    );
    t.same(
      route('backup-parked', { jobId: 'j1' }, rules, channels).now,
      ['a'],
      'an event the job rule does not select: global',
    );
    t.same(
      route('backup-stale', { jobId: 'j1' }, rules, channels).now,
      [],
      'a selecting job rule quiets the event',
    );
    t.same(route('audit-chain-break', {}, rules, channels).now, ['a'], 'engine-wide events: global rules');
  },
);

t.test('channels are deduplicated across winning rules; deleted and disabled ids skipped', async (t) => {
  const rules = [
    rule('r1', { channelIds: ['a', 'b', 'gone'] }),
    rule('r2', { channelIds: ['b', 'c', 'a'] }),
    rule('r3', { channelIds: ['gone', 'off'] }),
  ];
  const r = route('drill-failed', { jobId: 'j1' }, rules, channels);
  t.same(r.now, ['a', 'b', 'c']);
  t.same(r.nowhere, ['r3'], 'a rule left with no reachable channel delivers nowhere');
  t.same(rulesDeliveringNowhere(rules, channels), ['r3']);
});

t.test(
  'success events are off by default; a digest batches them; raised to warning they go now',
  async (t) => {
    const all = [rule('all', { channelIds: ['a'] })];
    t.same(
      route('backup-success', { jobId: 'j1' }, all, channels).now,
      [],
      "'all' leaves success events out",
    );
    t.same(
      route('restore-applied', { jobId: 'j1', severity: 'warning' }, all, channels).now,
      ['a'],
      'a restore that fell short goes now',
    );
    const listed = [rule('listed', { events: ['backup-success'], channelIds: ['a'] })];
    t.same(
      route('backup-success', { jobId: 'j1' }, listed, channels).now,
      ['a'],
      'a rule naming it sends it',
    );
    const digest = [
      rule('daily', { channelIds: ['a', 'b'], digest: 'daily' }),
      rule('weekly', { channelIds: ['b', 'c'], digest: 'weekly' }),
    ];
    t.same(route('backup-success', { jobId: 'j1' }, digest, channels), {
      now: [],
      digest: [
        { channelId: 'a', cadence: 'daily' },
        { channelId: 'b', cadence: 'daily' },
        { channelId: 'c', cadence: 'weekly' },
      ],
      nowhere: [],
    });
    t.same(
      route('backup-failure', { jobId: 'j1' }, digest, channels).now,
      ['a', 'b', 'c'],
      'a digest never delays a problem',
    );
    const r = route('restore-applied', { jobId: 'j1', severity: 'warning' }, digest, channels);
    t.same(r.now, ['a', 'b', 'c'], 'a success event raised to warning is sent at once even under a digest');
    t.same(r.digest, []);
    const mixed = [
      rule('now', { events: ['drill-passed'], channelIds: ['a'] }),
      rule('dig', { events: ['drill-passed'], channelIds: ['a', 'b'], digest: 'weekly' }),
    ];
    const m = route('drill-passed', { jobId: 'j1' }, mixed, channels);
    t.same(m.now, ['a']);
    t.same(m.digest, [{ channelId: 'b', cadence: 'weekly' }], 'a channel sent now is in no digest');
    t.same(route('notification-test', {}, all, channels).now, [], 'the test event is never routed');
  },
);

t.test('a recovery is sent to the incident channels that were sent the problem', async (t) => {
  const rules = [
    rule('fail', { events: ['backup-failure'], minSeverity: 'critical', channelIds: ['pd', 'a'] }),
  ];
  t.same(route('backup-failure', { jobId: 'j1' }, rules, channels).now, ['pd', 'a']);
  t.same(
    route('backup-success', { jobId: 'j1' }, rules, channels).now,
    ['pd'],
    'resolve to the incident channel only',
  );
  t.same(route('drill-passed', { jobId: 'j1' }, rules, channels).now, [], 'drills were never sent there');
  const perJob = [
    ...rules,
    rule('j2', { scope: { job: 'j2' }, events: ['backup-failure'], channelIds: ['b'] }),
  ];
  t.same(route('backup-success', { jobId: 'j2' }, perJob, channels).now, [], 'j2 failures went elsewhere');
});

t.test('the first channel added with no rule gets the backup-failure and backup-stale rules', async (t) => {
  const auto = rulesForFirstChannel('a', { rules: [], channels: [ch('a')] });
  t.same(auto, [
    {
      id: 'rule_backup-failure',
      scope: 'global',
      minSeverity: 'critical',
      events: ['backup-failure'],
      channelIds: ['a'],
      digest: 'off',
    },
    {
      id: 'rule_backup-stale',
      scope: 'global',
      minSeverity: 'warning',
      events: ['backup-stale'],
      channelIds: ['a'],
      digest: 'off',
    },
  ]);
  t.same(route('backup-failure', { jobId: 'j' }, auto, [ch('a')]).now, ['a']);
  t.same(route('backup-stale', { jobId: 'j' }, auto, [ch('a')]).now, ['a']);
  t.same(route('backup-success', { jobId: 'j' }, auto, [ch('a')]).now, []);
  t.same(rulesForFirstChannel('b', { rules: auto, channels: [ch('a'), ch('b')] }), [], 'rules exist');
  t.same(rulesForFirstChannel('b', { rules: [], channels: [ch('a'), ch('b')] }), [], 'not the first channel');
});

t.test('normaliseRule: defaults, validation, stable codes', async (t) => {
  const r = normaliseRule(
    { channelIds: ['a', 'a', 'b'], events: ['backup-failure', 'backup-failure'] },
    { newId: () => 'rule_x' },
  );
  t.same(r, {
    id: 'rule_x',
    scope: 'global',
    minSeverity: 'info',
    events: ['backup-failure'],
    channelIds: ['a', 'b'],
    digest: 'off',
  });
  t.same(normaliseRule({ scope: { job: 'j1' }, channelIds: ['a'], digest: 'weekly' }).scope, { job: 'j1' });
  const upd = normaliseRule({ minSeverity: 'critical' }, { previous: r });
  t.equal(upd.id, 'rule_x');
  t.equal(upd.minSeverity, 'critical');
  t.same(upd.channelIds, ['a', 'b']);
  const bad: [unknown, string, object?][] = [
    [{ channelIds: [] }, 'channelIds'],
    [{}, 'channelIds'],
    [{ channelIds: ['a'], scope: 'job' }, 'scope'],
    [{ channelIds: ['a'], scope: { job: 'nope' } }, 'scope', { jobIds: ['j1'] }],
    [{ channelIds: ['zz'] }, 'channelIds', { channelIds: ['a'] }],
    [{ channelIds: ['a'], minSeverity: 'error' }, 'minSeverity'],
    [{ channelIds: ['a'], digest: 'hourly' }, 'digest'],
    [{ channelIds: ['a'], events: [] }, 'events'],
    [{ channelIds: ['a'], events: ['notification-test'] }, 'events'],
  ];
  for (const [input, field, opts] of bad)
    t.throws(() => normaliseRule(input, opts), { code: 'ERR_NOTIFY_INVALID_RULE', field }, field);
  try {
    normaliseRule({ channelIds: ['a'], events: ['backup-exploded'] });
    t.fail('unknown event refused');
  } catch (e) {
    t.ok(isNotifyError(e, 'ERR_NOTIFY_UNKNOWN_EVENT'));
  }
});
