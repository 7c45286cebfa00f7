// Role changes through HTTP against a started engine: roles.write and step-up, only an owner
// grants owner, the bearer never grants owner, the last owner stays, unknown roles refused,
// members listed and changes audited.
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`assigning and removing roles (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const roles = engine.app.state.roles;
    await roles.assign({
      subject: passkeySubject('ada@example.org'),
      role: 'owner',
      email: 'ada@example.org',
      grantedBy: 'test',
    });
    await roles.assign({
      subject: passkeySubject('cat@example.org'),
      role: 'access-admin',
      email: 'cat@example.org',
      grantedBy: 'test',
    });
    const as = async (email: string) => {
      const m = await engine.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`, origin: CONSOLE };
    };
    const post = (path: string, headers: Record<string, string>, body: unknown) =>
      http(`${engine.url}/admin/roles/${path}`, { headers, body });

    const ok = await post('assign', await as('ada@example.org'), {
      email: 'Bob@Example.org',
      role: 'operator',
    });
    t.equal(ok.status, 200, ok.text);
    t.same(ok.json(), { ok: true, subject: 'passkey:bob@example.org', role: 'operator', previous: null });
    const listed = (await http(`${engine.url}/admin/roles`, { headers: bearer() })).json().members;
    t.ok(
      listed.some(
        (m: { subject: string; role: string }) =>
          m.subject === 'passkey:bob@example.org' && m.role === 'operator',
      ),
    );

    const viewer = await post('assign', await as('vic@example.org'), {
      email: 'vic@example.org',
      role: 'owner',
    });
    t.equal(viewer.status, 403, 'a viewer cannot change roles');
    t.match(viewer.json(), { error: 'forbidden', required: 'roles.write' });
    const admin = await post('assign', await as('cat@example.org'), {
      email: 'bob@example.org',
      role: 'owner',
    });
    t.equal(admin.status, 403, 'only an owner grants owner');
    t.match(admin.json(), { error: 'forbidden', required: 'owner' });
    t.equal(
      (await post('assign', await as('cat@example.org'), { email: 'bob@example.org', role: 'viewer' }))
        .status,
      200,
      'access-admin manages non-owner roles',
    );
    const token = await post('assign', bearer(), { email: 'bob@example.org', role: 'owner' });
    t.equal(token.status, 403, 'the admin token never grants owner');
    t.equal((await post('assign', bearer(), { email: 'bob@example.org', role: 'nonsense' })).status, 400);
    t.equal((await post('assign', bearer(), { role: 'viewer' })).status, 400, 'no member named');

    const last = await post('remove', bearer(), { email: 'ada@example.org' });
    t.equal(last.status, 409);
    t.same(last.json(), { error: 'the last owner cannot be removed' });
    t.equal(
      (await post('assign', bearer(), { email: 'ada@example.org', role: 'viewer' })).status,
      409,
      'nor demoted',
    );
    const second = await post('assign', await as('ada@example.org'), {
      email: 'dan@example.org',
      role: 'owner',
    });
    t.equal(second.status, 200, 'an owner grants owner');
    const removed = await post('remove', await as('dan@example.org'), { email: 'ada@example.org' });
    t.same(
      [removed.status, removed.json()],
      [200, { ok: true, subject: 'passkey:ada@example.org', removed: true }],
    );
    t.same(
      (await post('remove', bearer(), { email: 'ada@example.org' })).json().removed,
      false,
      'nothing left to remove',
    );

    const feed = JSON.stringify(
      (await http(`${engine.url}/admin/audit?limit=50`, { headers: bearer() })).json(),
    );
    t.match(feed, /role-change/);
  });
