// Cookie sessions through HTTP against a started engine, on SQLite and on PostgreSQL
// (docs/identity.md): the admin bearer exchanged for a token session, the cookie's attributes,
// whoami's csrfToken and paired cookie, the Origin check on writes, logout ending the session
// server-side, a retired bearer ending token sessions, and a present-but-invalid cookie never
// falling through to the bearer.
import { CSRF_COOKIE, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { retireAdminToken } from '../src/state/index.ts';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

/** `name=value` of the Set-Cookie line for `name`, and the whole line. */
function setCookie(headers: Headers, name: string): { pair: string; line: string } | null {
  const line = headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
  return line === undefined ? null : { pair: line.split(';')[0]!, line };
}

for (const backend of ['sqlite', 'postgres'] as const) {
  t.test(`token sessions on ${backend}`, async (t) => {
    const env: Record<string, string> = { CONSOLE_ORIGIN: CONSOLE };
    if (backend === 'postgres') env.ENGINE_DATABASE_URL = await postgresUrl();
    const engine = await startEngine(t, env);
    const admin = (path: string, init: Parameters<typeof http>[1] = {}) =>
      http(`${engine.url}/admin${path}`, init);

    // The bearer mints a token session: both cookies, __Host-, Secure, HttpOnly, SameSite=Strict.
    const boot = await admin('/session/bootstrap', { method: 'POST', headers: bearer() });
    t.equal(boot.status, 200, boot.text);
    t.match(boot.json(), { ok: true, sessionKind: 'token', csrfToken: /^[A-Za-z0-9_-]{43}$/ });
    const expires = Date.parse(boot.json().sessionExpiresAt);
    t.ok(Math.abs(expires - (Date.now() + 3600_000)) < 10_000, 'a token session lasts an hour');
    const session = setCookie(boot.headers, SESSION_COOKIE);
    const csrf = setCookie(boot.headers, CSRF_COOKIE);
    t.ok(session && csrf, 'both cookies set');
    for (const c of [session!, csrf!])
      t.match(
        c.line,
        /; Path=\/; Max-Age=3600; Secure; HttpOnly; SameSite=Strict$/,
        String(c.pair.split('=')[0]),
      );
    t.notMatch(session!.line, /owner/, 'no role in the cookie');
    const cookie = { cookie: session!.pair };

    // Reads work with the cookie alone; whoami hands the CSRF token and sets its cookie.
    const who = await admin('/whoami', { headers: cookie });
    t.equal(who.status, 200, who.text);
    t.match(who.json(), {
      method: 'session',
      sessionKind: 'token',
      subject: null,
      email: null,
      role: 'owner',
      roleSource: 'admin-token',
      csrfToken: boot.json().csrfToken,
    });
    t.equal(setCookie(who.headers, CSRF_COOKIE)?.pair, csrf!.pair, 'the paired CSRF cookie');
    t.equal((await admin('/jobs', { headers: cookie })).status, 200, 'a read');

    // Writes need Origin exactly equal to CONSOLE_ORIGIN.
    const job = { id: `s-${backend}`, cadenceSeconds: 3600, source: { type: 'files', path: '/srv/x' } };
    for (const origin of [undefined, 'https://evil.coffer.test', `${CONSOLE}/`]) {
      const r = await admin('/jobs', { headers: { ...cookie, ...(origin ? { origin } : {}) }, body: job });
      t.equal(r.status, 403, `origin ${origin}`);
      t.same(r.json(), { error: 'csrf origin check failed' });
    }
    const ok = await admin('/jobs', { headers: { ...cookie, origin: CONSOLE }, body: job });
    t.equal(ok.status, 200, ok.text);

    // A session does not mint another session; only the bare bearer does.
    const again = await admin('/session/bootstrap', {
      method: 'POST',
      headers: { ...cookie, origin: CONSOLE },
    });
    t.equal(again.status, 403);
    t.match(again.json(), { error: 'forbidden', required: 'admin-token' });

    // A present-but-invalid cookie is 401 and never falls through to a valid bearer beside it.
    const [h, p, s] = session!.pair.split('=')[1]!.split('.') as [string, string, string];
    const tampered = `${SESSION_COOKIE}=${h}.${p}.${s.slice(0, -2)}AA`;
    for (const bad of [tampered, `${SESSION_COOKIE}=junk`, `${session!.pair}; ${session!.pair}`]) {
      const r = await admin('/whoami', { headers: { cookie: bad, ...bearer() } });
      t.equal(r.status, 401, bad.slice(0, 40));
      t.equal(r.text, 'unauthorised');
    }

    // Logout: Origin checked; then the session is dead server-side even if the cookie is kept.
    const crossSite = await admin('/auth/logout', {
      method: 'POST',
      headers: { ...cookie, origin: 'https://evil.coffer.test' },
    });
    t.equal(crossSite.status, 403);
    t.equal((await admin('/whoami', { headers: cookie })).status, 200, 'a refused logout ends nothing');
    const out = await admin('/auth/logout', { method: 'POST', headers: { ...cookie, origin: CONSOLE } });
    t.equal(out.status, 200, out.text);
    t.same(out.json(), { ok: true });
    t.match(setCookie(out.headers, SESSION_COOKIE)?.line, /^__Host-engine_session=; .*Max-Age=0/);
    t.match(setCookie(out.headers, CSRF_COOKIE)?.line, /^__Host-engine_csrf=; .*Max-Age=0/);
    t.equal((await admin('/whoami', { headers: cookie })).status, 401, 'the old cookie is refused');
    const noCookie = await admin('/auth/logout', { method: 'POST', headers: { origin: CONSOLE } });
    t.same([noCookie.status, noCookie.json()], [200, { ok: true }], 'logout without a session says the same');

    // A new token session works, until the bearer is retired: token sessions die with it.
    const fresh = setCookie(
      (await admin('/session/bootstrap', { method: 'POST', headers: bearer() })).headers,
      SESSION_COOKIE,
    )!;
    t.equal((await admin('/whoami', { headers: { cookie: fresh.pair } })).status, 200);
    await retireAdminToken(engine.app.state, null);
    t.equal(
      (await admin('/whoami', { headers: { cookie: fresh.pair } })).status,
      401,
      'retired bearer, dead session',
    );

    // The signing key never leaves the state store.
    const all = engine.logs.join('\n');
    t.notMatch(all, /engine_session=ey/, 'no cookie value in the logs');
    t.notOk(all.includes(session!.pair.split('=')[1]!), 'no token in the logs');
  });
}

t.test('without CONSOLE_ORIGIN every cookie write fails the Origin check', async (t) => {
  const engine = await startEngine(t, {});
  const boot = await http(`${engine.url}/admin/session/bootstrap`, { method: 'POST', headers: bearer() });
  const pair = boot.headers
    .getSetCookie()
    .find((c) => c.startsWith(SESSION_COOKIE))!
    .split(';')[0]!;
  t.equal(
    (await http(`${engine.url}/admin/whoami`, { headers: { cookie: pair } })).status,
    200,
    'reads work',
  );
  const r = await http(`${engine.url}/admin/jobs`, {
    headers: { cookie: pair, origin: 'https://anything.test' },
    body: { id: 'x', cadenceSeconds: 3600, source: { type: 'files', path: '/x' } },
  });
  t.equal(r.status, 403);
  t.same(r.json(), { error: 'csrf origin check failed' });
});
