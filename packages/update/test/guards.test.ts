// The version guards, table-driven, in the specification's order.
import t from 'tap';
import { compareVersions, type GuardInput, raiseFloor, runGuards } from './helpers/exports.ts';

const release = {
  version: '1.4.0',
  risk: 'routine' as const,
  requiredSteps: [],
  schemaEpoch: 1,
  migration: false,
};
const base: GuardInput = {
  target: '1.4.0',
  running: '1.3.0',
  runningEngine: '1.3.0',
  floor: '1.3.0',
  runningSchemaEpoch: 1,
  release,
  path: 'one-click',
};

const cases: [string, Partial<GuardInput>, string][] = [
  ['forward update passes', {}, 'ok'],
  ['first install passes', { running: null, floor: null }, 'ok'],
  ['already current', { running: '1.4.0' }, 'no-update'],
  ['below the floor', { floor: '1.5.0', running: '1.5.0' }, 'floor'],
  [
    'below the floor even with downgrade opt-in',
    { floor: '1.5.0', running: '1.5.0', allowDowngrade: true },
    'floor',
  ],
  ['uncomparable floor', { floor: 'garbage' }, 'floor'],
  ['older target without opt-in', { running: '1.5.0', floor: '1.3.0' }, 'forward-only'],
  ['older target with opt-in', { running: '1.5.0', floor: '1.3.0', allowDowngrade: true }, 'ok'],
  ['uncomparable running version', { running: 'dev-build', floor: null }, 'forward-only'],
  [
    'downgrade across a schema epoch',
    { running: '1.5.0', floor: null, allowDowngrade: true, runningSchemaEpoch: 2 },
    'schema-epoch',
  ],
  ['migration by one click', { release: { ...release, migration: true } }, 'migration'],
  ['migration on the ramp', { release: { ...release, migration: true }, path: 'ramp' }, 'migration'],
  ['migration after approval', { release: { ...release, migration: true }, path: 'approved' }, 'ok'],
  ['minimum engine newer than running', { release: { ...release, minEngineVersion: '1.3.5' } }, 'compat'],
  ['minimum engine met', { release: { ...release, minEngineVersion: '1.3.0' } }, 'ok'],
  [
    'unparseable running engine',
    { runningEngine: 'x', release: { ...release, minEngineVersion: '1.0.0' } },
    'compat',
  ],
  ['prerelease below its release', { running: '1.4.0-rc.1', floor: null }, 'ok'],
];

t.plan(cases.length + 6);
for (const [name, patch, want] of cases) {
  const v = runGuards({ ...base, ...patch });
  t.equal(v.ok ? 'ok' : v.step, want, name);
}
t.equal(compareVersions('1.10.0', '1.9.0'), 1, 'numeric, not lexical');
t.equal(compareVersions('x', '1.0.0'), null);
t.equal(raiseFloor(null, '1.4.0'), '1.4.0');
t.equal(raiseFloor('1.5.0', '1.4.0'), '1.5.0', 'the floor never goes down');
t.equal(raiseFloor('1.3.0', '1.4.0'), '1.4.0');
const down = runGuards({ ...base, running: '1.5.0', floor: null, allowDowngrade: true });
t.same(down, { ok: true, downgrade: true });
