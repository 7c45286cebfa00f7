// OIDC sign-in through a started engine against a real OpenID provider (oidc-provider) on
// loopback, on SQLite and PostgreSQL: a connection created over HTTP (secret write-only), the whole
// redirect dance by a scripted browser that keeps cookies (the console origin mapped onto the
// engine, as the console's proxy does), the session that results, the group-to-role mapping on each
// sign-in, and every failure answering `/?oidc=failed` with a reason code in the log and no secret.
import { CSRF_COOKIE, OIDC_TRANSACTION_COOKIE, SESSION_COOKIE } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import { startTestOidcProvider, TestBrowser } from '@coffer/testkit/oidc';
import t from 'tap';
import { bearer, http, type Started, startEngine } from '../helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';
const CALLBACK = `${CONSOLE}/admin/oidc/callback/`;

const op = await startTestOidcProvider({
  redirectUris: [`${CALLBACK}acme`, `${CALLBACK}other`],
  accounts: {
    'ada-0001': { email: 'Ada@Example.org', email_verified: true, groups: ['staff', 'backup-ops'] },
    'bob-0002': { email: 'bob@example.org', email_verified: false, groups: ['backup-ops'] },
    'eve-0003': { email: 'eve@evil.example', email_verified: true, groups: ['backup-ops'] },
    'cy-0004': { email: 'cy@example.org', email_verified: true, groups: ['staff'] },
  },
});
t.teardown(() => op.close());

const connectionBody = (extra: Record<string, unknown> = {}) => ({
  id: 'acme',
  kind: 'oidc',
  displayName: 'Acme Keycloak',
  preset: 'keycloak',
  allowedEmailDomains: ['example.org'],
  groupRoleMapping: [{ group: 'backup-ops', role: 'operator' }],
  oidc: {
    issuer: op.issuer,
    clientId: op.clientId,
    clientSecret: op.clientSecret,
    scopes: ['openid', 'email', 'groups'],
    groupsClaim: 'groups',
  },
  ...extra,
});

/** The browser's view of the engine: the console origin is the engine (the proxy's job). */
const onEngine = (engine: Started, url: string) => `${engine.url}${url.slice(CONSOLE.length)}`;

interface Landing {
  status: number;
  location: string | null;
  browser: TestBrowser;
  /** `name=value` pairs of the session and CSRF cookies, when set. */
  cookie: string | null;
  callback: string | null;
}

/** One sign-in through the engine: start, the provider's pages, the callback. */
async function signIn(
  engine: Started,
  login: string,
  tamper: (callback: string) => string = (c) => c,
  conn = 'acme',
): Promise<Landing> {
  const browser = new TestBrowser();
  const start = await browser.request(new URL(`${engine.url}/admin/oidc/start/${conn}`));
  const location = start.headers.get('location');
  if (start.status !== 302 || location === null || location.startsWith('/'))
    return { status: start.status, location, browser, cookie: null, callback: null };
  const callback = await browser.signIn(location, login, CALLBACK);
  const back = await browser.request(new URL(onEngine(engine, tamper(callback))));
  const jar = browser.jar.get(new URL(engine.url).origin);
  const session = jar?.get(SESSION_COOKIE);
  const csrf = jar?.get(CSRF_COOKIE);
  return {
    status: back.status,
    location: back.headers.get('location'),
    browser,
    cookie: session === undefined ? null : `${SESSION_COOKIE}=${session}; ${CSRF_COOKIE}=${csrf}`,
    callback,
  };
}

const whoami = async (engine: Started, cookie: string) =>
  http(`${engine.url}/admin/whoami`, { headers: { cookie } });

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`OIDC sign-in through the engine (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const post = (path: string, body: unknown) =>
      http(`${engine.url}/admin/${path}`, { headers: bearer(), body });

    // Nothing to sign in with yet.
    t.same((await http(`${engine.url}/admin/oidc/providers`)).json(), { providers: [] });

    // The connection: created over HTTP, the secret never shown again, nor audited.
    const created = await post('idp/connections', connectionBody());
    t.equal(created.status, 201, created.text);
    t.notOk(created.text.includes(op.clientSecret), 'the secret is not in the reply');
    const view = created.json().connection;
    t.equal(view.oidc.clientSecretSet, true);
    t.equal(view.oidc.redirectUri, `${CALLBACK}acme`);
    t.equal(view.startUrl, '/admin/oidc/start/acme');
    t.equal(view.rev, 1);
    t.equal((await post('idp/connections', connectionBody())).status, 409, 'the id is taken');
    const listed = await http(`${engine.url}/admin/idp/connections`, { headers: bearer() });
    t.equal(listed.status, 200);
    t.notOk(listed.text.includes(op.clientSecret), 'nor in the list');
    t.notOk(listed.text.includes('cib1.'), 'nor its sealed form');
    const stored = JSON.stringify(await engine.app.state.settings.get('idp.connection.acme'));
    t.notOk(stored.includes(op.clientSecret), 'the store holds it sealed');
    t.match(stored, /"clientSecretSealed":"cib1\./);

    t.same((await http(`${engine.url}/admin/oidc/providers`)).json(), {
      providers: [
        { id: 'acme', kind: 'oidc', displayName: 'Acme Keycloak', startUrl: '/admin/oidc/start/acme' },
      ],
    });

    // The start: a 302 to the provider with state, nonce and PKCE, and the transaction cookie.
    const browser = new TestBrowser();
    const start = await browser.request(new URL(`${engine.url}/admin/oidc/start/acme`));
    t.equal(start.status, 302);
    const auth = new URL(start.headers.get('location')!);
    t.equal(auth.origin, op.issuer);
    t.equal(auth.searchParams.get('redirect_uri'), `${CALLBACK}acme`, 'redirect_uri from CONSOLE_ORIGIN');
    t.ok(auth.searchParams.get('state'));
    t.ok(auth.searchParams.get('nonce'));
    t.equal(auth.searchParams.get('code_challenge_method'), 'S256');
    const txCookie = start.headers.getSetCookie().find((c) => c.startsWith(`${OIDC_TRANSACTION_COOKIE}=`))!;
    t.match(txCookie, /HttpOnly/);
    t.match(txCookie, /SameSite=Lax/);
    t.match(txCookie, /Max-Age=600/);

    // The whole dance: a session for the subject from connection + issuer + sub, mapped role.
    const ada = await signIn(engine, 'ada-0001');
    t.equal(ada.status, 302);
    t.equal(ada.location, '/', 'a relative landing');
    t.ok(ada.cookie, 'session cookies set');
    t.notOk(
      ada.browser.jar.get(new URL(engine.url).origin)?.has(OIDC_TRANSACTION_COOKIE),
      'transaction cleared',
    );
    const me = await whoami(engine, ada.cookie!);
    t.equal(me.status, 200, me.text);
    t.equal(me.json().email, 'ada@example.org');
    t.equal(me.json().subject, `oidc:acme:${op.issuer}#ada-0001`);
    t.equal(me.json().role, 'operator', 'from the backup-ops group');
    const grant = await engine.app.state.roles.get(`oidc:acme:${op.issuer}#ada-0001`);
    t.equal(grant?.grantedBy, 'idp:acme');

    // The code and the transaction are single use: replaying the callback fails.
    const replay = new TestBrowser();
    replay.jar.set(
      new URL(engine.url).origin,
      new Map([[OIDC_TRANSACTION_COOKIE, txCookie.split(';')[0]!.split('=')[1]!]]),
    );
    const replayed = await replay.request(new URL(onEngine(engine, ada.callback!)));
    t.equal(replayed.headers.get('location'), '/?oidc=failed', 'a replayed callback');

    // Failures: each a 302 to /?oidc=failed, no session, a reason in the log.
    const failures: Array<[string, Promise<Landing>, string]> = [
      [
        'wrong state',
        signIn(engine, 'ada-0001', (c) => c.replace(/state=[^&]+/, 'state=forged')),
        'state-mismatch',
      ],
      ['unverified email', signIn(engine, 'bob-0002'), 'email-unverified'],
      ['a domain not allowed', signIn(engine, 'eve-0003'), 'email-domain'],
      ['unknown connection', signIn(engine, 'ada-0001', (c) => c, 'nope'), 'unknown-connection'],
    ];
    for (const [what, landing, reason] of failures) {
      const l = await landing;
      t.equal(l.location, '/?oidc=failed', what);
      t.equal(l.cookie, null, `${what}: no session`);
      t.ok(
        engine.logs.some(
          (line) => line.includes('oidc sign-in failed') && line.includes(`"reason":"${reason}"`),
        ),
        `${what}: logged as ${reason}`,
      );
    }
    // A callback without the transaction cookie (another browser).
    const stray = await fetch(onEngine(engine, ada.callback!), { redirect: 'manual' });
    t.equal(stray.headers.get('location'), '/?oidc=failed');
    t.equal(stray.status, 302);
    for (const line of engine.logs) {
      t.notOk(line.includes(op.clientSecret), 'no client secret in the log');
      if (/[?&](code|state)=(?!%5Bredacted%5D)|eyJ/.test(line))
        t.fail(`a token-like value in the log: ${line.slice(0, 200)}`);
    }
    t.ok(
      engine.logs.some((line) =>
        line.includes('/admin/oidc/callback/acme?code=%5Bredacted%5D&state=%5Bredacted%5D'),
      ),
      'the callback is logged with its code and state redacted',
    );

    // The mapping is evaluated at each sign-in: no matching group removes the mapping's grant.
    const updated = await post('idp/connections/update', {
      id: 'acme',
      ifMatchRev: 1,
      groupRoleMapping: [{ group: 'platform', role: 'approver' }],
    });
    t.equal(updated.status, 200, updated.text);
    t.equal(updated.json().connection.oidc.clientSecretSet, true, 'an omitted secret is kept');
    t.equal((await post('idp/connections/update', { id: 'acme', ifMatchRev: 1 })).status, 409, 'stale rev');
    const ada2 = await signIn(engine, 'ada-0001');
    t.equal(ada2.location, '/', 'signs in with the kept secret');
    t.equal((await whoami(engine, ada2.cookie!)).json().role, 'viewer', 'the mapped grant is gone');
    t.equal(await engine.app.state.roles.get(`oidc:acme:${op.issuer}#ada-0001`), null);
    t.equal(
      (await whoami(engine, ada.cookie!)).json().role,
      'viewer',
      'the role is re-read on every request',
    );

    // A grant an owner made by hand wins over the mapping.
    await engine.app.state.roles.assign({
      subject: `oidc:acme:${op.issuer}#cy-0004`,
      role: 'approver',
      email: 'cy@example.org',
      grantedBy: 'owner',
    });
    const cy = await signIn(engine, 'cy-0004');
    t.equal((await whoami(engine, cy.cookie!)).json().role, 'approver');

    // Audit: the mapping's changes and the connection writes, never the secret.
    const events = (await engine.app.audit.log.list({ limit: '500' })).events.reverse();
    const mapping = events.filter((e) => e.action === 'idp-role-mapping');
    t.same(
      mapping.map((e) => [e.detail.from, e.detail.to]),
      [
        [null, 'operator'],
        ['operator', null],
      ],
    );
    t.equal(mapping[0]!.actor.subject, `oidc:acme:${op.issuer}#ada-0001`);
    const writes = events.filter((e) => e.action === 'idp-connection-change');
    t.same(
      writes.map((e) => e.detail.op),
      ['create', 'update'],
    );
    t.same(writes[1]!.detail.changedFields, ['groupRoleMapping']);
    t.notOk(JSON.stringify(events).includes(op.clientSecret), 'no secret in the audit chain');

    // Disabled: gone from the list, start and callback fail.
    t.equal((await post('idp/connections/update', { id: 'acme', enabled: false })).status, 200);
    t.same((await http(`${engine.url}/admin/oidc/providers`)).json(), { providers: [] });
    const off = await fetch(`${engine.url}/admin/oidc/start/acme`, { redirect: 'manual' });
    t.equal(off.headers.get('location'), '/?oidc=failed');
  });

t.test('connection writes: field errors, owner only, the secret replaced and cleared', async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE });
  const post = (path: string, body: unknown, headers: Record<string, string> = bearer()) =>
    http(`${engine.url}/admin/${path}`, { headers: { origin: CONSOLE, ...headers }, body });
  const refusals: Array<[string, unknown, string]> = [
    ['a bad id', connectionBody({ id: 'Acme!' }), 'id'],
    ['no kind', connectionBody({ kind: 'ldap' }), 'kind'],
    ['no domain', connectionBody({ allowedEmailDomains: [] }), 'allowedEmailDomains'],
    [
      'owner by mapping',
      connectionBody({ groupRoleMapping: [{ group: 'g', role: 'owner' }] }),
      'groupRoleMapping',
    ],
    [
      'an unknown role',
      connectionBody({ groupRoleMapping: [{ group: 'g', role: 'king' }] }),
      'groupRoleMapping',
    ],
    [
      'an http issuer off loopback',
      connectionBody({ oidc: { issuer: 'http://idp.example.org', clientId: 'c' } }),
      'oidc.issuer',
    ],
    ['a preset of the other kind', connectionBody({ preset: 'okta-saml' }), 'preset'],
    [
      'SAML without metadata',
      { ...connectionBody({ kind: 'saml', preset: null }), oidc: undefined },
      'saml.idpMetadataXml',
    ],
  ];
  for (const [what, body, field] of refusals) {
    const r = await post('idp/connections', body);
    t.equal(r.status, 400, what);
    t.equal(r.json().field, field, what);
  }
  t.same((await engine.app.sso.list()).length, 0, 'nothing stored');

  t.equal((await post('idp/connections', connectionBody())).status, 201);
  const cleared = await post('idp/connections/update', { id: 'acme', oidc: { clientSecret: null } });
  t.equal(cleared.json().connection.oidc.clientSecretSet, false, 'null clears the secret');
  const replaced = await post('idp/connections/update', {
    id: 'acme',
    oidc: { clientSecret: 'another-secret' },
  });
  t.equal(replaced.json().connection.oidc.clientSecretSet, true, 'a string replaces it');
  t.equal((await post('idp/connections/update', { id: 'acme', kind: 'saml' })).json().field, 'kind');
  t.equal((await post('idp/connections/update', { id: 'ghost' })).status, 404);

  // Owner only (keys.ceremony): an operator's session is refused, reads and writes.
  await engine.app.state.roles.assign({
    subject: 'oidc:acme:x#op',
    role: 'operator',
    email: 'op@example.org',
    grantedBy: 't',
  });
  const m = await engine.app.sessions.mint({
    subject: 'oidc:acme:x#op',
    email: 'op@example.org',
    method: 'oidc',
  });
  const operator = {
    cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`,
    'x-engine-csrf': m.csrfToken,
  };
  for (const path of ['idp/presets', 'idp/connections']) {
    const r = await http(`${engine.url}/admin/${path}`, { headers: operator });
    t.equal(r.status, 403, path);
    t.equal(r.json().required, 'keys.ceremony');
  }
  t.equal((await post('idp/connections/delete', { id: 'acme' }, operator)).status, 403);
  const presets = await http(`${engine.url}/admin/idp/presets`, { headers: bearer() });
  t.same(
    presets.json().presets.map((p: { id: string }) => p.id),
    [
      'okta',
      'entra',
      'google',
      'auth0',
      'keycloak',
      'authentik',
      'generic-oidc',
      'okta-saml',
      'entra-saml',
      'generic-saml',
    ],
  );
  const deleted = await post('idp/connections/delete', { id: 'acme' });
  t.same(deleted.json(), { ok: true, deleted: true });
  t.same((await post('idp/connections/delete', { id: 'acme' })).json(), { ok: true, deleted: false });
  const refusedRows = (await engine.app.audit.log.list({ limit: '500' })).events.filter(
    (e) => e.action === 'idp-connection-change' && e.outcome === 'refused',
  );
  t.ok(refusedRows.length >= refusals.length + 1, 'refusals audited (input and capability)');
});

t.test('without CONSOLE_ORIGIN no sign-in can come back: an empty list and 501', async (t) => {
  const engine = await startEngine(t, {});
  t.same((await http(`${engine.url}/admin/oidc/providers`)).json(), { providers: [] });
  const r = await http(`${engine.url}/admin/oidc/start/acme`);
  t.equal(r.status, 501);
  t.same(r.json(), { ok: false, reason: 'sso_not_configured' });
});

t.test('sign-in starts are limited per client address', async (t) => {
  const engine = await startEngine(t, { CONSOLE_ORIGIN: CONSOLE });
  const created = await http(`${engine.url}/admin/idp/connections`, {
    headers: bearer(),
    body: connectionBody(),
  });
  t.equal(created.status, 201);
  const start = () => fetch(`${engine.url}/admin/oidc/start/acme`, { redirect: 'manual' });
  for (let i = 0; i < 30; i++) {
    const r = await start();
    t.ok(r.headers.get('location')?.startsWith(op.issuer), `start ${i + 1} goes to the provider`);
  }
  const over = await start();
  t.equal(over.headers.get('location'), '/?oidc=failed', 'the 31st in the window does not');
  t.ok(engine.logs.some((l) => l.includes('"reason":"rate-limited"')));
  const saml = await fetch(`${engine.url}/admin/saml/start/acme`, { redirect: 'manual' });
  t.equal(saml.headers.get('location'), '/?saml=failed', 'the window is shared by both protocols');
});
