// Custom roles: purely additive from a built-in base; never-conferrable capabilities and an owner
// base refused; unknown base and capability refused with typed errors.
import t from 'tap';
import {
  CAPABILITIES,
  type CustomRole,
  capabilitiesOf,
  defineCustomRole,
  NEVER_CONFERRABLE,
  ROLES,
  resolveCapabilities,
} from '../src/index.ts';

t.test('additive: the base set plus the additions, never less', async (t) => {
  for (const base of ROLES.filter((r) => r !== 'owner')) {
    const role = defineCustomRole({ name: `x-${base}`, base, add: ['job.write'] });
    const got = resolveCapabilities(role);
    for (const c of capabilitiesOf(base)) t.ok(got.has(c), `${base}-based keeps ${c}`);
    t.ok(got.has('job.write'), `${base}-based gains job.write`);
    t.equal(got.size, new Set([...capabilitiesOf(base), 'job.write']).size, 'and nothing else');
  }
});

t.test('the returned role is normalised and frozen', async (t) => {
  const role = defineCustomRole({
    name: 'release-manager',
    base: 'viewer',
    add: ['run.trigger', 'job.write', 'run.trigger'],
  });
  t.strictSame(role, {
    kind: 'custom',
    name: 'release-manager',
    base: 'viewer',
    add: ['job.write', 'run.trigger'],
  });
  t.ok(Object.isFrozen(role));
  t.ok(Object.isFrozen(role.add));
  const empty = defineCustomRole({ name: 'alias', base: 'operator', add: [] });
  t.strictSame([...resolveCapabilities(empty)], [...capabilitiesOf('operator')], 'no additions = the base');
});

t.test('every conferrable capability can be added; the two owner-exclusive ones never', async (t) => {
  for (const c of CAPABILITIES) {
    if (NEVER_CONFERRABLE.includes(c)) {
      t.throws(() => defineCustomRole({ name: 'r', base: 'viewer', add: [c] }), {
        code: 'ERR_AUTHZ_NOT_CONFERRABLE',
      });
      t.throws(() => defineCustomRole({ name: 'r', base: 'approver', add: ['job.read', c] }), {
        code: 'ERR_AUTHZ_NOT_CONFERRABLE',
      });
    } else {
      t.ok(
        resolveCapabilities(defineCustomRole({ name: 'r', base: 'viewer', add: [c] })).has(c),
        `${c} conferrable`,
      );
    }
  }
  t.strictSame([...NEVER_CONFERRABLE], ['keys.ceremony', 'posture.riskaccept']);
  t.ok(Object.isFrozen(NEVER_CONFERRABLE));
});

t.test('owner is refused as a base (it would confer both owner-exclusive capabilities)', async (t) => {
  t.throws(() => defineCustomRole({ name: 'super', base: 'owner', add: [] }), {
    code: 'ERR_AUTHZ_NOT_CONFERRABLE',
  });
});

t.test('unknown base, unknown capability, bad shape and taken names are refused', async (t) => {
  t.throws(() => defineCustomRole({ name: 'r', base: 'admin', add: [] }), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
  t.throws(() => defineCustomRole({ name: 'r', base: '__proto__', add: [] }), {
    code: 'ERR_AUTHZ_UNKNOWN_ROLE',
  });
  t.throws(() => defineCustomRole({ name: 'r', base: 'viewer', add: ['job.*'] }), {
    code: 'ERR_AUTHZ_UNKNOWN_CAPABILITY',
  });
  t.throws(() => defineCustomRole({ name: 'r', base: 'viewer', add: [42 as never] }), {
    code: 'ERR_AUTHZ_UNKNOWN_CAPABILITY',
  });
  t.throws(() => defineCustomRole({ name: 'r', base: 'viewer', add: 'job.write' as never }), {
    code: 'ERR_AUTHZ_INVALID_CUSTOM_ROLE',
  });
  t.throws(() => defineCustomRole(null as never), { code: 'ERR_AUTHZ_INVALID_CUSTOM_ROLE' });
  for (const name of ['', 'Ops', '1ops', 'ops team', 'a'.repeat(65), 'ops/1', 7]) {
    t.throws(() => defineCustomRole({ name: name as string, base: 'viewer', add: [] }), {
      code: 'ERR_AUTHZ_INVALID_CUSTOM_ROLE',
    });
  }
  for (const name of ROLES) {
    t.throws(() => defineCustomRole({ name, base: 'viewer', add: [] }), {
      code: 'ERR_AUTHZ_ROLE_NAME_TAKEN',
    });
  }
});

t.test('a tampered stored definition is re-validated when resolved', async (t) => {
  const forged = {
    kind: 'custom',
    name: 'sneaky',
    base: 'viewer',
    add: ['keys.ceremony'],
  } as unknown as CustomRole;
  t.throws(() => resolveCapabilities(forged), { code: 'ERR_AUTHZ_NOT_CONFERRABLE' });
  const ownerBased = { kind: 'custom', name: 'sneaky', base: 'owner', add: [] } as unknown as CustomRole;
  t.throws(() => resolveCapabilities(ownerBased), { code: 'ERR_AUTHZ_NOT_CONFERRABLE' });
  t.throws(() => resolveCapabilities('root' as never), { code: 'ERR_AUTHZ_UNKNOWN_ROLE' });
});
