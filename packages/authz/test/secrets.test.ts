// No caller-supplied value is ever echoed in an error message: a marker planted in every input
// that reaches an error path must not appear in any message, code or 403 body.
import t from 'tap';
import {
  type AuthzError,
  type AuthzForbiddenError,
  assertCanGrantRole,
  type CustomRole,
  can,
  capabilitiesOf,
  defineCustomRole,
  forbiddenBody,
  holdersOf,
  requireCapability,
  resolveCapabilities,
  resolveRole,
} from '../src/index.ts';

const MARKER = 'sk_live_MARKER_4f9c2e';

t.test('the marker never appears in an error', async (t) => {
  const attempts: Array<() => unknown> = [
    () => capabilitiesOf(MARKER as never),
    () => holdersOf(MARKER as never),
    () => can('viewer', MARKER as never),
    () => can(MARKER as never, 'job.read'),
    () => forbiddenBody(MARKER as never, 'viewer'),
    () => defineCustomRole({ name: MARKER, base: 'viewer', add: [] }),
    () => defineCustomRole({ name: 'r', base: MARKER, add: [] }),
    () => defineCustomRole({ name: 'r', base: 'viewer', add: [MARKER] }),
    () =>
      resolveCapabilities({
        kind: 'custom',
        name: MARKER,
        base: 'viewer',
        add: [MARKER],
      } as unknown as CustomRole),
    () => assertCanGrantRole('viewer', MARKER as never),
  ];
  t.plan(attempts.length * 3 + 2);
  for (const attempt of attempts) {
    const err = t.throws(attempt) as AuthzError;
    t.ok(typeof err.code === 'string' && err.code.startsWith('ERR_AUTHZ_'), err.code);
    t.notMatch(`${err.message} ${err.stack} ${JSON.stringify(err)}`, MARKER);
  }
  // A custom role's name, which an operator may choose freely, never reaches a 403 body.
  const custom = defineCustomRole({ name: 'sk-live-marker-4f9c2e', base: 'viewer', add: [] });
  let body = '';
  try {
    requireCapability(custom, 'job.write');
  } catch (e) {
    body = `${(e as AuthzForbiddenError).message} ${JSON.stringify((e as AuthzForbiddenError).body)}`;
  }
  t.notMatch(body, custom.name);
  t.equal(resolveRole(MARKER, {}), 'viewer', 'an unknown subject resolves quietly, with no error at all');
});
