// Retiring the admin token through HTTP: the echo route, the "way back in" rule (409 until an
// owner has confirmed recovery codes or a second owner exists), keys.ceremony, and the bearer and
// its token sessions refused from the next request on.
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`retiring the admin token (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const owner = passkeySubject('ada@example.org');
    await engine.app.state.roles.assign({
      subject: owner,
      role: 'owner',
      email: 'ada@example.org',
      grantedBy: 'test',
    });
    const as = async (email: string) => {
      const m = await engine.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`, origin: CONSOLE };
    };
    const post = (path: string, headers: Record<string, string>) =>
      http(`${engine.url}/admin/policy/${path}`, { method: 'POST', headers });

    const echo = await post('require-access', bearer());
    t.same(echo.json(), {
      ok: true,
      adminTokenPresent: true,
      breakGlassTokenRetired: false,
      tokenPathClosed: false,
    });
    t.equal((await post('retire-break-glass-token', await as('vic@example.org'))).status, 403, 'a viewer');

    const blocked = await post('retire-break-glass-token', await as('ada@example.org'));
    t.equal(blocked.status, 409, blocked.text);
    t.match(blocked.json(), { owners: 1, ownersWithRecoveryCodes: 0 });

    // A way back in: the owner confirms recovery codes.
    await engine.app.state.identity.stageRecoveryCodes(owner, [
      { selector: 'AAAA', hash: 'scrypt$15$8$1$x$y' },
    ]);
    await engine.app.state.identity.promoteRecoveryCodes(owner);
    const tokenSession = (
      await http(`${engine.url}/admin/session/bootstrap`, { method: 'POST', headers: bearer() })
    ).headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))!
      .split(';')[0]!;
    const retired = await post('retire-break-glass-token', await as('ada@example.org'));
    t.equal(retired.status, 200, retired.text);
    t.same(retired.json(), { ok: true, retired: true, already: false });

    t.equal(
      (await http(`${engine.url}/admin/whoami`, { headers: bearer() })).status,
      401,
      'the bearer is refused',
    );
    t.equal(
      (await http(`${engine.url}/admin/whoami`, { headers: { cookie: tokenSession } })).status,
      401,
      'its session too',
    );
    const after = await post('require-access', await as('ada@example.org'));
    t.same(after.json(), {
      ok: true,
      adminTokenPresent: true,
      breakGlassTokenRetired: true,
      tokenPathClosed: true,
    });
    t.same((await post('retire-break-glass-token', await as('ada@example.org'))).json().already, true);
    const feed = JSON.stringify(
      (await http(`${engine.url}/admin/audit?limit=20`, { headers: await as('ada@example.org') })).json(),
    );
    t.match(feed, /admin-token-retire/);
  });
