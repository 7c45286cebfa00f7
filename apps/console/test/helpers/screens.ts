/**
 * Page helpers the screen tests share: step-up confirmed in place, a screen opened from the main
 * navigation, and the check that nothing scrolls sideways (a phone-width layout).
 */
import type { Page } from 'playwright-core';
import type { Persona } from './stack.ts';

/** Confirms the step-up prompt with the virtual passkey whenever it opens (the write then goes on). */
export async function confirmStepUps(page: Page): Promise<void> {
  const dialog = page.getByRole('dialog', { name: 'Confirm it is you' });
  await page.addLocatorHandler(dialog, async () => {
    await dialog.getByRole('button', { name: 'Confirm with passkey' }).click();
    await dialog.waitFor({ state: 'hidden' });
  });
}

/** Opens the screen `title` through its link in the main navigation and waits for its heading. */
export async function openScreen(persona: Persona, title: string): Promise<void> {
  const { page } = persona;
  await page
    .getByRole('navigation', { name: 'Main' })
    .getByRole('link', { name: title, exact: true })
    .click();
  await page.getByRole('heading', { level: 1, name: title }).waitFor();
}

/** True when the page is no wider than the viewport (nothing scrolls sideways). */
export async function noSidewaysScroll(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);
}
