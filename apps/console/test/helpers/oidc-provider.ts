/**
 * Browser-side helpers for the console's single sign-on tests; the provider itself is
 * `@coffer/testkit/oidc` (a real oidc-provider on 127.0.0.1 with its development login and consent
 * pages).
 */
import type { BrowserContext, Page } from 'playwright-core';

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Keeps a browser context on loopback: any request to another host is aborted (the provider's
 * development pages import a web font from the internet; the tests send nothing off the machine).
 * Returns the hosts that were refused.
 */
export async function loopbackOnly(context: BrowserContext): Promise<string[]> {
  const refused: string[] = [];
  await context.route(
    (url) => !(url.protocol === 'data:' || url.protocol === 'blob:' || LOOPBACK.has(url.hostname)),
    (route) => {
      refused.push(new URL(route.request().url()).hostname);
      return route.abort('blockedbyclient');
    },
  );
  return refused;
}

/**
 * Completes the provider's development login (any password) and consent pages in the browser, as
 * a person would, for a browser with no session at the provider yet.
 */
export async function signInAtProvider(page: Page, issuer: string, login: string): Promise<void> {
  await page.waitForURL((u) => u.origin === issuer);
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill('any-password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  // The consent page (a first grant for this client and account).
  const proceed = page.getByRole('button', { name: 'Continue' });
  await proceed.waitFor();
  await proceed.click();
}
