// SAML sign-in through a started engine against a real signing identity provider on loopback
// (@coffer/testkit/saml: it decodes the engine's HTTP-Redirect AuthnRequest and answers the
// HTTP-POST binding's auto-submitting form with a signed assertion), on SQLite and PostgreSQL: a
// connection created over HTTP from the IdP's metadata URL and another from pasted metadata, the
// service-provider metadata, the whole dance by a scripted browser that keeps cookies (the console
// origin mapped onto the engine, as the console's proxy does), the session that results, the
// group-to-role mapping, every failure answering `/?saml=failed` with a reason code in the log and
// no session, the IdP metadata going down (503 once the cached read is stale), and no SAML
// message, assertion or NameID in any log line.
import { CSRF_COOKIE, SESSION_COOKIE } from '@coffer/identity';
import { makeTestPki, postgresUrl, tempDir } from '@coffer/testkit';
import { TestBrowser } from '@coffer/testkit/oidc';
import {
  decodeSamlRedirect,
  readAutoPostForm,
  SAML_PERSISTENT,
  SAML_TRANSIENT,
  startTestSamlIdp,
  type TestSamlAnswerOptions,
  type TestSamlIdp,
} from '@coffer/testkit/saml';
import t from 'tap';
import { bearer, http, type Started, startEngine } from '../helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';
const USERS = {
  ada: { nameId: 'ada-0001-persistent-c0ffee', email: 'Ada@Example.org', groups: ['staff', 'backup-ops'] },
  cy: { nameId: 'cy-0004-persistent-c0ffee', email: 'cy@example.org', groups: ['staff'] },
  eve: { nameId: 'eve-0003-persistent-c0ffee', email: 'eve@evil.example', groups: ['backup-ops'] },
  tess: {
    nameId: 'tess-0005-transient-c0ffee',
    email: 'tess@example.org',
    groups: ['backup-ops'],
    nameIdFormat: SAML_TRANSIENT,
  },
};
const NAME_IDS = Object.values(USERS).map((u) => u.nameId);

/** The browser's view of the engine: the console origin is the engine (the proxy's job). */
const onEngine = (engine: Started, url: string) => {
  if (!url.startsWith(`${CONSOLE}/`)) throw new Error(`not a console URL: ${url}`);
  return `${engine.url}${url.slice(CONSOLE.length)}`;
};

interface Form {
  browser: TestBrowser;
  /** The form's action on the console origin (the ACS). */
  action: string;
  fields: URLSearchParams;
}

interface Landing {
  status: number;
  location: string | null;
  /** `name=value` pairs of the session and CSRF cookies, when set. */
  cookie: string | null;
  setCookies: string[];
}

/**
 * Start and the IdP's page: the engine's 302 followed to the provider (signing in as `login`),
 * whose auto-submitting form is read, not yet posted.
 */
async function idpForm(
  engine: Started,
  idp: TestSamlIdp,
  login: string,
  options: { conn?: string; answer?: TestSamlAnswerOptions; browser?: TestBrowser } = {},
): Promise<Form> {
  const browser = options.browser ?? new TestBrowser();
  const start = await browser.request(new URL(`${engine.url}/admin/saml/start/${options.conn ?? 'acme'}`));
  const location = start.headers.get('location');
  if (start.status !== 302 || location === null || !location.startsWith(idp.ssoUrl))
    throw new Error(`the start did not go to the IdP: ${start.status} ${location}`);
  const sso = new URL(location);
  sso.searchParams.set('login', login);
  if (options.answer) idp.answerNext(options.answer);
  const page = await browser.request(sso);
  const html = await page.text();
  if (page.status !== 200) throw new Error(`the IdP answered ${page.status}: ${html}`);
  const { action, fields } = readAutoPostForm(html);
  return { browser, action, fields };
}

/** What the browser does with the IdP's form: POST it (cross-site, from the IdP's page) to the ACS. */
async function post(engine: Started, idp: TestSamlIdp, form: Form, fields = form.fields): Promise<Landing> {
  const url = new URL(onEngine(engine, form.action));
  const res = await form.browser.request(url, {
    method: 'POST',
    form: fields,
    headers: { origin: idp.url },
  });
  const jar = form.browser.jar.get(url.origin);
  const session = jar?.get(SESSION_COOKIE);
  const csrf = jar?.get(CSRF_COOKIE);
  return {
    status: res.status,
    location: res.headers.get('location'),
    cookie: session === undefined ? null : `${SESSION_COOKIE}=${session}; ${CSRF_COOKIE}=${csrf}`,
    setCookies: res.headers.getSetCookie(),
  };
}

const signIn = async (
  engine: Started,
  idp: TestSamlIdp,
  login: string,
  options: { conn?: string; answer?: TestSamlAnswerOptions } = {},
) => post(engine, idp, await idpForm(engine, idp, login, options));

const whoami = async (engine: Started, cookie: string) =>
  http(`${engine.url}/admin/whoami`, { headers: { cookie } });

/** Whether a log line from `from` on says the sign-in failed for `reason` on `conn`. */
const failedWith = (engine: Started, from: number, reason: string, conn = 'acme') =>
  engine.logs
    .slice(from)
    .some(
      (line) =>
        line.includes('saml sign-in failed') &&
        line.includes(`"reason":"${reason}"`) &&
        line.includes(`"connection":"${conn}"`),
    );

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`SAML sign-in through the engine (${backend})`, async (t) => {
    const idp = await startTestSamlIdp({ users: USERS });
    t.teardown(() => idp.close());
    const attacker = makeTestPki(tempDir(t), { caName: 'attacker' });
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const admin = (path: string, body: unknown) =>
      http(`${engine.url}/admin/${path}`, { headers: bearer(), body });
    const subject = (conn: string, user: keyof typeof USERS) =>
      `saml:${conn}:${idp.entityId}#${USERS[user].nameId}`;
    const posted: string[] = [];
    const relays: string[] = [];
    const remember = (form: Form) => {
      posted.push(form.fields.get('SAMLResponse')!);
      relays.push(form.fields.get('RelayState')!);
      return form;
    };

    // ---- the connection, from the IdP's metadata URL --------------------------------------------
    const reads = idp.metadataReads;
    const created = await admin('idp/connections', {
      id: 'acme',
      kind: 'saml',
      displayName: 'Acme SSO',
      preset: 'generic-saml',
      allowedEmailDomains: ['example.org'],
      groupRoleMapping: [{ group: 'backup-ops', role: 'operator' }],
      saml: { idpMetadataUrl: idp.metadataUrl, emailAttribute: 'email', groupsAttribute: 'groups' },
    });
    t.equal(created.status, 201, created.text);
    t.equal(idp.metadataReads, reads + 1, 'the metadata URL is read at once');
    const view = created.json().connection;
    t.equal(view.kind, 'saml');
    t.equal(view.rev, 1);
    t.equal(view.startUrl, '/admin/saml/start/acme');
    t.equal(view.saml.spEntityId, `${CONSOLE}/admin/saml/metadata/acme`);
    t.equal(view.saml.acsUrl, `${CONSOLE}/admin/saml/acs/acme`);
    t.equal(view.saml.metadataUrl, `${CONSOLE}/admin/saml/metadata/acme`);
    t.equal(view.saml.idpMetadataUrl, idp.metadataUrl);
    t.equal(view.saml.idpEntityId, idp.entityId);
    t.equal(view.saml.idpSsoUrl, idp.ssoUrl);
    t.equal(view.saml.certificateFingerprints.length, 1);
    t.match(view.saml.certificateFingerprints[0], /^[0-9a-f]{64}$/);

    // An unreadable metadata URL is a 400 naming the field.
    const unreadable = await admin('idp/connections', {
      id: 'broken',
      kind: 'saml',
      displayName: 'Broken',
      allowedEmailDomains: ['example.org'],
      saml: { idpMetadataUrl: `${idp.url}/no-such-metadata` },
    });
    t.equal(unreadable.status, 400);
    t.equal(unreadable.json().field, 'saml.idpMetadataUrl');

    // The service provider's metadata, to give the IdP.
    const spMeta = await http(`${engine.url}/admin/saml/metadata/acme`);
    t.equal(spMeta.status, 200);
    t.match(spMeta.headers.get('content-type'), /^application\/samlmetadata\+xml/);
    t.match(spMeta.text, `entityID="${CONSOLE}/admin/saml/metadata/acme"`);
    t.match(
      spMeta.text,
      new RegExp(
        `<[^>]*AssertionConsumerService [^>]*Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST"[^>]*Location="${CONSOLE}/admin/saml/acs/acme"`,
      ),
    );
    t.match(spMeta.text, SAML_PERSISTENT);
    t.match(spMeta.text, 'WantAssertionsSigned="true"');
    t.equal((await http(`${engine.url}/admin/saml/metadata/ghost`)).status, 404, 'an unknown connection');

    t.same((await http(`${engine.url}/admin/oidc/providers`)).json(), {
      providers: [{ id: 'acme', kind: 'saml', displayName: 'Acme SSO', startUrl: '/admin/saml/start/acme' }],
    });

    // ---- the start: a 302 to the IdP with the AuthnRequest and a RelayState ----------------------
    const start = await fetch(`${engine.url}/admin/saml/start/acme`, { redirect: 'manual' });
    t.equal(start.status, 302);
    t.equal(start.headers.get('cache-control'), 'no-store');
    const to = new URL(start.headers.get('location')!);
    t.equal(`${to.origin}${to.pathname}`, idp.ssoUrl, 'to the HTTP-Redirect SingleSignOnService');
    t.match(to.searchParams.get('RelayState'), /^[A-Za-z0-9_-]{43}$/, '32 random bytes');
    const request = decodeSamlRedirect(to);
    t.match(request.id, /^_[0-9a-f]{40}$/);
    t.equal(request.issuer, `${CONSOLE}/admin/saml/metadata/acme`, 'the SP entity id');
    t.equal(request.acsUrl, `${CONSOLE}/admin/saml/acs/acme`, 'the ACS from CONSOLE_ORIGIN');
    t.equal(request.destination, idp.ssoUrl);
    t.equal(request.nameIdFormat, SAML_PERSISTENT);
    t.same(start.headers.getSetCookie(), [], 'no cookie: the RelayState is the binding');

    // ---- the whole dance --------------------------------------------------------------------------
    const adaForm = remember(await idpForm(engine, idp, 'ada'));
    t.equal(adaForm.action, `${CONSOLE}/admin/saml/acs/acme`, 'the IdP posts to the ACS it was given');
    const ada = await post(engine, idp, adaForm);
    t.equal(ada.status, 302);
    t.equal(ada.location, '/', 'a relative landing');
    t.ok(ada.cookie, 'session cookies set');
    const sessionCookie = ada.setCookies.find((c) => c.startsWith(`${SESSION_COOKIE}=`))!;
    t.match(sessionCookie, /HttpOnly/);
    t.match(sessionCookie, /SameSite=Strict/);
    t.ok(
      ada.setCookies.some((c) => c.startsWith(`${CSRF_COOKIE}=`)),
      'and the CSRF cookie',
    );
    const me = await whoami(engine, ada.cookie!);
    t.equal(me.status, 200, me.text);
    t.equal(me.json().method, 'session');
    t.equal(me.json().sessionKind, 'saml');
    t.equal(me.json().email, 'ada@example.org', 'normalised');
    t.equal(me.json().subject, subject('acme', 'ada'), 'connection, entity id and NameID');
    t.equal(me.json().role, 'operator', 'from the backup-ops group');
    t.equal((await engine.app.state.roles.get(subject('acme', 'ada')))?.grantedBy, 'idp:acme');
    const last = idp.requests.at(-1)!;
    t.equal(last.relayState, adaForm.fields.get('RelayState'), 'the RelayState went through the IdP');

    // ---- failures: each a 302 to /?saml=failed, no session, a reason in the log ------------------
    const failures: Array<[string, () => Promise<Landing>, string, string?]> = [
      [
        'the same POST replayed (another browser)',
        () => post(engine, idp, { ...adaForm, browser: new TestBrowser() }),
        'relay-state-unknown',
      ],
      [
        'the same POST replayed (the same browser)',
        async () => {
          const again = await post(engine, idp, adaForm);
          t.equal(again.setCookies.length, 0, 'no cookie set');
          return { ...again, cookie: null };
        },
        'relay-state-unknown',
      ],
      [
        'a RelayState never issued',
        async () => {
          const form = remember(await idpForm(engine, idp, 'ada'));
          const forged = new URLSearchParams(form.fields);
          forged.set('RelayState', 'bm90LWlzc3VlZC1ieS10aGUtZW5naW5lLTAxMjM0NTY3ODk');
          return post(engine, idp, form, forged);
        },
        'relay-state-unknown',
      ],
      [
        "another request's response (two starts, answers swapped)",
        async () => {
          const browser = new TestBrowser();
          const first = remember(await idpForm(engine, idp, 'ada', { browser }));
          const second = remember(await idpForm(engine, idp, 'ada', { browser }));
          const swapped = new URLSearchParams({
            SAMLResponse: first.fields.get('SAMLResponse')!,
            RelayState: second.fields.get('RelayState')!,
          });
          const landing = await post(engine, idp, second, swapped);
          // The second RelayState is spent; the first pair, untouched, still signs in.
          const own = await post(engine, idp, first);
          t.equal(own.location, '/', "the first request's own answer still signs in");
          if (own.cookie) browser.jar.delete(new URL(engine.url).origin);
          return landing;
        },
        'in-response-to',
      ],
      [
        'an unsigned assertion',
        async () =>
          post(engine, idp, remember(await idpForm(engine, idp, 'ada', { answer: { unsigned: true } }))),
        'unsigned',
      ],
      [
        'an assertion signed by another key',
        async () =>
          post(engine, idp, remember(await idpForm(engine, idp, 'ada', { answer: { signWith: attacker } }))),
        'bad-signature',
      ],
      [
        'content altered after signing',
        async () => {
          const form = remember(await idpForm(engine, idp, 'cy'));
          const xml = Buffer.from(form.fields.get('SAMLResponse')!, 'base64').toString('utf8');
          const altered = new URLSearchParams(form.fields);
          altered.set(
            'SAMLResponse',
            Buffer.from(xml.replace('>staff<', '>backup-ops<'), 'utf8').toString('base64'),
          );
          return post(engine, idp, form, altered);
        },
        'bad-signature',
      ],
      [
        'a transient NameID',
        async () => post(engine, idp, remember(await idpForm(engine, idp, 'tess'))),
        'nameid-format',
      ],
      [
        'an email outside the allowed domains',
        async () => post(engine, idp, remember(await idpForm(engine, idp, 'eve'))),
        'email-domain',
      ],
      [
        'another audience',
        async () =>
          post(
            engine,
            idp,
            remember(
              await idpForm(engine, idp, 'ada', {
                answer: { assertion: { audience: 'https://other-sp.example.org/metadata' } },
              }),
            ),
          ),
        'wrong-audience',
      ],
      [
        'an ACS for another connection',
        async () => {
          const form = remember(await idpForm(engine, idp, 'ada'));
          return post(engine, idp, { ...form, action: `${CONSOLE}/admin/saml/acs/other` });
        },
        'unknown-connection',
        'other',
      ],
      [
        'no SAMLResponse',
        async () => {
          const form = await idpForm(engine, idp, 'ada');
          relays.push(form.fields.get('RelayState')!);
          return post(engine, idp, form, new URLSearchParams({ RelayState: form.fields.get('RelayState')! }));
        },
        'response-missing',
      ],
    ];
    for (const [what, run, reason, conn] of failures) {
      const mark = engine.logs.length;
      const l = await run();
      t.equal(l.status, 302, what);
      t.equal(l.location, '/?saml=failed', what);
      t.equal(l.cookie, null, `${what}: no session`);
      t.notOk(
        l.setCookies.some((c) => c.startsWith(`${SESSION_COOKIE}=`)),
        `${what}: no session cookie set`,
      );
      t.ok(failedWith(engine, mark, reason, conn), `${what}: logged as ${reason}`);
    }
    for (const who of ['eve', 'tess'] as const)
      t.equal(await engine.app.state.roles.get(subject('acme', who)), null, `${who} got no grant`);

    // ---- a second connection from pasted metadata -------------------------------------------------
    const pasted = await admin('idp/connections', {
      id: 'pasted',
      kind: 'saml',
      displayName: 'Pasted SSO',
      allowedEmailDomains: ['example.org'],
      groupRoleMapping: [{ group: 'staff', role: 'approver' }],
      saml: { idpMetadataXml: idp.metadataXml, groupsAttribute: 'groups' },
    });
    t.equal(pasted.status, 201, pasted.text);
    t.equal(pasted.json().connection.saml.idpMetadataUrl, null);
    t.equal(pasted.json().connection.saml.idpEntityId, idp.entityId);
    const cy = await signIn(engine, idp, 'cy', { conn: 'pasted' });
    t.equal(cy.location, '/', 'signs in through pasted metadata (default email attribute)');
    // A RelayState minted for one connection is not taken at another's ACS (nor used up there).
    const crossMark = engine.logs.length;
    const acmeForm = remember(await idpForm(engine, idp, 'cy'));
    const cross = await post(engine, idp, { ...acmeForm, action: `${CONSOLE}/admin/saml/acs/pasted` });
    t.equal(cross.location, '/?saml=failed', "another connection's RelayState");
    t.equal(cross.cookie, null);
    t.ok(failedWith(engine, crossMark, 'relay-state-unknown', 'pasted'), 'logged as relay-state-unknown');
    t.equal((await post(engine, idp, acmeForm)).location, '/', 'and left for its own connection');
    const cyMe = (await whoami(engine, cy.cookie!)).json();
    t.equal(cyMe.subject, subject('pasted', 'cy'), 'the subject names the connection');
    t.equal(cyMe.role, 'approver', 'from the staff group');

    // ---- the IdP's metadata URL goes down --------------------------------------------------------
    idp.serveMetadata = false;
    const before = idp.metadataReads;
    const cached = await signIn(engine, idp, 'cy');
    t.equal(cached.location, '/', 'a fresh cached read still signs in');
    t.equal(idp.metadataReads, before, 'without asking the IdP');
    // The cached read is used for ten minutes; past that the start re-reads, and fails closed.
    const realNow = Date.now;
    const startAfter = async (ms: number) => {
      Date.now = () => realNow() + ms;
      try {
        return await fetch(`${engine.url}/admin/saml/start/acme`, { redirect: 'manual' });
      } finally {
        Date.now = realNow;
      }
    };
    const nineMinutes = await startAfter(9 * 60_000);
    t.equal(nineMinutes.status, 302, 'nine minutes on: still the cached read');
    t.equal(idp.metadataReads, before);
    const elevenMinutes = await startAfter(10 * 60_000 + 1_000);
    t.equal(elevenMinutes.status, 503, 'ten minutes on: re-read, and the IdP does not answer');
    t.equal(await elevenMinutes.text(), 'saml metadata unavailable');
    t.equal(idp.metadataReads, before + 1, 'the IdP was asked once');
    const pending = remember(await idpForm(engine, idp, 'ada'));
    // A new revision forces a re-read (as a cached read older than ten minutes does).
    const renamed = await admin('idp/connections/update', { id: 'acme', displayName: 'Acme SAML' });
    t.equal(renamed.status, 200, renamed.text);
    t.equal(renamed.json().connection.rev, 2);
    for (const [what, res] of [
      ['the start', await fetch(`${engine.url}/admin/saml/start/acme`, { redirect: 'manual' })],
      ['the SP metadata', await fetch(`${engine.url}/admin/saml/metadata/acme`)],
      ['the ACS', await fetch(onEngine(engine, pending.action), { method: 'POST', body: pending.fields })],
    ] as const) {
      t.equal(res.status, 503, what);
      t.match(res.headers.get('content-type'), /^text\/plain/, what);
      t.equal(await res.text(), 'saml metadata unavailable', what);
      t.notOk(
        res.headers.getSetCookie().some((c) => c.startsWith(`${SESSION_COOKIE}=`)),
        `${what}: no session`,
      );
    }
    t.ok(idp.metadataReads > before, 'the IdP was asked');
    t.ok(
      engine.logs.some(
        (l) => l.includes('saml metadata unavailable') && l.includes('"reason":"metadata-unreachable"'),
      ),
      'the reason is logged',
    );
    const other = await signIn(engine, idp, 'cy', { conn: 'pasted' });
    t.equal(other.location, '/', 'pasted metadata does not depend on the URL');
    idp.serveMetadata = true;
    const back = await signIn(engine, idp, 'ada');
    t.equal(back.location, '/', 'a failed read is not cached: back once the IdP answers');
    t.equal((await whoami(engine, back.cookie!)).json().role, 'operator');

    // ---- the mapping is evaluated at each sign-in ----------------------------------------------------
    const remapped = await admin('idp/connections/update', {
      id: 'acme',
      ifMatchRev: 2,
      groupRoleMapping: [{ group: 'platform', role: 'approver' }],
    });
    t.equal(remapped.status, 200, remapped.text);
    const ada2 = await signIn(engine, idp, 'ada');
    t.equal(ada2.location, '/');
    t.equal((await whoami(engine, ada2.cookie!)).json().role, 'viewer', 'the mapped grant is gone');
    t.equal(await engine.app.state.roles.get(subject('acme', 'ada')), null);

    // ---- disabled: gone from the list, start and ACS fail ---------------------------------------
    const inFlight = remember(await idpForm(engine, idp, 'ada'));
    t.equal((await admin('idp/connections/update', { id: 'acme', enabled: false })).status, 200);
    t.same(
      (await http(`${engine.url}/admin/oidc/providers`)).json().providers.map((p: { id: string }) => p.id),
      ['pasted'],
    );
    const offMark = engine.logs.length;
    const offStart = await fetch(`${engine.url}/admin/saml/start/acme`, { redirect: 'manual' });
    t.equal(offStart.status, 302);
    t.equal(offStart.headers.get('location'), '/?saml=failed', 'a disabled connection does not start');
    const offAcs = await post(engine, idp, inFlight);
    t.equal(offAcs.location, '/?saml=failed', 'nor take a response started before');
    t.equal(offAcs.cookie, null);
    t.ok(failedWith(engine, offMark, 'unknown-connection'), 'logged as unknown-connection');

    // ---- audit: the mapping's changes, the actor the person signing in ---------------------------
    const events = (await engine.app.audit.log.list({ limit: '500' })).events.reverse();
    const mapping = events.filter((e) => e.action === 'idp-role-mapping');
    t.same(
      mapping.map((e) => [e.detail.connection, e.actor.subject, e.detail.from, e.detail.to]),
      [
        ['acme', subject('acme', 'ada'), null, 'operator'],
        ['pasted', subject('pasted', 'cy'), null, 'approver'],
        ['acme', subject('acme', 'ada'), 'operator', null],
      ],
    );
    t.equal(mapping[0]!.actor.email, 'ada@example.org');
    t.equal(mapping[0]!.outcome, 'applied');
    t.same(
      events.filter((e) => e.action === 'idp-connection-change').map((e) => [e.detail.op, e.outcome]),
      [
        ['create', 'applied'],
        ['create', 'refused'],
        ['create', 'applied'],
        ['update', 'applied'],
        ['update', 'applied'],
        ['update', 'applied'],
      ],
    );

    // ---- the log: reason codes only; credential-bearing query values redacted -------------------
    const probe = await fetch(
      `${engine.url}/admin/saml/acs/acme?SAMLResponse=probe-response-c0ffee&RelayState=probe-relay-c0ffee&SAMLRequest=probe-request-c0ffee&x=1`,
    );
    t.equal(probe.status, 404, 'the ACS takes no GET');
    t.ok(
      engine.logs.some((l) =>
        l.includes(
          '/admin/saml/acs/acme?SAMLResponse=%5Bredacted%5D&RelayState=%5Bredacted%5D&SAMLRequest=%5Bredacted%5D&x=1',
        ),
      ),
      'request URLs are logged with SAMLResponse, RelayState and SAMLRequest redacted',
    );
    const secrets = [
      ...posted.map((p) => p.slice(0, 40)),
      ...posted.map((p) => p.slice(-40)),
      ...relays,
      ...NAME_IDS,
      'probe-response-c0ffee',
      'probe-relay-c0ffee',
      'probe-request-c0ffee',
    ];
    let leaks = 0;
    for (const line of engine.logs) {
      for (const s of secrets)
        if (line.includes(s)) {
          leaks++;
          t.fail(`a SAML value in the log: ${line.slice(0, 300)}`);
        }
      if (
        /Assertion|SAMLResponse=(?!%5Bredacted%5D)|SAMLRequest=(?!%5Bredacted%5D)|RelayState=(?!%5Bredacted%5D)/.test(
          line,
        )
      ) {
        leaks++;
        t.fail(`a SAML message in the log: ${line.slice(0, 300)}`);
      }
    }
    t.equal(leaks, 0, `no SAML message, RelayState or NameID in ${engine.logs.length} log lines`);
  });

t.test('without CONSOLE_ORIGIN the SAML routes answer 501', async (t) => {
  const engine = await startEngine(t, {});
  for (const [method, path] of [
    ['GET', '/admin/saml/metadata/acme'],
    ['GET', '/admin/saml/start/acme'],
    ['POST', '/admin/saml/acs/acme'],
  ] as const) {
    const r = await fetch(`${engine.url}${path}`, {
      method,
      redirect: 'manual',
      ...(method === 'POST' ? { body: new URLSearchParams({ SAMLResponse: 'x', RelayState: 'y' }) } : {}),
    });
    t.equal(r.status, 501, path);
    t.same(await r.json(), { ok: false, reason: 'sso_not_configured' }, path);
  }
});
