// The deprovision-only SCIM facade (docs/scim.md) against a started engine on SQLite and
// PostgreSQL: Okta's and Entra ID's PATCH active=false forms, DELETE, the matching rule (provider
// id, exact subject, email), a deprovisioned person's live cookie refused on its very next request,
// role grants, passkeys, recovery codes and invites gone, the last-owner refusal, and one
// `scim-deprovision` audit event per call with actor method `scim-bearer` and no secret.
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE, type SessionMethod } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { http, startEngine } from '../helpers/engine.ts';

const CONSOLE = 'https://console.coffer.test';
const SCIM_TOKEN = 'scim-bearer-token-0123456789abcdef';
const OKTA_ISSUER = 'https://acme.okta.com';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';

const oidc = (sub: string) => `oidc:okta:${OKTA_ISSUER}#${sub}`;
const saml = (nameId: string) => `saml:entra-saml:https://sts.windows.net/tenant-1/#${nameId}`;

/** Okta's deactivation PATCH. */
const oktaDeactivate = {
  schemas: [PATCH_OP],
  Operations: [{ op: 'replace', value: { active: false } }],
};
/** Entra ID's "disable" PATCH. */
const entraDisable = {
  schemas: [PATCH_OP],
  Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
};

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(`SCIM deprovisioning (${backend})`, async (t) => {
    const engine = await startEngine(t, {
      CONSOLE_ORIGIN: CONSOLE,
      SCIM_BEARER_TOKEN: SCIM_TOKEN,
      ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
    });
    const { state } = engine.app;
    const grant = (subject: string, role: string, email: string | null) =>
      state.roles.assign({ subject, role, email, grantedBy: 'test' });
    const signIn = async (subject: string, email: string, method: SessionMethod) => {
      const m = await engine.app.sessions.mint({ subject, email, method });
      return { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}` };
    };
    const alive = async (s: { cookie: string }) =>
      (await http(`${engine.url}/admin/whoami`, { headers: { cookie: s.cookie } })).status;
    const scim = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      http(`${engine.url}/scim/v2${path}`, {
        method,
        headers: {
          authorization: `Bearer ${SCIM_TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/scim+json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { raw: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
    const scimError = (t: Test, r: Awaited<ReturnType<typeof scim>>, status: number, scimType?: string) => {
      t.equal(r.status, status, r.text);
      t.match(r.headers.get('content-type'), /^application\/scim\+json/);
      const body = r.json();
      t.same(body.schemas, [ERROR_SCHEMA]);
      t.equal(body.status, String(status));
      t.type(body.detail, 'string');
      if (scimType) t.equal(body.scimType, scimType);
      return body;
    };

    // People: ada (owner, passkey), bob (Okta OIDC), carol (Entra SAML), dave (passkey with
    // factors), erin (invited), frank (OIDC, named by his exact subject), eve (OIDC, no grant).
    const ada = passkeySubject('ada@example.org');
    await grant(ada, 'owner', 'ada@example.org');
    await grant(oidc('00ubob'), 'operator', 'bob@example.org');
    await grant(saml('carol-oid'), 'operator', 'carol@example.org');
    const dave = passkeySubject('dave@example.org');
    await grant(dave, 'operator', 'dave@example.org');
    for (const id of ['dave-1', 'dave-2'])
      await state.identity.addPasskey({
        id,
        subject: dave,
        email: 'dave@example.org',
        publicKey: 'pQEC',
        counter: 0,
        transports: [],
      });
    await state.identity.stageRecoveryCodes(dave, [
      { selector: 'sel-a', hash: 'hash-a' },
      { selector: 'sel-b', hash: 'hash-b' },
    ]);
    await state.identity.promoteRecoveryCodes(dave);
    await grant(passkeySubject('erin@example.org'), 'viewer', 'erin@example.org');
    await state.identity.putToken({
      id: 'invite-erin',
      purpose: 'invite',
      boundTo: 'erin@example.org',
      verifier: 'v',
      expiresAt: Date.now() + 3_600_000,
    });
    await grant(oidc('00ufrank'), 'operator', 'frank@example.org');
    await state.settings.set('idp.connection.okta', {
      v: 1,
      id: 'okta',
      kind: 'oidc',
      displayName: 'Okta',
      enabled: true,
      oidc: { issuer: OKTA_ISSUER, clientId: 'c', clientSecretSealed: null, scopes: [], groupsClaim: null },
    });

    const adaS = await signIn(ada, 'ada@example.org', 'passkey');
    const bobS = await signIn(oidc('00ubob'), 'bob@example.org', 'oidc');
    const carolS = await signIn(saml('carol-oid'), 'carol@example.org', 'oidc');
    const daveS = await signIn(dave, 'dave@example.org', 'passkey');
    const frankS = await signIn(oidc('00ufrank'), 'frank@example.org', 'oidc');
    const eveS = await signIn(oidc('00ueve'), 'eve@example.org', 'oidc');
    for (const s of [adaS, bobS, carolS, daveS, frankS, eveS]) t.equal(await alive(s), 200, 'signed in');

    await t.test('refusals change nothing', async (t) => {
      const bob = '/Users/00ubob';
      // Activating, in both forms.
      for (const value of [true, 'True', 'true'])
        scimError(
          t,
          await scim('PATCH', bob, {
            schemas: [PATCH_OP],
            Operations: [{ op: 'replace', path: 'active', value }],
          }),
          400,
          'invalidValue',
        );
      scimError(
        t,
        await scim('PATCH', bob, {
          schemas: [PATCH_OP],
          Operations: [{ op: 'replace', value: { active: true } }],
        }),
        400,
        'invalidValue',
      );
      // Anything else, alone or mixed with active false: refused whole.
      for (const Operations of [
        [{ op: 'replace', value: { active: false, displayName: 'Bob' } }],
        [
          { op: 'Replace', path: 'active', value: 'False' },
          { op: 'Replace', path: 'name.givenName', value: 'Bob' },
        ],
        [{ op: 'add', path: 'emails', value: [{ value: 'b@example.org' }] }],
        [{ op: 'remove', path: 'active' }],
      ])
        scimError(t, await scim('PATCH', bob, { schemas: [PATCH_OP], Operations }), 400, 'mutability');
      // Not a PatchOp at all.
      scimError(t, await scim('PATCH', bob, { Operations: oktaDeactivate.Operations }), 400, 'invalidSyntax');
      scimError(t, await scim('PATCH', bob, { schemas: [PATCH_OP], Operations: [] }), 400, 'invalidSyntax');
      scimError(
        t,
        await scim('PATCH', bob, { schemas: [PATCH_OP], Operations: [{ op: 'move' }] }),
        400,
        'invalidSyntax',
      );
      scimError(t, await scim('PATCH', bob, '{"schemas": ['), 400, 'invalidSyntax');
      scimError(
        t,
        await scim('PATCH', bob, { ...oktaDeactivate, pad: 'x'.repeat(70 * 1024) }),
        400,
        'invalidSyntax',
      );
      scimError(
        t,
        await scim('PATCH', bob, 'active=false', { 'content-type': 'text/plain' }),
        400,
        'invalidSyntax',
      );

      // Never provisions, never reads.
      for (const [method, path, body] of [
        ['GET', '/Users', undefined],
        ['GET', '/Users?filter=userName%20eq%20%22bob%40example.org%22', undefined],
        ['GET', '/Users/00ubob', undefined],
        ['POST', '/Users', { schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], userName: 'mallory' }],
        ['PUT', '/Users/00ubob', { schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], active: false }],
        ['GET', '/Groups', undefined],
        ['PATCH', '/Groups/admins', oktaDeactivate],
        ['GET', '/ServiceProviderConfig', undefined],
        ['GET', '/Schemas', undefined],
        ['GET', '/ResourceTypes', undefined],
        ['POST', '/Bulk', { schemas: [] }],
        ['GET', '/Me', undefined],
      ] as const) {
        const r = await scim(method, path, body);
        const e = scimError(t, r, 501);
        t.match(e.detail, /only deprovisions/, `${method} ${path}`);
        t.notMatch(r.text, /bob@example\.org|operator/, 'no user data');
      }
      scimError(t, await scim('GET', '/nothing-here'), 404);
      t.equal((await state.roles.list()).length, 6, 'post did not provision');

      // The gate: no bearer, a wrong one, the admin token.
      for (const authorization of [
        undefined,
        `Bearer ${SCIM_TOKEN}x`,
        'Bearer test-admin-token-0123456789abcdef',
        SCIM_TOKEN,
      ]) {
        const r = await http(`${engine.url}/scim/v2/Users/00ubob`, {
          method: 'DELETE',
          headers: authorization === undefined ? {} : { authorization },
        });
        t.equal(r.status, 401);
        t.equal(r.text, 'unauthorised');
      }
      const unauthPatch = await http(`${engine.url}/scim/v2/Users/00ubob`, {
        method: 'PATCH',
        headers: { authorization: 'Bearer nope', 'content-type': 'application/scim+json' },
        raw: '{not json',
      });
      t.equal(unauthPatch.status, 401, 'the bearer is checked before the body is read');

      // The last owner.
      scimError(t, await scim('DELETE', '/Users/ada%40example.org'), 409);
      scimError(t, await scim('PATCH', `/Users/${encodeURIComponent(ada)}`, entraDisable), 409);
      t.equal((await state.roles.get(ada))?.role, 'owner', 'the last owner stays');
      t.equal(await alive(adaS), 200, "and so do the last owner's sessions");

      t.equal((await state.roles.get(oidc('00ubob')))?.role, 'operator', 'bob kept his role');
      t.equal(await alive(bobS), 200, 'and his session');
    });

    await t.test("Okta's PATCH active=false (provider id)", async (t) => {
      const r = await scim('PATCH', '/Users/00ubob', oktaDeactivate);
      t.equal(r.status, 204, r.text);
      t.equal(r.text, '');
      t.equal(await alive(bobS), 401, 'the live cookie is refused on its very next request');
      t.equal(await state.roles.get(oidc('00ubob')), null, 'role grant gone');
      t.equal(await alive(adaS), 200, 'others go on');
    });

    await t.test('Entra ID\'s PATCH active "False" (SAML NameID), sent as application/json', async (t) => {
      const r = await scim('PATCH', '/Users/carol-oid', entraDisable, { 'content-type': 'application/json' });
      t.equal(r.status, 204, r.text);
      t.equal(await alive(carolS), 401);
      t.equal(await state.roles.get(saml('carol-oid')), null);
    });

    await t.test('DELETE by email: passkeys and recovery codes gone', async (t) => {
      const r = await scim('DELETE', '/Users/DAVE%40example.org');
      t.equal(r.status, 204, r.text);
      t.equal(await alive(daveS), 401);
      t.equal(await state.roles.get(dave), null);
      t.same(await state.identity.passkeysOf(dave), [], 'passkeys gone');
      t.same(await state.identity.recoveryCodes(dave), [], 'recovery codes gone');

      const erin = await scim('DELETE', '/Users/erin@example.org');
      t.equal(erin.status, 204, erin.text);
      t.equal(await state.identity.getToken('invite-erin'), null, 'pending invite gone');
    });

    await t.test('DELETE by exact subject, percent-encoded', async (t) => {
      const r = await scim('DELETE', `/Users/${encodeURIComponent(oidc('00ufrank'))}`);
      t.equal(r.status, 204, r.text);
      t.equal(await alive(frankS), 401);
      t.equal(await state.roles.get(oidc('00ufrank')), null);
    });

    await t.test('nothing held: 404, yet sessions the id could name end', async (t) => {
      const eve = scimError(t, await scim('DELETE', '/Users/00ueve'), 404);
      t.equal(eve.detail, 'Resource 00ueve not found');
      t.equal(await alive(eveS), 401, 'a signed-in person without a grant is signed out too');
      const again = scimError(t, await scim('PATCH', '/Users/00ubob', oktaDeactivate), 404);
      t.equal(again.detail, 'Resource 00ubob not found', 'a repeat finds nothing');
    });

    await t.test('the last owner goes once another owner exists', async (t) => {
      await grant(oidc('00uzoe'), 'owner', 'zoe@example.org');
      const r = await scim('DELETE', '/Users/ada@example.org');
      t.equal(r.status, 204, r.text);
      t.equal(await alive(adaS), 401);
      t.same(
        (await state.roles.list()).map((g) => g.subject),
        [oidc('00uzoe')],
      );
    });

    await t.test('audit: one event per call, actor scim-bearer, no secret', async (t) => {
      const rows = (await state.audit.query({ action: 'scim-deprovision', order: 'asc', limit: 1000 })).map(
        (r) => r.event as Record<string, unknown> & { detail: Record<string, unknown> },
      );
      const all = JSON.stringify(rows);
      t.notOk(all.includes(SCIM_TOKEN), 'never the bearer');
      t.notOk(all.includes('hash-a'), 'never a recovery code verifier');
      for (const e of rows) {
        t.same(e.actor, { email: null, subject: null, method: 'scim-bearer' });
        t.equal(e.role, null);
      }
      const applied = rows.filter((e) => e.outcome === 'applied');
      t.same(
        applied.map((e) => [e.target, e.detail.op, e.detail.subjects, e.detail.roles, e.detail.factors]),
        [
          ['00ubob', 'patch', 1, 1, 0],
          ['carol-oid', 'patch', 1, 1, 0],
          ['DAVE@example.org', 'delete', 1, 1, 4],
          ['erin@example.org', 'delete', 1, 1, 0],
          ['oidc:okta:https://acme.okta.com#00ufrank', 'delete', 1, 1, 0], // a subject target is kept whole
          ['00ueve', 'delete', 0, 0, 0],
          ['00ubob', 'patch', 0, 0, 0],
          ['ada@example.org', 'delete', 1, 1, 0],
        ],
      );
      t.ok(applied.every((e) => typeof e.detail.sessions === 'number' && e.detail.sessions >= 1));
      const refused = rows.filter((e) => e.outcome === 'refused');
      t.ok(refused.length >= 10, 'refused PATCHes are recorded');
      t.same(
        refused.filter((e) => e.detail.reason === 'last-owner').map((e) => e.detail.op),
        ['delete', 'patch'],
      );
      t.ok(refused.some((e) => e.detail.reason === 'activate'));
      t.ok(refused.some((e) => e.detail.reason === 'other-attribute'));
      t.notOk(
        rows.some((e) => e.detail.op !== 'patch' && e.detail.op !== 'delete'),
        'reads and creates are not deprovisioning calls',
      );
    });
  });

t.test('SCIM not enabled: 503 text/plain on every method', async (t) => {
  const { url } = await startEngine(t);
  for (const method of ['GET', 'PATCH', 'DELETE', 'POST']) {
    const r = await http(`${url}/scim/v2/Users/00ubob`, {
      method,
      headers: { authorization: `Bearer ${SCIM_TOKEN}`, 'content-type': 'application/scim+json' },
      ...(method === 'PATCH' || method === 'POST' ? { raw: JSON.stringify(oktaDeactivate) } : {}),
    });
    t.equal(r.status, 503, method);
    t.equal(r.text, 'scim not enabled');
    t.match(r.headers.get('content-type'), /^text\/plain/);
  }
});
