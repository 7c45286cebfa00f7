// Who may grant, remove and define roles: only an owner grants or removes owner (and any role
// carrying roles.write); roles.write holders grant the rest; the admin token never mints an owner.
import t from 'tap';
import {
  ADMIN_TOKEN_CALLER,
  type AuthzForbiddenError,
  assertCanGrantRole,
  assertCanRemoveRole,
  canDefineCustomRole,
  canGrantRole,
  canRemoveRole,
  defineCustomRole,
  ROLES,
  type Role,
  roleChangeRequirement,
} from '../src/index.ts';

// granter -> roles it may grant (and remove).
const EXPECTED: Record<Role, readonly Role[]> = {
  viewer: [],
  operator: [],
  'restore-operator': [],
  approver: [],
  'access-admin': ['viewer', 'operator', 'restore-operator', 'approver'],
  owner: [...ROLES],
};

t.test('every granter x target cell, for grant and for removal', async (t) => {
  t.plan(ROLES.length * ROLES.length * 2);
  for (const granter of ROLES) {
    for (const target of ROLES) {
      const want = EXPECTED[granter].includes(target);
      t.equal(canGrantRole(granter, target), want, `${granter} ${want ? 'may' : 'may not'} grant ${target}`);
      t.equal(
        canRemoveRole(granter, target),
        want,
        `${granter} ${want ? 'may' : 'may not'} remove ${target}`,
      );
    }
  }
});

t.test('owner-managed roles: owner, access-admin and custom roles adding roles.write', async (t) => {
  t.equal(roleChangeRequirement('owner'), 'owner');
  t.equal(roleChangeRequirement('access-admin'), 'owner');
  t.equal(roleChangeRequirement('approver'), 'roles.write');
  const grantor = defineCustomRole({ name: 'helpdesk', base: 'viewer', add: ['roles.write'] });
  const plain = defineCustomRole({ name: 'ops-plus', base: 'operator', add: ['restore.apply'] });
  t.equal(roleChangeRequirement(grantor), 'owner');
  t.equal(roleChangeRequirement(plain), 'roles.write');
  t.ok(canGrantRole('access-admin', plain));
  t.notOk(canGrantRole('access-admin', grantor));
  t.ok(canGrantRole('owner', grantor));
  t.ok(canGrantRole(grantor, 'operator'), 'a custom roles.write holder grants ordinary roles');
  t.notOk(canGrantRole(grantor, 'access-admin'));
  t.notOk(canGrantRole(grantor, 'owner'));
  t.ok(canDefineCustomRole('access-admin', plain));
  t.notOk(canDefineCustomRole('access-admin', grantor), 'making a roles.write custom role is owner-only');
  t.ok(canDefineCustomRole('owner', grantor));
  t.notOk(canDefineCustomRole('operator', plain));
});

t.test('the admin token acts as owner but never mints an owner', async (t) => {
  t.notOk(canGrantRole(ADMIN_TOKEN_CALLER, 'owner'));
  t.ok(canGrantRole(ADMIN_TOKEN_CALLER, 'access-admin'));
  t.ok(canRemoveRole(ADMIN_TOKEN_CALLER, 'owner'), 'break-glass may remove a compromised owner');
  t.ok(canGrantRole({ role: 'owner' }, 'owner'), 'a subject-bearing owner may');
});

t.test('assert helpers throw the right code and 403 body', async (t) => {
  t.doesNotThrow(() => assertCanGrantRole('access-admin', 'operator'));
  const ownerOnly = t.throws(() => assertCanGrantRole('access-admin', 'owner')) as AuthzForbiddenError;
  t.equal(ownerOnly.code, 'ERR_AUTHZ_OWNER_ONLY');
  t.strictSame(ownerOnly.body, { error: 'forbidden', required: 'owner', have: 'access-admin' });
  const peer = t.throws(() => assertCanRemoveRole('access-admin', 'access-admin')) as AuthzForbiddenError;
  t.equal(peer.code, 'ERR_AUTHZ_OWNER_ONLY');
  const plain = t.throws(() => assertCanGrantRole('approver', 'viewer')) as AuthzForbiddenError;
  t.equal(plain.code, 'ERR_AUTHZ_FORBIDDEN');
  t.strictSame(plain.body, { error: 'forbidden', required: 'roles.write', have: 'approver' });
  const token = t.throws(() => assertCanGrantRole(ADMIN_TOKEN_CALLER, 'owner')) as AuthzForbiddenError;
  t.equal(token.code, 'ERR_AUTHZ_OWNER_ONLY');
  t.throws(() => canGrantRole('owner', 'root' as never), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
});
