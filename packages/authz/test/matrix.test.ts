// Every cell of the 6 x 21 matrix against an explicit expected table, plus the counts the
// specification states. Changing a cell in src/roles.ts without changing this table fails here.
import t from 'tap';
import {
  CAPABILITIES,
  type Capability,
  capabilitiesOf,
  holdersOf,
  ROLE_CAPABILITIES,
  ROLES,
} from '../src/index.ts';

// Columns: viewer, operator, restore-operator, approver, access-admin, owner.
const EXPECTED: Record<Capability, readonly [0 | 1, 0 | 1, 0 | 1, 0 | 1, 0 | 1, 0 | 1]> = {
  'job.read': [1, 1, 1, 1, 1, 1],
  'restore.dryrun': [1, 1, 1, 1, 1, 1],
  'restore.verify': [1, 1, 1, 1, 1, 1],
  'roles.read': [1, 1, 1, 1, 1, 1],
  'audit.read': [1, 1, 1, 1, 1, 1],
  'reports.read': [1, 1, 1, 1, 1, 1],
  'posture.read': [1, 1, 1, 1, 1, 1],
  'job.write': [0, 1, 0, 1, 0, 1],
  'job.delete': [0, 1, 0, 1, 0, 1],
  'run.trigger': [0, 1, 0, 1, 0, 1],
  'drill.run': [0, 1, 1, 1, 0, 1],
  'restore.request': [0, 1, 1, 1, 0, 1],
  'restore.apply': [0, 0, 1, 1, 0, 1],
  'restore.approve': [0, 0, 0, 1, 1, 1],
  'roles.write': [0, 0, 0, 0, 1, 1],
  'access.policy': [0, 0, 0, 0, 1, 1],
  'keys.ceremony': [0, 0, 0, 0, 0, 1],
  'notify.config': [0, 1, 0, 1, 0, 1],
  'expiry.config': [0, 1, 0, 1, 0, 1],
  'scheduledtest.config': [0, 0, 1, 1, 0, 1],
  'posture.riskaccept': [0, 0, 0, 0, 0, 1],
};

t.test('six roles and 21 capabilities, in the specification order', async (t) => {
  t.strictSame([...ROLES], ['viewer', 'operator', 'restore-operator', 'approver', 'access-admin', 'owner']);
  t.equal(CAPABILITIES.length, 21);
  t.equal(new Set(CAPABILITIES).size, 21, 'no duplicates');
  t.strictSame(Object.keys(EXPECTED), [...CAPABILITIES], 'expected table covers exactly the 21');
});

t.test('every cell of the matrix', async (t) => {
  t.plan(ROLES.length * CAPABILITIES.length);
  for (const capability of CAPABILITIES) {
    const row = EXPECTED[capability];
    ROLES.forEach((role, i) => {
      const want = row[i] === 1;
      t.equal(
        capabilitiesOf(role).has(capability),
        want,
        `${role} ${want ? 'holds' : 'lacks'} ${capability}`,
      );
    });
  }
});

t.test('the counts and named holders the specification states', async (t) => {
  const holders = (c: Capability) => [...holdersOf(c)];
  for (const c of [
    'job.read',
    'restore.dryrun',
    'restore.verify',
    'roles.read',
    'audit.read',
    'reports.read',
    'posture.read',
  ] as const) {
    t.strictSame(holders(c), [...ROLES], `${c}: all six roles`);
  }
  for (const c of ['job.write', 'job.delete', 'run.trigger'] as const)
    t.equal(holders(c).length, 3, `${c}: three`);
  t.strictSame(holders('drill.run'), ['operator', 'restore-operator', 'approver', 'owner']);
  t.equal(holders('restore.request').length, 4, 'restore.request: four roles');
  t.equal(holders('restore.apply').length, 3, 'restore.apply: three roles');
  t.notOk(holders('restore.apply').includes('operator'), 'restore.apply: not operator');
  t.equal(holders('restore.approve').length, 3, 'restore.approve: three roles');
  t.strictSame(holders('roles.write'), ['access-admin', 'owner']);
  t.strictSame(holders('access.policy'), ['access-admin', 'owner']);
  t.strictSame(holders('keys.ceremony'), ['owner']);
  t.strictSame(holders('notify.config'), ['operator', 'approver', 'owner']);
  t.equal(holders('expiry.config').length, 3, 'expiry.config: three');
  t.equal(holders('scheduledtest.config').length, 3, 'scheduledtest.config: three');
  t.strictSame(holders('posture.riskaccept'), ['owner']);
});

t.test(
  'authority is a map, not a rank: restore-operator and access-admin are subsets of owner',
  async (t) => {
    const owner = capabilitiesOf('owner');
    t.equal(owner.size, 21);
    for (const role of ROLES) {
      for (const c of capabilitiesOf(role)) t.ok(owner.has(c), `owner holds ${role}'s ${c}`);
    }
    const ro = capabilitiesOf('restore-operator');
    const aa = capabilitiesOf('access-admin');
    t.notOk([...ro].every((c) => aa.has(c)) || [...aa].every((c) => ro.has(c)), 'neither contains the other');
  },
);

t.test('separation of duties the decisions rely on', async (t) => {
  t.notOk(capabilitiesOf('access-admin').has('restore.request'), 'access-admin never originates a restore');
  t.notOk(capabilitiesOf('access-admin').has('restore.apply'), 'access-admin never writes restored data');
  t.notOk(
    capabilitiesOf('restore-operator').has('restore.approve'),
    'restore-operator is not its own checker',
  );
  t.notOk(
    capabilitiesOf('operator').has('scheduledtest.config'),
    'operators cannot switch off restore tests',
  );
});

t.test('the matrix is frozen and capabilitiesOf returns copies', async (t) => {
  t.ok(Object.isFrozen(ROLE_CAPABILITIES));
  t.ok(Object.isFrozen(ROLE_CAPABILITIES.viewer));
  const set = capabilitiesOf('viewer') as Set<Capability>;
  set.add('keys.ceremony');
  t.notOk(capabilitiesOf('viewer').has('keys.ceremony'), 'mutating a returned set changes nothing');
});

t.test('unknown names are refused', async (t) => {
  t.throws(() => capabilitiesOf('root' as never), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
  t.throws(() => capabilitiesOf('__proto__' as never), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
  t.throws(() => holdersOf('job.everything' as never), { code: 'ERR_AUTHZ_UNKNOWN_CAPABILITY' });
});
