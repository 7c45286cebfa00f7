// Role resolution (unmatched caller is viewer), the capability gate and the 403 body shapes.
import t from 'tap';
import {
  ADMIN_TOKEN_CALLER,
  AuthzForbiddenError,
  can,
  capabilitiesOf,
  defineCustomRole,
  forbiddenBody,
  isOwner,
  type RoleAssignment,
  requireCapability,
  requireOwner,
  resolveRole,
} from '../src/index.ts';

const ops = defineCustomRole({ name: 'ops-plus', base: 'operator', add: ['restore.apply'] });
const table = new Map<string, RoleAssignment>([
  ['https://idp.example/|alice', 'owner'],
  ['https://idp.example/|bob', 'operator'],
  ['https://idp.example/|carol', ops],
]);

t.test('resolveRole looks the subject up and falls back to viewer', async (t) => {
  t.equal(resolveRole('https://idp.example/|alice', table), 'owner');
  t.equal(resolveRole('https://idp.example/|bob', table), 'operator');
  t.equal(resolveRole('https://idp.example/|carol', table), ops);
  t.equal(resolveRole('https://idp.example/|mallory', table), 'viewer', 'unmatched subject is viewer');
  t.equal(resolveRole(undefined, table), 'viewer', 'no subject is viewer');
  t.equal(resolveRole(null, table), 'viewer');
  t.equal(resolveRole('', table), 'viewer');
  t.equal(resolveRole('x', new Map()), 'viewer', 'empty table');
});

t.test('resolveRole on a plain object uses own properties only', async (t) => {
  const record: Record<string, RoleAssignment> = { alice: 'owner', carol: ops };
  t.equal(resolveRole('alice', record), 'owner');
  t.equal(resolveRole('carol', record), ops);
  for (const subject of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    t.equal(resolveRole(subject, record), 'viewer', `${subject} inherits nothing`);
  }
});

t.test('a malformed table entry fails closed to viewer', async (t) => {
  const bad = new Map<string, unknown>([
    ['a', 'root'],
    ['b', 42],
    ['c', { role: 'owner' }],
    ['d', null],
  ]) as unknown as Map<string, RoleAssignment>;
  for (const s of ['a', 'b', 'c', 'd']) t.equal(resolveRole(s, bad), 'viewer');
});

t.test('can() accepts a role, a caller, a custom role or a capability set', async (t) => {
  t.ok(can('operator', 'job.write'));
  t.notOk(can('viewer', 'job.write'));
  t.ok(can({ role: 'approver' }, 'restore.approve'));
  t.ok(can(ops, 'restore.apply'), 'custom addition');
  t.ok(can(ops, 'job.write'), 'custom base');
  t.notOk(can(ops, 'roles.write'));
  t.ok(can(capabilitiesOf('access-admin'), 'access.policy'));
  t.notOk(can(new Set(), 'job.read'));
  t.ok(can(ADMIN_TOKEN_CALLER, 'keys.ceremony'), 'the admin token is owner');
  t.throws(
    () => can('owner', 'job.*' as never),
    { code: 'ERR_AUTHZ_UNKNOWN_CAPABILITY' },
    'a typo fails loudly',
  );
  t.throws(() => can('root' as never, 'job.read'), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
});

t.test('403 body: built-in caller shows its role', async (t) => {
  t.strictSame(forbiddenBody('job.write', 'viewer'), {
    error: 'forbidden',
    required: 'job.write',
    have: 'viewer',
  });
  t.strictSame(forbiddenBody('restore.apply', { role: 'operator' }), {
    error: 'forbidden',
    required: 'restore.apply',
    have: 'operator',
  });
  t.strictSame(
    Object.keys(forbiddenBody('job.write', 'viewer')),
    ['error', 'required', 'have'],
    'exactly three keys',
  );
});

t.test('403 body: a custom-role caller shows the viewer floor, never the custom name or base', async (t) => {
  const body = forbiddenBody('roles.write', ops);
  t.strictSame(body, { error: 'forbidden', required: 'roles.write', have: 'viewer' });
  t.notMatch(JSON.stringify(body), /ops-plus|operator/);
  t.strictSame(forbiddenBody('keys.ceremony', { role: ops }).have, 'viewer');
});

t.test('403 body: owner-only routes put owner in required', async (t) => {
  t.strictSame(forbiddenBody('owner', 'access-admin'), {
    error: 'forbidden',
    required: 'owner',
    have: 'access-admin',
  });
  t.strictSame(forbiddenBody('owner', ops), { error: 'forbidden', required: 'owner', have: 'viewer' });
  t.throws(() => forbiddenBody('root' as never, 'viewer'), { code: 'ERR_AUTHZ_UNKNOWN_CAPABILITY' });
});

t.test('requireCapability and requireOwner throw with the 403 body', async (t) => {
  t.doesNotThrow(() => requireCapability('operator', 'run.trigger'));
  const err = t.throws(() => requireCapability('restore-operator', 'job.write')) as AuthzForbiddenError;
  t.ok(err instanceof AuthzForbiddenError);
  t.equal(err.code, 'ERR_AUTHZ_FORBIDDEN');
  t.strictSame(err.body, { error: 'forbidden', required: 'job.write', have: 'restore-operator' });

  t.doesNotThrow(() => requireOwner('owner'));
  t.doesNotThrow(() => requireOwner(ADMIN_TOKEN_CALLER));
  const owner = t.throws(() => requireOwner(ops)) as AuthzForbiddenError;
  t.equal(owner.code, 'ERR_AUTHZ_OWNER_ONLY');
  t.strictSame(owner.body, { error: 'forbidden', required: 'owner', have: 'viewer' });
  t.ok(isOwner({ role: 'owner' }));
  t.notOk(isOwner('access-admin'));
});
