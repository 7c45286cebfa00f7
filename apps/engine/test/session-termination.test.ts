// Ending sessions through HTTP against a started engine: the double-submit CSRF token on every
// termination route, ending this session only, the others (with a fresh cookie for this one), one
// person's (roles.write), everyone's; the bearer and perimeter callers need no CSRF token.
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`ending sessions (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    await engine.app.state.roles.assign({
      subject: passkeySubject('ada@example.org'),
      role: 'owner',
      email: 'ada@example.org',
      grantedBy: 'test',
    });
    /** A signed-in person: both cookies and the CSRF token, as a browser would hold them. */
    const signIn = async (email: string) => {
      const m = await engine.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return {
        cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`,
        csrf: m.csrfToken,
      };
    };
    const post = (path: string, headers: Record<string, string>, body: unknown = {}) =>
      http(`${engine.url}/admin/${path}`, { headers: { origin: CONSOLE, ...headers }, body });
    const alive = async (s: { cookie: string }) =>
      (await http(`${engine.url}/admin/whoami`, { headers: { cookie: s.cookie } })).status === 200;

    const a1 = await signIn('ada@example.org');
    const a2 = await signIn('ada@example.org');
    const bob = await signIn('bob@example.org');

    // The double-submit token: missing, wrong, or a planted pair without the session's own token.
    const attempts: Record<string, string>[] = [
      { cookie: a1.cookie },
      { cookie: a1.cookie, 'x-engine-csrf': 'wrong' },
      { cookie: `${a1.cookie.split(';')[0]}; ${CSRF_COOKIE}=planted`, 'x-engine-csrf': 'planted' },
      { cookie: a1.cookie, 'x-engine-csrf': a2.csrf },
    ];
    for (const headers of attempts) {
      const r = await post('sessions/terminate', headers);
      t.equal(r.status, 403, JSON.stringify(headers).slice(0, 60));
      t.same(r.json(), { error: 'csrf token check failed' });
    }
    t.ok(await alive(a1), 'nothing ended by a refused request');

    // This session only.
    const one = await post('sessions/terminate', { cookie: a1.cookie, 'x-engine-csrf': a1.csrf });
    t.equal(one.status, 200, one.text);
    t.notOk(await alive(a1), 'ended');
    t.ok(await alive(a2), 'the same person elsewhere goes on');

    // The others: a2 keeps going on a fresh cookie; a3 (another device) ends.
    const a3 = await signIn('ada@example.org');
    const others = await post('sessions/terminate-others', { cookie: a2.cookie, 'x-engine-csrf': a2.csrf });
    t.equal(others.status, 200, others.text);
    t.notOk(await alive(a3), 'the other device is signed out');
    t.notOk(await alive(a2), 'the old cookie of this device too');
    const renewed = others.headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))!
      .split(';')[0]!;
    t.ok(await alive({ cookie: renewed }), 'this device goes on with the fresh cookie');

    // One person's sessions: roles.write (bob is a viewer).
    const bobTry = await post(
      'sessions/terminate-user',
      { cookie: bob.cookie, 'x-engine-csrf': bob.csrf },
      {
        subject: passkeySubject('ada@example.org'),
      },
    );
    t.equal(bobTry.status, 403);
    t.match(bobTry.json(), { error: 'forbidden', required: 'roles.write' });
    const user = await post('sessions/terminate-user', bearer(), {
      subject: passkeySubject('bob@example.org'),
    });
    t.equal(user.status, 200, user.text);
    t.notOk(await alive(bob), "bob's sessions end");
    t.ok(await alive({ cookie: renewed }), "ada's go on");

    // Everyone: the bearer needs no CSRF token (not cookie-borne).
    const tokenSession = (
      await http(`${engine.url}/admin/session/bootstrap`, { method: 'POST', headers: bearer() })
    ).headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))!
      .split(';')[0]!;
    const a4 = await signIn('ada@example.org');
    await new Promise((r) => setTimeout(r, 1100));
    const all = await post('sessions/terminate-all', bearer());
    t.equal(all.status, 200, all.text);
    for (const s of [{ cookie: renewed }, a4, { cookie: tokenSession }]) t.notOk(await alive(s), 'ended');
    await new Promise((r) => setTimeout(r, 1100));
    const after = await signIn('ada@example.org');
    t.ok(await alive(after), 'a new sign-in works');
    const feed = JSON.stringify(
      (await http(`${engine.url}/admin/audit?limit=50`, { headers: bearer() })).json(),
    );
    t.match(feed, /session-terminate/);
  });

t.test('revoking a passkey', async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE });
  const ada = passkeySubject('ada@example.org');
  const bob = passkeySubject('bob@example.org');
  const key = (id: string, subject: string, email: string) =>
    engine.app.state.identity.addPasskey({
      id,
      subject,
      email,
      publicKey: 'pQEC',
      counter: 0,
      transports: [],
    });
  await key('ada-1', ada, 'ada@example.org');
  await key('ada-2', ada, 'ada@example.org');
  await key('bob-1', bob, 'bob@example.org');
  const signIn = async (email: string) => {
    const m = await engine.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
    return {
      cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`,
      'x-engine-csrf': m.csrfToken,
      origin: CONSOLE,
    };
  };
  const revoke = (headers: Record<string, string>, credentialId: string) =>
    http(`${engine.url}/admin/signin-factors/revoke`, { headers, body: { credentialId } });

  const bobs = await signIn('bob@example.org');
  const other = await revoke(bobs, 'ada-1');
  t.equal(other.status, 403, "someone else's passkey needs roles.write");
  t.match(other.json(), { error: 'forbidden', required: 'roles.write' });
  const adas = await signIn('ada@example.org');
  t.equal((await revoke({ ...adas, 'x-engine-csrf': 'wrong' }, 'ada-1')).status, 403, 'double-submit token');
  const own = await revoke(adas, 'ada-1');
  t.equal(own.status, 200, own.text);
  t.same(own.json(), { ok: true, subject: ada, passkeysLeft: 1, sessionsEnded: true });
  t.equal(
    (await http(`${engine.url}/admin/whoami`, { headers: { cookie: adas.cookie } })).status,
    401,
    'her sessions ended',
  );
  const last = await revoke(await signIn('ada@example.org'), 'ada-2');
  t.equal(last.status, 409, 'not the last passkey without recovery codes');
  t.same(
    (await engine.app.state.identity.passkeysOf(ada)).map((p) => p.id),
    ['ada-2'],
  );
  t.equal((await revoke(bearer(), 'bob-1')).status, 200, "the bearer (owner) revokes anyone's");
  t.equal((await revoke(bearer(), 'nope')).status, 404);
});
