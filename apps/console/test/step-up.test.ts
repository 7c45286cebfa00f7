// Step-up prompts in the console (Chromium, engine in this process so a session can be "signed in
// ten minutes ago" through the engine's own session service): a gated write answers 401
// stepUpRequired, the console shows "Confirm it is you" in place (never the sign-in screen), the
// passkey confirms, and the same action completes; cancelling leaves the person signed in with a
// clear message. A token session proves presence with the admin token again.
import type { Page } from 'playwright-core';
import t from 'tap';
import { ADMIN_TOKEN, signInFirstOwner, startStack } from './helpers/stack.ts';

const EMAIL = 'owner@example.org';

/**
 * Replaces the browser's (host-only, HttpOnly) session cookie, as a sign-in would have set it.
 * The DevTools session stays attached: detaching one drops the page's virtual authenticator.
 */
async function setSessionCookie(page: Page, origin: string, token: string): Promise<void> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.setCookie', {
    name: SESSION,
    value: token,
    url: `${origin}/`,
    secure: true,
    httpOnly: true,
    sameSite: 'Strict',
  });
}
const SESSION = '__Host-engine_session';

/** The engine's session service (apps/engine state/sessions.ts), as this test uses it. */
interface EngineWithSessions {
  sessions: {
    mint(claims: {
      subject: string | null;
      email: string | null;
      method: string;
      authAt: number;
    }): Promise<{ token: string }>;
  };
}

t.test('a passkey session confirms in place and the action continues', async (t) => {
  const stack = await startStack(t, { withoutBreakGlassKey: true, inProcess: true });
  const p = await stack.persona();
  const { page } = p;
  await signInFirstOwner(p, stack, EMAIL);

  // The same person, signed in ten minutes ago (older than the five-minute step-up window).
  const old = await (stack.engine as unknown as EngineWithSessions).sessions.mint({
    subject: `passkey:${EMAIL}`,
    email: EMAIL,
    method: 'passkey',
    authAt: Math.floor(Date.now() / 1000) - 600,
  });
  await setSessionCookie(page, stack.origin, old.token);
  await page.goto(`${stack.origin}/setup`);
  await page.getByRole('heading', { name: 'Set-up', level: 1 }).waitFor();

  await page.getByRole('button', { name: 'Generate the break-glass key in this browser' }).click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download secret key file' }).click(),
  ]);
  t.equal(download.suggestedFilename(), 'coffer-break-glass.key', 'the secret key file was offered');
  await page.getByLabel('I have saved the secret key file somewhere safe').check();

  // First attempt: cancel the prompt. Still signed in, still on the screen, a clear message.
  await page.getByRole('button', { name: 'Send the public key to the engine' }).click();
  const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
  await dialog.waitFor();
  t.match(await dialog.textContent(), /Confirm with your passkey/);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('alert').filter({ hasText: 'not confirmed' }).waitFor();
  t.equal(await page.getByRole('heading', { name: 'Sign in to Coffer' }).count(), 0, 'never sent to sign-in');
  t.equal((await stack.admin('GET', '/admin/status')).body.keysReady, false, 'nothing was set');

  // Second attempt: confirm with the passkey; the same request is retried and succeeds.
  await page.getByRole('button', { name: 'Send the public key to the engine' }).click();
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Confirm with passkey' }).click();
  await page.locator('li', { hasText: 'In force:' }).waitFor();
  t.equal(
    (await stack.admin('GET', '/admin/status')).body.keysReady,
    true,
    'the action completed after step-up',
  );
  t.equal(await dialog.isVisible(), false, 'the prompt closed');
  const rows = await stack.admin('GET', '/admin/audit?action=break-glass-key-set');
  t.match(JSON.stringify(rows.body), new RegExp(`passkey:${EMAIL}`), 'audited as the person who stepped up');
  t.same(p.problems, [], 'no CSP violation or page error');
});

t.test('a token session proves presence with the admin token again', async (t) => {
  const stack = await startStack(t, { withoutBreakGlassKey: true, inProcess: true });
  const p = await stack.persona();
  const { page } = p;
  await page.goto(`${stack.origin}/`);
  const old = await (stack.engine as unknown as EngineWithSessions).sessions.mint({
    subject: null,
    email: null,
    method: 'token',
    authAt: Math.floor(Date.now() / 1000) - 600,
  });
  await setSessionCookie(page, stack.origin, old.token);
  await page.goto(`${stack.origin}/setup`);
  await page.getByRole('button', { name: 'Generate the break-glass key in this browser' }).click();
  await page.getByLabel('I have saved the secret key file somewhere safe').check();
  await page.getByRole('button', { name: 'Send the public key to the engine' }).click();
  const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
  await dialog.waitFor();
  await dialog.getByLabel('Admin token').fill('not-the-token');
  await dialog.getByRole('button', { name: 'Confirm' }).click();
  await dialog.getByRole('alert').filter({ hasText: 'not the admin token' }).waitFor();
  await dialog.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await dialog.getByRole('button', { name: 'Confirm' }).click();
  await page.locator('li', { hasText: 'In force:' }).waitFor();
  t.equal((await stack.admin('GET', '/admin/status')).body.keysReady, true, 'the action completed');
  t.match(await page.locator('.who').textContent(), /Admin token session · owner/, 'still signed in');
  t.same(p.problems, [], 'no CSP violation or page error');
});
