// The lifecycle machine: every step of the specification's table with its failure outcome,
// persistence before effects, canary retries, rollback, ramp and settle shapes.
import t from 'tap';
import { makeDoc } from './helpers/channel.ts';
import {
  type ApplyInput,
  CANARY_RETRY_SCHEDULE,
  driveUpdate,
  type Effect,
  inRamp,
  isUpdateError,
  settleRamp,
  settleRecord,
  startApply,
  startRamp,
  startRollback,
  type UpdateEvent,
  type UpdateRecord,
} from './helpers/exports.ts';

const doc = makeDoc();
const channel = { document: doc, digest: 'sha384:doc' };
const input = (patch: Partial<ApplyInput> = {}): ApplyInput => ({
  channel,
  running: { engine: '1.3.0', console: '1.3.0' },
  floors: { engine: '1.3.0', console: '1.3.0' },
  runningSchemaEpoch: 1,
  dryRun: false,
  destinationConfigured: true,
  id: 'upd_1',
  now: '2026-05-01T12:00:00Z',
  ...patch,
});

type Script = {
  artefact?: (c: string) => UpdateEvent;
  live?: UpdateEvent;
  upload?: (c: string) => UpdateEvent;
  readBack?: (c: string) => UpdateEvent;
  promote?: (c: string) => UpdateEvent;
  canary?: UpdateEvent['type'] extends never ? never : ('alive' | 'dead' | 'undecided')[];
  rollback?: (c: string) => UpdateEvent;
};

function executor(script: Script) {
  const log: string[] = [];
  const records: UpdateRecord[] = [];
  const verdicts = [...(script.canary ?? ['alive'])];
  return {
    log,
    records,
    exec: {
      persist: async (r: UpdateRecord) => {
        records.push(structuredClone(r));
        log.push(`persist:${r.status}/${r.phase}${r.outcome ? `/${r.outcome}` : ''}`);
      },
      now: () => '2026-05-01T12:00:01Z',
      run: async (e: Exclude<Effect, { do: 'stop' }>): Promise<UpdateEvent> => {
        const c = 'component' in e ? e.component : '';
        log.push(`${e.do}${c ? `:${c}` : ''}${e.do === 'canary' ? `:${e.check}:${e.afterMs}` : ''}`);
        switch (e.do) {
          case 'verify-artefact':
            return (
              script.artefact?.(c) ?? {
                type: 'artefact',
                component: e.component,
                sha384: e.sha384,
                channelDigest: 'sha384:doc',
              }
            );
          case 'read-live':
            return script.live ?? { type: 'live', versions: { engine: '1.3.0', console: '1.3.0' } };
          case 'upload':
            return script.upload?.(c) ?? { type: 'uploaded', component: e.component };
          case 'read-back':
            return (
              script.readBack?.(c) ?? {
                type: 'read-back',
                component: e.component,
                sha384: doc.components[e.component]!.sha384,
              }
            );
          case 'promote':
            return script.promote?.(c) ?? { type: 'promoted', component: e.component };
          case 'canary':
            return { type: 'canary', verdict: verdicts.shift() ?? 'undecided' };
          case 'rollback-deploy':
            return script.rollback?.(c) ?? { type: 'rolled-back', component: e.component };
        }
      },
    },
  };
}

t.test('a live apply runs every step in order, persisting before it acts', async (t) => {
  const x = executor({});
  const reply = await driveUpdate(startApply(input()), x.exec);
  t.equal(reply.outcome, 'applied');
  t.same(x.log, [
    'verify-artefact:console',
    'verify-artefact:engine',
    'read-live',
    'persist:pending/uploading',
    'upload:console',
    'upload:engine',
    'read-back:console',
    'read-back:engine',
    'persist:pending/promoting',
    'promote:console',
    'promote:engine',
    'persist:pending/settling',
    'canary:flight:0',
    'persist:settled/done/applied',
  ]);
  t.same(x.records[0]!.from, { engine: '1.3.0', console: '1.3.0' }, 'rollback target stored before upload');
  t.same(reply.record!.floors, { console: '1.4.0', engine: '1.4.0' }, 'floors to persist');
  t.same(reply.record!.channel, { sequence: 7, digest: 'sha384:doc' });
});

t.test('each step refuses with its outcome', async (t) => {
  const cases: [string, Partial<ApplyInput>, Script, string, string | undefined, boolean][] = [
    // name, input, script, outcome, code, anything persisted
    ['no-update', { running: { engine: '1.4.0', console: '1.4.0' } }, {}, 'no-update', undefined, false],
    [
      'floor',
      { floors: { engine: '1.5.0' }, running: { engine: '1.5.0' }, allowDowngrade: true },
      {},
      'refused',
      'ERR_UPDATE_BELOW_FLOOR',
      false,
    ],
    [
      'forward-only',
      { running: { engine: '1.5.0' }, floors: {} },
      {},
      'refused',
      'ERR_UPDATE_FORWARD_ONLY',
      false,
    ],
    [
      'migration',
      { channel: { document: makeDoc({ recommended: { migration: true } }), digest: 'sha384:doc' } },
      {},
      'refused',
      'ERR_UPDATE_MIGRATION_GUARD',
      false,
    ],
    [
      'compat',
      {
        channel: { document: makeDoc({ recommended: { minEngineVersion: '1.3.9' } }), digest: 'sha384:doc' },
      },
      {},
      'refused',
      'ERR_UPDATE_INCOMPATIBLE',
      false,
    ],
    [
      'artefact hash',
      {},
      { artefact: () => ({ type: 'failed', code: 'ERR_UPDATE_ARTEFACT_HASH' }) },
      'refused',
      'ERR_UPDATE_ARTEFACT_HASH',
      false,
    ],
    [
      'artefact from another document',
      {},
      {
        artefact: (c) => ({
          type: 'artefact',
          component: c as 'engine',
          sha384: doc.components[c as 'engine']!.sha384,
          channelDigest: 'sha384:other',
        }),
      },
      'refused',
      'ERR_UPDATE_ARTEFACT_HASH',
      false,
    ],
    [
      'rollback target unreadable',
      {},
      { live: { type: 'failed' } },
      'refused',
      'ERR_UPDATE_NO_ROLLBACK_TARGET',
      false,
    ],
    ['dry run (default)', { dryRun: undefined as unknown as boolean }, {}, 'dry-run', undefined, false],
    ['no destination', { destinationConfigured: false }, {}, 'refused', 'ERR_UPDATE_NO_DESTINATION', false],
    ['upload', {}, { upload: () => ({ type: 'failed' }) }, 'refused', 'ERR_UPDATE_UPLOAD', true],
    [
      'read-back enforce',
      { readBack: 'enforce' },
      { readBack: (c) => ({ type: 'read-back', component: c as 'engine', sha384: 'sha384:x' }) },
      'refused',
      'ERR_UPDATE_READ_BACK',
      true,
    ],
    [
      'read-back warn proceeds',
      {},
      { readBack: (c) => ({ type: 'read-back', component: c as 'engine', sha384: 'sha384:x' }) },
      'applied',
      undefined,
      true,
    ],
    [
      'promote (first component)',
      {},
      { promote: () => ({ type: 'failed' }) },
      'refused',
      'ERR_UPDATE_PROMOTE',
      true,
    ],
    ['dead canary rolls back', {}, { canary: ['dead'] }, 'rolled-back', undefined, true],
    [
      'rollback deploy fails',
      {},
      {
        canary: ['dead'],
        rollback: (c) =>
          c === 'engine' ? { type: 'failed' } : { type: 'rolled-back', component: 'console' },
      },
      'rollback-failed',
      undefined,
      true,
    ],
  ];
  t.plan(cases.length * 3);
  for (const [name, patch, script, outcome, code, persisted] of cases) {
    const x = executor(script);
    const reply = await driveUpdate(startApply(input(patch)), x.exec);
    t.equal(reply.outcome, outcome, `${name}: outcome`);
    t.equal(reply.code, code, `${name}: code`);
    t.equal(x.records.length > 0, persisted, `${name}: persisted`);
  }
});

t.test('dead canary: rollback-failed is persisted before any rollback deploy', async (t) => {
  const x = executor({ canary: ['dead'] });
  const reply = await driveUpdate(startApply(input()), x.exec);
  const at = x.log.indexOf('persist:settled/rolling-back/rollback-failed');
  t.ok(at > 0);
  t.equal(x.log[at + 1], 'rollback-deploy:engine', 'engine reverted first, right after');
  t.equal(x.log[at + 2], 'rollback-deploy:console');
  t.equal(x.log.at(-1), 'persist:settled/done/rolled-back');
  t.equal(reply.record!.floors, null, 'no floor raised');
});

t.test(
  'an undecided canary gets two flights and one self-check, then awaits the scheduled canary',
  async (t) => {
    t.equal(
      CANARY_RETRY_SCHEDULE.reduce((s, r) => s + r.afterMs, 0),
      3000,
      'about three seconds',
    );
    const x = executor({ canary: ['undecided', 'undecided', 'undecided', 'undecided'] });
    const reply = await driveUpdate(startApply(input()), x.exec);
    t.same(
      x.log.filter((l) => l.startsWith('canary')),
      ['canary:flight:0', 'canary:flight:1000', 'canary:flight:1000', 'canary:self-check:1000'],
    );
    t.equal(reply.outcome, 'awaiting-canary');
    t.equal(reply.record!.phase, 'awaiting-canary');
    t.equal(reply.record!.status, 'pending', 'the new version is kept');
    const y = executor({ canary: ['undecided', 'alive'] });
    t.equal((await driveUpdate(startApply(input()), y.exec)).outcome, 'applied', 'a later flight decides');

    // The scheduled canary settles it later.
    const settled = await driveUpdate(
      settleRecord(reply.record!, 'alive', '2026-05-01T13:00:00Z'),
      executor({}).exec,
    );
    t.equal(settled.outcome, 'applied');
    const dead = executor({});
    t.equal(
      (await driveUpdate(settleRecord(reply.record!, 'dead', '2026-05-01T13:00:00Z'), dead.exec)).outcome,
      'rolled-back',
    );
    t.equal(dead.log[0], 'persist:settled/rolling-back/rollback-failed');
  },
);

t.test('a failed promote of a later component reverts the earlier ones', async (t) => {
  const x = executor({
    promote: (c) => (c === 'engine' ? { type: 'failed' } : { type: 'promoted', component: 'console' }),
  });
  const reply = await driveUpdate(startApply(input()), x.exec);
  t.equal(reply.outcome, 'refused');
  t.equal(reply.code, 'ERR_UPDATE_PROMOTE');
  t.same(x.log.slice(-3), [
    'persist:refused/rolling-back',
    'rollback-deploy:console',
    'persist:refused/done',
  ]);
});

t.test('settle, ramp and ramp/settle refuse the wrong record shape', async (t) => {
  const codeOf = (fn: () => unknown) => {
    try {
      fn();
      return undefined;
    } catch (e) {
      return isUpdateError(e) ? e.code : String(e);
    }
  };
  const ramp = await driveUpdate(startRamp({ ...input(), percentage: 25 }), executor({}).exec);
  t.equal(ramp.outcome, 'ramping');
  t.equal(ramp.record!.shape, 'ramp');
  t.same(ramp.record!.components, ['engine']);
  t.equal(
    codeOf(() => settleRecord(ramp.record!, 'alive', 'x')),
    'ERR_UPDATE_RAMP_RECORD',
  );
  t.equal(
    codeOf(() => startRamp({ ...input(), percentage: 25, components: ['console'] })),
    'ERR_UPDATE_RAMP_CONSOLE',
  );
  t.equal(
    codeOf(() => startRamp({ ...input(), percentage: 0 })),
    'ERR_UPDATE_INVALID_ARGUMENT',
  );
  const migration = startRamp({
    ...input(),
    channel: { document: makeDoc({ recommended: { migration: true } }), digest: 'sha384:doc' },
    percentage: 10,
  });
  t.equal(migration.effect.do === 'stop' && migration.effect.reply.code, 'ERR_UPDATE_MIGRATION_GUARD');

  const applied = await driveUpdate(
    startApply(input()),
    executor({ canary: ['undecided', 'undecided', 'undecided', 'undecided'] }).exec,
  );
  t.equal(
    codeOf(() => settleRamp(applied.record!, 'alive', 'x')),
    'ERR_UPDATE_NOT_RAMP_RECORD',
  );
  t.equal(
    codeOf(() => settleRamp(null, 'alive', 'x')),
    'ERR_UPDATE_NO_PENDING',
  );
  t.equal(
    codeOf(() => settleRecord(null, 'alive', 'x')),
    'ERR_UPDATE_NO_PENDING',
  );

  const x = executor({});
  const full = await driveUpdate(settleRamp(ramp.record!, 'alive', 'x'), x.exec);
  t.equal(full.outcome, 'applied');
  t.same(x.log, ['persist:pending/promoting', 'promote:engine', 'persist:settled/done/applied']);
  t.equal(
    (await driveUpdate(settleRamp(ramp.record!, 'dead', 'x'), executor({}).exec)).outcome,
    'rolled-back',
  );
});

t.test('manual rollback: per component, never across a schema epoch', async (t) => {
  const applied = await driveUpdate(startApply(input()), executor({}).exec);
  const x = executor({});
  const reply = await driveUpdate(startRollback(applied.record!, 'x', 'console'), x.exec);
  t.equal(reply.outcome, 'rolled-back');
  t.same(x.log, [
    'persist:settled/rolling-back/rollback-failed',
    'rollback-deploy:console',
    'persist:settled/done/rolled-back',
  ]);
  const epoch = await driveUpdate(
    startApply(
      input({
        channel: {
          document: makeDoc({ recommended: { schemaEpoch: 2, migration: true } }),
          digest: 'sha384:doc',
        },
        path: 'approved',
      }),
    ),
    executor({}).exec,
  );
  t.equal(epoch.outcome, 'applied', 'an approved migration applies');
  t.throws(() => startRollback(epoch.record!, 'x'), { code: 'ERR_UPDATE_SCHEMA_EPOCH' });
  t.equal(
    startRollback(epoch.record!, 'x', 'console').effect.do,
    'rollback-deploy',
    'the console alone may go back',
  );
  t.throws(() => startRollback(null, 'x'), { code: 'ERR_UPDATE_NO_ROLLBACK_TARGET' });
});

t.test('ramp membership is stable and grows with the percentage', async (t) => {
  const ids = Array.from({ length: 400 }, (_, i) => `replica-${i}`);
  const at = (p: number) => ids.filter((id) => inRamp(id, '1.4.0', p));
  t.ok(
    at(25).every((id) => at(50).includes(id)),
    'monotonic',
  );
  t.ok(Math.abs(at(25).length - 100) < 40, `about a quarter (${at(25).length})`);
  t.equal(at(100).length, 400);
  t.same(at(25), at(25), 'deterministic');
});
