// Single sign-on in Chromium against a real engine and a real OpenID provider (oidc-provider, its
// development login and consent pages) on loopback; every browser is kept on loopback:
// - the Identity providers screen: an owner sees it (a viewer has no link and the path is "Not
//   here"); "Add connection" from the Keycloak preset fills the scopes and groups claim; the
//   engine's refusals are shown beside the field they name (a connection id outside the alphabet,
//   an issuer that is neither https nor loopback) with nothing written; the role picker offers the
//   built-in roles and a custom role but never owner; the connection is added with its client
//   secret, listed with the secret only as "set", the redirect URI to copy, the mapping row, and
//   "Test connection" reads the provider's discovery document;
// - editing the display name with the secret field left blank keeps the secret (the engine still
//   says set, and the sign-in below, which needs it at the provider's token endpoint, works);
// - the full OIDC sign-in: the owner signs out, the sign-in screen shows "Sign in with <name>",
//   a click is a top-level navigation through the console to the engine's start URL and on to the
//   provider, whose login and consent pages are completed in Chromium; the browser lands on the
//   console signed in as that person (whoami: the email, an `oidc:` subject) with the role their
//   `backup-operators` group maps to (operator);
// - failures: a person from a domain the connection does not allow, a disabled connection and a
//   cleared client secret each come back as `?oidc=failed`, and the sign-in screen shows the one
//   message with no detail (also for `?saml=failed`); the address is cleaned so a reload does
//   not show it again; a disabled connection has no button; the connection is deleted, confirmed;
// - a SAML connection: a metadata URL that is neither https nor loopback is refused beside its
//   field; pasted metadata XML is read (entity id, sign-on URL, the certificate as its SHA-256
//   fingerprint), the ACS and SP metadata URLs are listed to copy (the latter answers through the
//   console), and an edit with the XML left blank keeps the metadata.
// axe finds no serious violation on the screen (laptop and 390 px, where nothing scrolls sideways),
// on the add form and on the sign-in screen with its buttons; no CSP violation or page error.
import { X509Certificate } from 'node:crypto';
import { makeTestPki, tempDir } from '@coffer/testkit';
import { startTestOidcProvider } from '@coffer/testkit/oidc';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { loopbackOnly, signInAtProvider } from './helpers/oidc-provider.ts';
import { confirmStepUps, noSidewaysScroll, openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
} from './helpers/stack.ts';

const OWNER = 'owner@example.org';
const FAILED = 'Sign-in through your identity provider did not complete. Try again or use a passkey.';

interface EngineState {
  state: {
    roles: {
      putCustomRole(r: {
        name: string;
        base: string;
        capabilities: string[];
        description: string | null;
      }): Promise<unknown>;
    };
  };
}

async function whoami(page: Page): Promise<{ status: number; body: Record<string, unknown> }> {
  return page.evaluate(async () => {
    const r = await fetch('/admin/whoami');
    return { status: r.status, body: r.status === 200 ? await r.json() : {} };
  });
}

/** The failure message on the sign-in screen: exactly the one sentence, nothing more. */
async function failureShown(t: Test, page: Page, what: string): Promise<void> {
  await page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
  const alert = page.getByRole('alert').filter({ hasText: 'did not complete' });
  await alert.waitFor();
  t.equal((await alert.textContent())?.trim(), FAILED, `${what}: the message, with no detail`);
  t.equal(new URL(page.url()).search, '', `${what}: the address is cleaned`);
}

t.test('identity providers: the screen, OIDC sign-in through the browser, failures', async (t) => {
  const stack = await startStack(t, { inProcess: true });
  const callback = `${stack.origin}/admin/oidc/callback/acme`;
  const op = await startTestOidcProvider({
    redirectUris: [callback],
    accounts: {
      'ada-0001': { email: 'Ada@Example.org', email_verified: true, groups: ['staff', 'backup-operators'] },
      'eve-0003': { email: 'eve@evil.example', email_verified: true, groups: ['backup-operators'] },
    },
  });
  t.teardown(() => op.close());
  // A custom role the mapping may name (defined in the state store: the test's shortcut), listed by
  // `GET /admin/roles` under `customRoles`, and held by someone.
  await (stack.engine as unknown as EngineState).state.roles.putCustomRole({
    name: 'auditor-plus',
    base: 'viewer',
    capabilities: ['audit.read'],
    description: null,
  });

  const owner = await stack.persona();
  const refused = await loopbackOnly(owner.context);
  await signInFirstOwner(owner, stack, OWNER);
  // (after the first owner: any role row closes the bootstrap path)
  const held = await stack.admin('POST', '/admin/roles/assign', {
    email: 'carol@example.org',
    role: 'auditor-plus',
  });
  t.equal(held.status, 200, `the custom role is held by someone (${JSON.stringify(held.body)})`);
  const { page } = owner;
  await confirmStepUps(page);

  await t.test('add a connection: field errors, role picker, write-only secret, test', async (t) => {
    await openScreen(owner, 'Identity providers');
    await page.getByText('No connections yet').waitFor();
    await assertAccessible(t, page, 'identity providers (empty)');

    await page.getByRole('button', { name: 'Add connection' }).click();
    const form = page.getByRole('region', { name: 'Add a connection' });
    await form.getByLabel('Preset').selectOption('keycloak');
    t.equal(await form.getByLabel('Scopes').inputValue(), 'openid email profile', 'scopes from the preset');
    t.equal(await form.getByLabel('Groups claim').inputValue(), 'groups', 'groups claim from the preset');
    t.equal(
      await form.getByLabel('Display name').inputValue(),
      'Keycloak',
      'the display name follows the preset',
    );
    t.match(await form.textContent(), /Group Membership mapper/, "the preset's notes are shown");

    // The role picker: built-in roles and the custom role, never owner.
    await form.getByRole('button', { name: 'Add a mapping row' }).click();
    const roleOptions = await form.getByLabel('Role, row 1').locator('option').allTextContents();
    t.ok(
      roleOptions.includes('operator') && roleOptions.includes('auditor-plus'),
      `roles offered: ${roleOptions}`,
    );
    t.notOk(roleOptions.includes('owner'), 'owner is not offered');
    await form.getByLabel('Group, row 1').fill('backup-operators');
    await form.getByLabel('Role, row 1').selectOption('operator');
    await form.getByRole('button', { name: 'Add a mapping row' }).click();
    await form.getByLabel('Group, row 2').fill('auditors');
    await form.getByLabel('Role, row 2').selectOption('auditor-plus');

    await form.getByLabel('Connection id').fill('Acme SSO!');
    await form.getByLabel('Display name').fill('Acme SSO');
    await form.getByLabel('Issuer').fill(op.issuer);
    await form.getByLabel('Client id', { exact: true }).fill(op.clientId);
    await form.getByLabel('Client secret', { exact: true }).fill(op.clientSecret);
    await form.getByLabel('Scopes').fill('openid email groups');
    await form.getByLabel('Allowed email domains').fill('example.org');
    await assertAccessible(t, page, 'add connection form');

    // The engine refuses the id: shown beside the id field, nothing written.
    await form.getByRole('button', { name: 'Add connection' }).click();
    const idField = form.getByLabel('Connection id');
    await form.locator('[aria-invalid="true"]').first().waitFor();
    t.equal(await idField.getAttribute('aria-invalid'), 'true', 'the id field is marked');
    const idError = await idField.getAttribute('aria-describedby');
    t.match(
      await page.locator(`[id="${idError?.split(' ')[0]}"]`).textContent(),
      /a-z, 0-9/,
      "the engine's rule is shown beside the id",
    );
    t.same((await stack.admin('GET', '/admin/idp/connections')).body.connections, [], 'nothing written');

    // An issuer that is neither https nor loopback: shown beside the issuer; the id error is gone.
    await idField.fill('acme');
    await form.getByLabel('Issuer').fill('http://idp.example.org/realms/acme');
    await form.getByRole('button', { name: 'Add connection' }).click();
    const issuerField = form.getByLabel('Issuer');
    await page.waitForFunction(
      () => document.querySelector('input[type="url"][aria-invalid="true"]') !== null,
    );
    t.equal(await idField.getAttribute('aria-invalid'), null, 'the id is no longer marked');
    const issuerError = (await issuerField.getAttribute('aria-describedby'))?.split(' ')[0];
    t.match(
      await page.locator(`[id="${issuerError}"]`).textContent(),
      /https/,
      'the issuer rule beside the issuer',
    );
    t.same(
      (await stack.admin('GET', '/admin/idp/connections')).body.connections,
      [],
      'still nothing written',
    );
    await screenshot(page, 'identity-providers-form');

    await issuerField.fill(op.issuer);
    await form.getByRole('button', { name: 'Add connection' }).click();
    await page.getByRole('status').filter({ hasText: 'Acme SSO is added.' }).waitFor();
    const card = page.getByRole('article', { name: 'Acme SSO' });
    const text = (await card.textContent()) ?? '';
    t.match(text, /Client secretset/, 'the secret is shown only as set');
    t.notMatch(await page.content(), new RegExp(op.clientSecret), 'the secret is nowhere on the page');
    t.match(text, callback, 'the redirect URI to copy');
    t.match(text, /backup-operators → operator/, 'the mapping row');
    t.match(text, /auditors → auditor-plus/, 'the custom-role row');
    t.match(text, /enabled/);

    const stored = (await stack.admin('GET', '/admin/idp/connections')).body.connections;
    t.equal(stored.length, 1);
    t.equal(stored[0].oidc.clientSecretSet, true);
    t.same(stored[0].groupRoleMapping, [
      { group: 'backup-operators', role: 'operator' },
      { group: 'auditors', role: 'auditor-plus' },
    ]);
    t.same(stored[0].oidc.scopes, ['openid', 'email', 'groups']);
    t.equal(stored[0].preset, 'keycloak');

    await card.getByRole('button', { name: 'Test connection Acme SSO' }).click();
    await card.getByRole('status').filter({ hasText: 'Connection works' }).waitFor();
    t.pass("the test read the provider's discovery document");

    await assertAccessible(t, page, 'identity providers');
    await screenshot(page, 'identity-providers');
    await page.setViewportSize({ width: 390, height: 844 });
    t.ok(await noSidewaysScroll(page), 'no sideways scroll at 390 px');
    await assertAccessible(t, page, 'identity providers (phone width)');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  await t.test('edit: a blank secret is kept', async (t) => {
    const card = page.getByRole('article', { name: 'Acme SSO' });
    await card.getByRole('button', { name: 'Edit Acme SSO' }).click();
    const form = page.getByRole('region', { name: 'Edit connection Acme SSO' });
    const secret = form.getByLabel('Client secret', { exact: true });
    t.equal(await secret.inputValue(), '', 'the secret is not shown');
    t.match(
      await form.getByText(/A client secret is set\. Leave blank to keep/).textContent(),
      /Leave blank to keep/,
      'the form says a blank secret is kept',
    );
    await form.getByLabel('Display name').fill('Acme Single Sign-On');
    await form.getByRole('button', { name: 'Save connection' }).click();
    await page.getByRole('status').filter({ hasText: 'Acme Single Sign-On is saved.' }).waitFor();
    const stored = (await stack.admin('GET', '/admin/idp/connections')).body.connections[0];
    t.equal(stored.displayName, 'Acme Single Sign-On');
    t.equal(stored.oidc.clientSecretSet, true, 'the secret was kept');
    t.equal(stored.rev, 2);
  });

  await t.test('sign out, sign in with the provider: the mapped role', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
    const button = page.getByRole('link', { name: 'Sign in with Acme Single Sign-On' });
    await button.waitFor();
    t.equal(await button.getAttribute('href'), '/admin/oidc/start/acme', 'a plain link to the start URL');
    await assertAccessible(t, page, 'sign-in with a provider button');
    await screenshot(page, 'sign-in-sso');

    await button.click();
    await signInAtProvider(page, op.issuer, 'ada-0001');
    await page.waitForURL(`${stack.origin}/`);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    t.match(
      await page.locator('.who').textContent(),
      /ada@example\.org · operator/,
      'signed in with the mapped role',
    );
    const who = await whoami(page);
    t.equal(who.status, 200);
    t.equal(who.body.email, 'ada@example.org');
    t.equal(who.body.role, 'operator');
    t.equal(who.body.subject, `oidc:acme:${op.issuer}#ada-0001`, 'the rule-7 subject');
    const cookies = await owner.context.cookies(stack.origin);
    t.ok(
      cookies.some((c) => c.name === '__Host-engine_session' && c.httpOnly),
      'an HttpOnly session cookie',
    );
    t.notOk(
      cookies.some((c) => c.name === '__Host-engine_oidc' && c.value !== ''),
      'the transaction cookie is cleared',
    );
    t.equal(
      await page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Identity providers' })
        .count(),
      0,
      'an operator has no Identity providers link',
    );
    await page.goto(`${stack.origin}/identity-providers`);
    await page.getByRole('heading', { name: 'Not here' }).waitFor();
    const audit = await stack.admin('GET', '/admin/audit?action=idp-role-mapping');
    t.match(JSON.stringify(audit.body), /"to":"operator"/, 'the mapping is audited');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
  });

  await t.test('failures: a foreign domain, a disabled connection, a cleared secret', async (t) => {
    // A person whose email domain the connection does not allow.
    const eve = await stack.persona();
    await loopbackOnly(eve.context);
    await eve.page.goto(`${stack.origin}/`);
    await eve.page.getByRole('link', { name: 'Sign in with Acme Single Sign-On' }).click();
    await signInAtProvider(eve.page, op.issuer, 'eve-0003');
    await failureShown(t, eve.page, 'a disallowed domain');
    t.equal((await whoami(eve.page)).status, 401, 'not signed in');
    await eve.page.reload();
    await eve.page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
    t.equal(
      await eve.page.getByRole('alert').filter({ hasText: 'did not complete' }).count(),
      0,
      'a reload does not show the message again',
    );
    // The SAML flavour of the same answer.
    await eve.page.goto(`${stack.origin}/?saml=failed`);
    await failureShown(t, eve.page, 'saml=failed');
    t.same(eve.problems, [], "no CSP violation or page error in eve's browser");
    await eve.context.close();

    // The owner (passkey) disables the connection: no button, and its start URL fails.
    await page.getByLabel('Email').fill(OWNER);
    await page.getByRole('button', { name: 'Sign in with passkey' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await openScreen(owner, 'Identity providers');
    const card = page.getByRole('article', { name: 'Acme Single Sign-On' });
    await card.getByRole('button', { name: 'Disable Acme Single Sign-On' }).click();
    await page.getByRole('status').filter({ hasText: 'is disabled.' }).waitFor();
    t.match(await card.textContent(), /disabled/);
    const other = await stack.persona();
    await loopbackOnly(other.context);
    await other.page.goto(`${stack.origin}/`);
    await other.page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
    await other.page.getByRole('button', { name: 'Sign in with passkey' }).waitFor();
    t.equal(
      await other.page.getByRole('link', { name: /Sign in with Acme/ }).count(),
      0,
      'no button when disabled',
    );
    await other.page.goto(`${stack.origin}/admin/oidc/start/acme`);
    await failureShown(t, other.page, 'a disabled connection');

    // Enabled again with the client secret cleared: the provider refuses the code exchange.
    await card.getByRole('button', { name: 'Enable Acme Single Sign-On' }).click();
    await page.getByRole('status').filter({ hasText: 'is enabled.' }).waitFor();
    await card.getByRole('button', { name: 'Edit Acme Single Sign-On' }).click();
    const form = page.getByRole('region', { name: 'Edit connection Acme Single Sign-On' });
    await form.getByLabel('Clear the client secret (a public client)').check();
    t.ok(
      await form.getByLabel('Client secret', { exact: true }).isDisabled(),
      'the secret input is off while clearing',
    );
    await form.getByRole('button', { name: 'Save connection' }).click();
    await page.getByRole('status').filter({ hasText: 'is saved.' }).waitFor();
    t.match(await card.textContent(), /Client secretnot set/, 'the secret is now not set');
    t.equal(
      (await stack.admin('GET', '/admin/idp/connections')).body.connections[0].oidc.clientSecretSet,
      false,
    );

    await other.page.goto(`${stack.origin}/`);
    await other.page.getByRole('link', { name: 'Sign in with Acme Single Sign-On' }).click();
    await signInAtProvider(other.page, op.issuer, 'ada-0001');
    await failureShown(t, other.page, 'a cleared client secret');
    t.same(other.problems, [], 'no CSP violation or page error in the other browser');
    await other.context.close();

    // Delete, confirmed.
    await card.getByRole('button', { name: 'Delete Acme Single Sign-On' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete the connection Acme Single Sign-On?' });
    await dialog.getByRole('button', { name: 'Delete connection' }).click();
    await page.getByRole('status').filter({ hasText: 'was deleted.' }).waitFor();
    t.same((await stack.admin('GET', '/admin/idp/connections')).body.connections, [], 'deleted');
  });

  await t.test('a SAML connection: a refused metadata URL, pasted metadata, the URLs to copy', async (t) => {
    const pki = makeTestPki(tempDir(t, 'coffer-console-saml-'));
    const certBody = pki.cert.replace(/-----(BEGIN|END) CERTIFICATE-----|\s/g, '');
    const fingerprint = new X509Certificate(pki.cert).fingerprint256.replaceAll(':', '').toLowerCase();
    const metadata = `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="https://idp.example.org/saml">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${certBody}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.org/saml/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;

    await page.getByRole('button', { name: 'Add connection' }).click();
    const form = page.getByRole('region', { name: 'Add a connection' });
    await form.getByLabel('Preset').selectOption('generic-saml');
    t.equal(await form.getByLabel('Issuer').count(), 0, 'no OIDC fields for a SAML preset');
    await form.getByLabel('Connection id').fill('corp-saml');
    await form.getByLabel('Display name').fill('Corp SAML');
    await form.getByLabel('Allowed email domains').fill('example.org, corp.example.org');
    // Neither https nor loopback: refused before anything is fetched, beside the metadata URL.
    await form.getByLabel('Metadata URL', { exact: true }).fill('http://idp.example.org/saml/metadata');
    await form.getByRole('button', { name: 'Add connection' }).click();
    const urlField = form.getByLabel('Metadata URL', { exact: true });
    await page.waitForFunction(
      () => document.querySelector('input[type="url"][aria-invalid="true"]') !== null,
    );
    const urlError = (await urlField.getAttribute('aria-describedby'))?.split(' ')[0];
    t.match(
      await page.locator(`[id="${urlError}"]`).textContent(),
      /https/,
      'the URL rule beside the metadata URL',
    );

    await form.getByLabel('Pasted metadata XML (kept as read)').check();
    await form.getByLabel('Metadata XML', { exact: true }).fill(metadata);
    await form.getByLabel('Groups attribute').fill('memberOf');
    await form.getByRole('button', { name: 'Add connection' }).click();
    await page.getByRole('status').filter({ hasText: 'Corp SAML is added.' }).waitFor();
    const card = page.getByRole('article', { name: 'Corp SAML' });
    const text = (await card.textContent()) ?? '';
    t.match(text, 'https://idp.example.org/saml', 'the IdP entity id');
    t.match(text, 'https://idp.example.org/saml/sso', 'the IdP sign-on URL');
    t.match(text, fingerprint, 'the signing certificate as its SHA-256 fingerprint');
    t.notMatch(text, certBody.slice(0, 40), 'not the certificate itself');
    t.match(text, `${stack.origin}/admin/saml/acs/corp-saml`, 'the ACS URL to copy');
    t.match(text, `${stack.origin}/admin/saml/metadata/corp-saml`, 'the SP metadata URL to copy');
    t.match(text, /Metadatapasted XML/);
    t.match(text, /Groups attributememberOf/);
    t.equal(
      await card.getByRole('button', { name: /^Copy acs url$/i }).count(),
      1,
      'a copy button for the ACS URL',
    );
    const spMetadata = await page.evaluate(async () => {
      const r = await fetch('/admin/saml/metadata/corp-saml');
      return { status: r.status, type: r.headers.get('content-type'), text: await r.text() };
    });
    t.equal(spMetadata.status, 200, 'the SP metadata URL answers through the console');
    t.match(spMetadata.text, 'AssertionConsumerService');

    // Editing with the XML left blank keeps the metadata read before.
    await card.getByRole('button', { name: 'Edit Corp SAML' }).click();
    const edit = page.getByRole('region', { name: 'Edit connection Corp SAML' });
    t.equal(
      await edit.getByLabel('Metadata XML', { exact: true }).inputValue(),
      '',
      'the XML is not shown again',
    );
    await edit.getByLabel('Email attribute').fill('mail');
    await edit.getByRole('button', { name: 'Save connection' }).click();
    await page.getByRole('status').filter({ hasText: 'Corp SAML is saved.' }).waitFor();
    const stored = (await stack.admin('GET', '/admin/idp/connections')).body.connections.find(
      (c: { id: string }) => c.id === 'corp-saml',
    );
    t.equal(stored.saml.emailAttribute, 'mail');
    t.equal(stored.saml.idpEntityId, 'https://idp.example.org/saml', 'the metadata was kept');
    t.same(stored.saml.certificateFingerprints, [fingerprint]);
    await assertAccessible(t, page, 'identity providers (SAML)');
    await page.setViewportSize({ width: 390, height: 844 });
    t.ok(await noSidewaysScroll(page), 'no sideways scroll at 390 px with the long URLs');
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  await t.test('a viewer has no link and the path is not theirs', async (t) => {
    const r = await stack.admin('POST', '/admin/roles/invite', {
      email: 'viewer@example.org',
      role: 'viewer',
    });
    t.equal(r.status, 200);
    const viewer = await stack.persona();
    await viewer.page.goto(`${stack.origin}/`);
    await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: r.body.inviteToken });
    await viewer.page.goto(`${stack.origin}/`);
    await viewer.page.getByRole('button', { name: 'Sign out' }).waitFor();
    t.equal(
      await viewer.page
        .getByRole('navigation', { name: 'Main' })
        .getByRole('link', { name: 'Identity providers' })
        .count(),
      0,
      'no Identity providers link for a viewer',
    );
    await viewer.page.goto(`${stack.origin}/identity-providers`);
    await viewer.page.getByRole('heading', { name: 'Not here' }).waitFor();
    t.same(viewer.problems, [], "no CSP violation or page error in the viewer's browser");
    await viewer.context.close();
  });

  t.same(owner.problems, [], "no CSP violation or page error in the owner's browser");
  t.same(
    [...new Set(refused)].filter((h) => !h.startsWith('fonts.')),
    [],
    'nothing but loopback was asked for',
  );
});
