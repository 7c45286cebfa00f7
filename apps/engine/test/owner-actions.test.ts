// Owner-action dual control through HTTP: arming needs a second owner; while armed, minting a pull
// credential, granting owner and retiring the bearer answer 202 ownerActionQueued; a second owner
// approves (maker is not checker, single use) or rejects; disarming is itself an owner action.
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`owner actions wait for a second owner (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const roles = engine.app.state.roles;
    const grant = (email: string) =>
      roles.assign({ subject: passkeySubject(email), role: 'owner', email, grantedBy: 'test' });
    const as = async (email: string) => {
      const m = await engine.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`, origin: CONSOLE };
    };
    const post = (path: string, headers: Record<string, string>, body: unknown = {}) =>
      http(`${engine.url}/admin/${path}`, { headers, body });
    await grant('ada@example.org');
    const ada = await as('ada@example.org');

    const lonely = await post('policy/owner-actions', ada, { armed: true });
    t.equal(lonely.status, 409, 'no second owner to approve anything');
    await grant('dan@example.org');
    const dan = await as('dan@example.org');
    t.same((await post('policy/owner-actions', ada, { armed: true })).json(), { ok: true, armed: true });

    // A pull credential: queued, then carried out by the second owner.
    const queued = await post('support/credentials', ada, { scope: 'diagnostics' });
    t.equal(queued.status, 202, queued.text);
    t.match(queued.json(), { ownerActionQueued: true, id: /^oa_/, status: 'pending' });
    const id = queued.json().id;
    const self = await post(`owner-actions/${id}/approve`, ada);
    t.equal(self.status, 403, 'maker is not checker');
    t.equal(
      (await post(`owner-actions/${id}/approve`, bearer())).status,
      403,
      'the bearer has no subject to check with',
    );
    const approved = await post(`owner-actions/${id}/approve`, dan);
    t.equal(approved.status, 200, approved.text);
    t.match(approved.json(), {
      ok: true,
      action: 'credential-mint',
      result: { scope: 'diagnostics', secret: /^dps_/ },
    });
    t.equal((await post(`owner-actions/${id}/approve`, dan)).status, 409, 'single use');

    // Granting owner: queued, rejected, and then not approvable.
    const grantQueued = await post('roles/assign', ada, { email: 'eve@example.org', role: 'owner' });
    t.equal(grantQueued.status, 202, grantQueued.text);
    const gid = grantQueued.json().id;
    t.same((await post(`owner-actions/${gid}/reject`, dan)).json(), {
      ok: true,
      id: gid,
      status: 'rejected',
    });
    t.equal((await post(`owner-actions/${gid}/approve`, dan)).status, 409);
    t.equal(await roles.get(passkeySubject('eve@example.org')), null, 'eve is not an owner');
    t.equal(
      (await post('roles/assign', ada, { email: 'eve@example.org', role: 'operator' })).status,
      200,
      'other roles are not held back',
    );

    // Retiring the bearer: queued; approved; the bearer is refused.
    const retire = await post('policy/retire-break-glass-token', ada);
    t.equal(retire.status, 202, retire.text);
    t.equal((await http(`${engine.url}/admin/whoami`, { headers: bearer() })).status, 200, 'not yet');
    t.equal((await post(`owner-actions/${retire.json().id}/approve`, dan)).status, 200);
    t.equal(
      (await http(`${engine.url}/admin/whoami`, { headers: bearer() })).status,
      401,
      'retired once approved',
    );

    // Disarming is itself an owner action.
    const disarm = await post('policy/owner-actions', ada, { armed: false });
    t.equal(disarm.status, 202, 'disarming waits for a second owner');
    const listed = (await http(`${engine.url}/admin/owner-actions`, { headers: ada })).json();
    t.equal(listed.armed, true);
    t.same(
      listed.actions.map((a: { action: string; status: string }) => `${a.action}:${a.status}`),
      [
        'gate-disarm:pending',
        'admin-token-retire:consumed',
        'owner-grant:rejected',
        'credential-mint:consumed',
      ],
    );
    t.equal((await post(`owner-actions/${disarm.json().id}/approve`, dan)).status, 200);
    t.same((await http(`${engine.url}/admin/owner-actions`, { headers: ada })).json().armed, false);
    const feed = JSON.stringify((await http(`${engine.url}/admin/audit?limit=50`, { headers: ada })).json());
    for (const a of [
      'owner-action-queued',
      'owner-action-approved',
      'owner-action-rejected',
      'owner-action-gate',
    ])
      t.match(feed, a);
    t.notOk(feed.includes(approved.json().result.secret), 'the secret is not in the audit log');
  });
