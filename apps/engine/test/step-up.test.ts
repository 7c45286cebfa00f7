// Step-up through HTTP against a started engine: minting a pull credential (a step-up gated
// route) passes for the bare token and for a session signed in under five minutes ago; an older
// session gets 401 stepUpRequired, runs the passkey step-up ceremony, and passes once with the
// single-use token in x-engine-stepup (not with another session's, not twice). 501 without
// CONSOLE_ORIGIN.
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl, SoftAuthenticator, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';
import { AUDIENCE, grantRoles, startKeySet, TEAM_DOMAIN } from './helpers/perimeter.ts';
import { makePki } from './helpers/tls.ts';

const CONSOLE = 'https://console.coffer.test';
const RP_ID = 'console.coffer.test';
const EMAIL = 'root@example.org';

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`step-up on a gated write (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const admin = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      http(`${engine.url}/admin/${path}`, { headers, body });
    const key = new SoftAuthenticator(CONSOLE, RP_ID);
    const begin = await admin('auth/register/begin', { email: EMAIL }, bearer());
    const done = await admin('auth/register/finish', { credential: key.register(begin.json().challenge) });
    t.equal(done.status, 200, done.text);
    const fresh = done.headers
      .getSetCookie()
      .find((c) => c.startsWith(SESSION_COOKIE))!
      .split(';')[0]!;
    const mint = (headers: Record<string, string>) =>
      admin('support/credentials', { scope: 'diagnostics' }, { origin: CONSOLE, ...headers });

    t.equal((await mint(bearer())).status, 200, 'the bare token is exempt');
    t.equal((await mint({ cookie: fresh })).status, 200, 'a sign-in under five minutes old passes');

    // A session whose last proof of presence is ten minutes old (minted through the engine's own
    // session service, as a sign-in ten minutes ago would have).
    const old = await engine.app.sessions.mint({
      subject: passkeySubject(EMAIL),
      email: EMAIL,
      method: 'passkey',
      authAt: Math.floor(Date.now() / 1000) - 600,
    });
    const stale = `${SESSION_COOKIE}=${old.token}`;
    const refused = await mint({ cookie: stale });
    t.equal(refused.status, 401);
    t.same(refused.json(), { error: 'step-up required', stepUpRequired: true });

    // The ceremony: options for this person's passkeys, then a single-use token for this session.
    const sb = await admin('stepup/begin', {}, { cookie: stale, origin: CONSOLE });
    t.equal(sb.status, 200, sb.text);
    t.same(
      sb.json().allowCredentials.map((c: { id: string }) => c.id),
      [key.id],
    );
    const sf = await admin(
      'stepup/finish',
      { credential: key.authenticate(sb.json().challenge) },
      { cookie: stale, origin: CONSOLE },
    );
    t.equal(sf.status, 200, sf.text);
    const token: string = sf.json().stepUpToken;
    t.match(token, /^cfs_/);
    // Another session cannot use it.
    const other = await engine.app.sessions.mint({
      subject: passkeySubject(EMAIL),
      email: EMAIL,
      method: 'passkey',
      authAt: Math.floor(Date.now() / 1000) - 600,
    });
    t.equal(
      (await mint({ cookie: `${SESSION_COOKIE}=${other.token}`, 'x-engine-stepup': token })).status,
      401,
    );
    t.equal((await mint({ cookie: stale, 'x-engine-stepup': token })).status, 200, 'with the token');
    t.equal((await mint({ cookie: stale, 'x-engine-stepup': token })).status, 401, 'single use');
    t.equal((await mint({ cookie: stale, 'x-engine-stepup': 'cfs_junk.junk' })).status, 401);

    // A step-up answer replayed: its challenge is gone.
    const again = await admin(
      'stepup/finish',
      { credential: key.authenticate(sb.json().challenge) },
      { cookie: stale, origin: CONSOLE },
    );
    t.equal(again.status, 401, 'replayed step-up');
    // The bare token has no passkey to step up with.
    t.equal((await admin('stepup/begin', {}, bearer())).status, 400);
  });

t.test('step-up without CONSOLE_ORIGIN answers 501', async (t) => {
  const engine = await startEngine(t, {});
  for (const path of ['stepup/begin', 'stepup/finish']) {
    const r = await http(`${engine.url}/admin/${path}`, { headers: bearer(), body: {} });
    t.equal(r.status, 501, path);
    t.same(r.json(), { error: 'passkey_not_configured' });
  }
});

t.test('a perimeter caller passes only within five minutes of its access sign-in', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const engine = await startEngine(
    t,
    { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
    { testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  await grantRoles(engine.app.state, [['olga', 'owner']]);
  const mint = async (issuedAt?: number) =>
    http(`${engine.url}/admin/support/credentials`, {
      headers: {
        'perimeter-access-jwt-assertion': await keys.sign(
          { sub: 'olga', email: 'olga@example.com' },
          { expiresIn: '1h', ...(issuedAt === undefined ? {} : { issuedAt }) },
        ),
      },
      body: { scope: 'diagnostics' },
    });
  t.equal((await mint()).status, 200, 'a fresh access sign-in');
  const stale = await mint(Math.floor(Date.now() / 1000) - 600);
  t.equal(stale.status, 401);
  t.same(stale.json(), { error: 'step-up required', stepUpRequired: true, reauth: 'access' });
});
