// Signing in through the console in Chromium: the admin token (a token session), a passkey
// registered as the first owner then used to sign in, a recovery code, sign-out; who is signed in
// (email, role, session expiry) in the header; no CSP violation or page error along the way; axe
// finds no serious violation on the sign-in screen, at laptop and phone width.
import t from 'tap';
import { ADMIN_TOKEN, assertAccessible, registerInPage, screenshot, startStack } from './helpers/stack.ts';

t.test('sign in with the admin token, a passkey and a recovery code', async (t) => {
  const stack = await startStack(t);
  const p = await stack.persona();
  const { page } = p;
  await page.goto(`${stack.origin}/`);
  await page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();
  await assertAccessible(t, page, 'sign-in');
  await screenshot(page, 'sign-in');

  // A wrong token: a clear message, still on the sign-in screen.
  await page.getByRole('tab', { name: 'Admin token' }).click();
  await page.getByLabel('Admin token').fill('wrong');
  await page.getByRole('button', { name: 'Sign in with admin token' }).click();
  await page.getByRole('alert').filter({ hasText: 'signed out' }).waitFor();

  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in with admin token' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  t.match(await page.locator('.who').textContent(), /Admin token session · owner/);
  t.match(await page.locator('.who').textContent(), /until /, 'the session expiry is shown');
  const cookies = await p.context.cookies();
  t.ok(
    cookies.some((c) => c.name === '__Host-engine_session' && c.httpOnly),
    'an HttpOnly session cookie',
  );
  const stored = await page.evaluate(
    () => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }),
  );
  t.notMatch(stored, new RegExp(ADMIN_TOKEN), 'the token is kept in no web storage');
  t.equal(stored, '{}{}', 'nothing in web storage at all');
  await assertAccessible(t, page, 'overview');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Coffer' }).waitFor();

  // The first owner's passkey (bootstrap path), then a passkey sign-in through the form.
  const codes = await registerInPage(page, 'owner@example.org', { authorization: `Bearer ${ADMIN_TOKEN}` });
  t.equal(codes.length, 10);
  await page.evaluate(() => fetch('/admin/auth/logout', { method: 'POST' }));
  await page.reload();
  await page.getByLabel('Email').fill('owner@example.org');
  await page.getByRole('button', { name: 'Sign in with passkey' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  t.match(await page.locator('.who').textContent(), /owner@example\.org · owner/);
  await page.getByRole('button', { name: 'Sign out' }).click();

  // A recovery code: a wrong one is refused with a message, a right one signs in.
  await page.getByRole('tab', { name: 'Recovery code' }).click();
  await page.getByLabel('Email').fill('owner@example.org');
  await page.getByLabel('Recovery code').fill('not-a-code');
  await page.getByRole('button', { name: 'Sign in with recovery code' }).click();
  await page.getByRole('alert').waitFor();
  await page.getByLabel('Recovery code').fill(codes[0]!);
  await page.getByRole('button', { name: 'Sign in with recovery code' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();

  // Phone width: the same screen, still accessible.
  await page.setViewportSize({ width: 390, height: 844 });
  await assertAccessible(t, page, 'overview (phone width)');
  t.same(p.problems, [], 'no CSP violation or page error');
});
