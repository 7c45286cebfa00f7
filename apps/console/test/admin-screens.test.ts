// The Audit, Members, Support and Account screens in Chromium against a real engine, through the
// UI only (the admin bearer is used once, by the harness, to claim the first owner):
// - Audit: the chain newest first with the first-owner claim, an action filter that narrows it,
//   verify ok, a JSON and a CSV export downloaded with rows;
// - Members: an owner invites a person as operator; the link shown opens in a second browser,
//   which creates a passkey through the form, confirms its recovery codes and is signed in as an
//   operator who sees the members but none of the invite or role controls; the owner then changes
//   that person's role and the person's next request carries it;
// - Support: a minted diagnostics credential (secret shown once) works from Node against
//   `/support/diagnostics` through the console proxy, is refused once revoked; a support bundle
//   downloads;
// - Account: who I am; new recovery codes shown once and confirmed; one of them signs in in a
//   fresh browser.
// axe finds no serious violation on any of the four screens (laptop and phone width); no CSP
// violation or page error in any browser.
import { readFile } from 'node:fs/promises';
import type { Page } from 'playwright-core';
import t from 'tap';
import { assertAccessible, type Persona, screenshot, signInFirstOwner, startStack } from './helpers/stack.ts';

const OWNER = 'owner@example.org';
const OPERATOR = 'operator@example.org';

async function downloadText(page: Page, click: () => Promise<void>): Promise<{ name: string; text: string }> {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  const path = await download.path();
  return { name: download.suggestedFilename(), text: await readFile(path, 'utf8') };
}

/** Opens a screen through the main navigation (a client-side route change, as people move). */
async function go(persona: Persona, origin: string, title: string): Promise<void> {
  const { page } = persona;
  if (!page.url().startsWith(origin)) await page.goto(`${origin}/`);
  await page
    .getByRole('navigation', { name: 'Main' })
    .getByRole('link', { name: title, exact: true })
    .click();
  await page.getByRole('heading', { level: 1, name: title }).waitFor();
}

t.test('audit, members, support and account screens', async (t) => {
  const stack = await startStack(t);
  const owner = await stack.persona();
  await signInFirstOwner(owner, stack, OWNER);
  const { page } = owner;

  await t.test('audit: list, filter, verify, export', async (t) => {
    await go(owner, stack.origin, 'Audit');
    const rows = page.getByRole('table', { name: /Audit events/ }).locator('tbody tr');
    await rows.first().waitFor();
    const actions = await rows.locator('td:nth-child(3)').allTextContents();
    t.ok(actions.includes('first-owner-claim'), 'the first-owner claim is listed');
    t.ok(actions.includes('passkey-register'), 'the passkey registration is listed');
    const seqs = (await rows.locator('td:first-child').allTextContents()).map(Number);
    t.same(
      seqs,
      [...seqs].sort((a, b) => b - a),
      'newest first',
    );
    const total = await rows.count();
    t.ok(total >= 3, `several events (${total})`);
    await assertAccessible(t, page, 'audit');
    await screenshot(page, 'audit');

    await page.getByLabel('Action', { exact: true }).selectOption('first-owner-claim');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('matching the filters').waitFor();
    t.same(
      await rows.locator('td:nth-child(3)').allTextContents(),
      ['first-owner-claim'],
      'the filter narrows',
    );
    const actor = await rows.locator('td:nth-child(5)').textContent();
    t.match(actor, OWNER, 'the claim names its actor');

    await page.getByLabel('Action', { exact: true }).selectOption('');
    await page.getByLabel('Actor', { exact: true }).fill('nobody@example.org');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No audit events match.').waitFor();
    t.pass('an actor filter with no events says so');
    await page.getByRole('button', { name: 'Clear' }).click();
    await rows.first().waitFor();
    t.ok((await rows.count()) >= total, 'clearing shows the whole chain again');

    await page.getByRole('button', { name: 'Verify chain' }).click();
    const verified = page.getByRole('status').filter({ hasText: 'The audit chain verifies' });
    await verified.waitFor();
    t.match(await verified.textContent(), /\d+ events? \(seq 1 to \d+\)/, 'verify ok, from seq 1');

    const json = await downloadText(page, () => page.getByRole('button', { name: 'Export JSON' }).click());
    t.match(json.name, /^coffer-audit-\d+\.json$/, 'the engine names the JSON export');
    const doc = JSON.parse(json.text) as { kind: string; events: { seq: number; action: string }[] };
    t.equal(doc.kind, 'engine-audit-export');
    t.ok(doc.events.length >= total, 'the export holds the rows');
    t.ok(
      doc.events.some((e) => e.action === 'first-owner-claim'),
      'the export holds the claim',
    );
    t.equal(doc.events[0]?.seq, 1, 'the export is oldest first');
    const csv = await downloadText(page, () => page.getByRole('button', { name: 'Export CSV' }).click());
    t.match(csv.name, /\.csv$/);
    const lines = csv.text.trim().split(/\r\n/);
    t.match(lines[0], /^seq,ts,action,outcome/, 'a CSV header');
    t.ok(lines.length > doc.events.length, 'a CSV row per event');
    t.ok(
      lines.some((l) => l.includes('first-owner-claim')),
      'the CSV holds the claim',
    );
  });

  let operator: Persona | undefined;
  await t.test('members: invite an operator who registers through the link', async (t) => {
    await go(owner, stack.origin, 'Members');
    const table = page.getByRole('table', { name: 'Members and their roles' });
    await table.getByRole('row', { name: new RegExp(OWNER) }).waitFor();
    t.match(await table.getByRole('row', { name: new RegExp(OWNER) }).textContent(), /owner/);

    await page.getByLabel('Email', { exact: true }).fill(OPERATOR);
    t.equal(await page.getByLabel('Role', { exact: true }).inputValue(), 'operator', 'operator by default');
    await page.getByRole('button', { name: 'Create invite link' }).click();
    await page.locator('output.secret').waitFor();
    const link = (await page.locator('output.secret').textContent()) ?? '';
    t.match(link, new RegExp(`^${stack.origin}/#invite=[^&]+&email=operator%40example\\.org$`), 'the link');
    t.ok(await page.getByRole('button', { name: 'Copy invite link' }).isVisible(), 'a copy button');
    await table.getByRole('row', { name: new RegExp(OPERATOR) }).waitFor();
    t.match(
      await table.getByRole('row', { name: new RegExp(OPERATOR) }).textContent(),
      /operator@example\.org.*operator/,
      'the invited person is listed with the role',
    );
    await assertAccessible(t, page, 'members');
    await screenshot(page, 'members');
    await page.getByRole('button', { name: 'Done' }).click();
    await page.locator('output.secret').waitFor({ state: 'detached' });
    t.pass('the link is gone once dismissed');

    // The invited person, in a browser of their own.
    operator = await stack.persona();
    const op = operator.page;
    await op.goto(link);
    await op.getByRole('heading', { name: 'Accept your invitation' }).waitFor();
    t.equal(await op.getByLabel('Email').inputValue(), OPERATOR, 'the email comes from the link');
    await op.getByRole('button', { name: 'Create passkey' }).click();
    await op.getByRole('heading', { name: 'Passkey saved' }).waitFor();
    t.equal(await op.getByRole('list', { name: 'Recovery codes' }).locator('li').count(), 10, 'ten codes');
    await op.getByLabel('I have kept these codes').check();
    await op.getByRole('button', { name: 'Confirm and continue' }).click();
    await op.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    t.match(
      await op.locator('.who').textContent(),
      /operator@example\.org · operator/,
      'signed in as operator',
    );

    await op.getByRole('link', { name: 'Members' }).click();
    await op.getByRole('heading', { level: 1, name: 'Members' }).waitFor();
    await op
      .getByRole('table', { name: 'Members and their roles' })
      .getByRole('row', { name: /owner@/ })
      .waitFor();
    t.equal(await op.getByRole('button', { name: 'Create invite link' }).count(), 0, 'no invite form');
    t.equal(await op.getByRole('button', { name: /Change role/ }).count(), 0, 'no role controls');
    t.equal(await op.getByRole('button', { name: /End sessions/ }).count(), 0, 'no session controls');
    t.equal(
      await op.getByRole('heading', { name: 'Owner-action dual control' }).count(),
      0,
      'no owner queue',
    );
    await assertAccessible(t, op, 'members (operator)');

    // The owner changes the operator's role; the person's next request carries it.
    await page.reload();
    await page.getByLabel(`New role for ${OPERATOR}`).selectOption('approver');
    await page.getByRole('button', { name: `Change role of ${OPERATOR}` }).click();
    await page.getByText(`${OPERATOR} now has the approver role (was operator).`).waitFor();
    t.match(
      await table.getByRole('row', { name: new RegExp(OPERATOR) }).textContent(),
      /approver/,
      'the table shows the new role',
    );
    await op.reload();
    await op.locator('.who').getByText('approver').waitFor();
    t.match(await op.locator('.who').textContent(), /operator@example\.org · approver/, 'the person has it');
  });

  await t.test('support: a pull credential works until revoked; a bundle downloads', async (t) => {
    await go(owner, stack.origin, 'Support');
    const creds = page.getByRole('table', { name: /Pull credentials/ });
    await creds.getByRole('row', { name: /diagnostics/ }).waitFor();
    t.match(await creds.getByRole('row', { name: /diagnostics/ }).textContent(), /none/, 'no credential yet');

    await page.getByLabel('Scope').selectOption('diagnostics');
    await page.getByLabel('Lifetime (hours)').fill('2');
    await page.getByRole('button', { name: 'Mint credential' }).click();
    await page.locator('output.secret').waitFor();
    const credential = (await page.locator('output.secret').textContent()) ?? '';
    t.match(credential, /^dpc_[\w-]+\.dps_[\w-]+$/, 'the credential is shown');
    t.ok(await page.getByRole('button', { name: 'Copy pull credential' }).isVisible(), 'a copy button');
    await creds
      .getByRole('row', { name: /diagnostics/ })
      .getByText('active')
      .waitFor();
    t.notMatch(await creds.textContent(), credential.split('.')[1]!, 'the table never shows the secret');
    await assertAccessible(t, page, 'support');
    await screenshot(page, 'support');

    const pull = () =>
      fetch(`${stack.origin}/support/diagnostics`, { headers: { authorization: `Bearer ${credential}` } });
    const ok = await pull();
    t.equal(ok.status, 200, 'the credential pulls diagnostics through the console');
    const bundle = (await ok.json()) as { kind?: string };
    t.match(bundle.kind, /^engine-support-bundle/, 'a support bundle');

    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('button', { name: 'Revoke the diagnostics credential' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByText('The diagnostics credential is revoked').waitFor();
    await creds
      .getByRole('row', { name: /diagnostics/ })
      .getByText('none')
      .waitFor();
    t.equal((await pull()).status, 401, 'refused once revoked');

    const dl = await downloadText(page, () =>
      page.getByRole('button', { name: 'Download support bundle' }).click(),
    );
    t.match(dl.name, /^coffer-support-bundle-\d+\.json$/);
    t.match((JSON.parse(dl.text) as { kind: string }).kind, /^engine-support-bundle/, 'the bundle downloads');
  });

  await t.test('account: new recovery codes sign in', async (t) => {
    await go(owner, stack.origin, 'Account');
    const facts = page.locator('dl.facts');
    t.match(await facts.textContent(), /owner@example\.org/);
    t.match(await facts.textContent(), /Roleowner/);
    t.match(await facts.textContent(), /Signed in withpasskey/);
    await assertAccessible(t, page, 'account');

    await page.getByRole('button', { name: 'Regenerate recovery codes' }).click();
    const list = page.getByRole('list', { name: 'Recovery codes' });
    await list.waitFor();
    const codes = (await list.locator('li').allTextContents()).map((c) => c.trim());
    t.equal(codes.length, 10, 'ten new codes');
    await screenshot(page, 'account');
    await page.getByLabel('I have kept these codes').check();
    await page.getByRole('button', { name: 'Confirm and continue' }).click();
    await page.getByText('The new recovery codes are active').waitFor();
    t.equal(await list.count(), 0, 'the codes are gone once confirmed');

    const fresh = await stack.persona();
    await fresh.page.goto(`${stack.origin}/`);
    await fresh.page.getByRole('tab', { name: 'Recovery code' }).click();
    await fresh.page.getByLabel('Email').fill(OWNER);
    await fresh.page.getByLabel('Recovery code').fill(codes[3]!);
    await fresh.page.getByRole('button', { name: 'Sign in with recovery code' }).click();
    await fresh.page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    t.match(
      await fresh.page.locator('.who').textContent(),
      /owner@example\.org · owner/,
      'a new code signs in',
    );
    await go(fresh, stack.origin, 'Account');
    t.match(await fresh.page.locator('dl.facts').textContent(), /Signed in withrecovery code/);
    t.same(fresh.problems, [], 'no problems in the recovery browser');
  });

  await t.test('account: the operator lists their passkey', async (t) => {
    const op = operator!;
    await go(op, stack.origin, 'Account');
    await op.page.getByRole('button', { name: 'Show my passkeys' }).click();
    const mine = op.page.getByRole('table', { name: /Passkeys registered for operator@example\.org/ });
    await mine.waitFor();
    t.equal(await mine.locator('tbody tr').count(), 1, 'one passkey');
    const row = await mine.locator('tbody tr').first().textContent();
    t.match(row, /\d{4}/, 'with the date it was added');
    t.match(row, /internal/, 'and its transports');
  });

  await t.test('members: owner-action dual control', async (t) => {
    const op = operator!;
    // A second owner, then the gate armed.
    await go(owner, stack.origin, 'Members');
    await page.getByLabel(`New role for ${OPERATOR}`).selectOption('owner');
    await page.getByRole('button', { name: `Change role of ${OPERATOR}` }).click();
    await page.getByText(`${OPERATOR} now has the owner role (was approver).`).waitFor();
    await page.getByRole('button', { name: 'Arm dual control' }).click();
    await page.getByText('Dual control is armed').waitFor();
    await page.getByRole('button', { name: 'Disarm dual control' }).waitFor();
    t.pass('the gate is armed');

    // A mint now waits for a second owner: no secret, a queued notice.
    await go(owner, stack.origin, 'Support');
    await page.getByLabel('Scope').selectOption('audit-feed');
    await page.getByRole('button', { name: 'Mint credential' }).click();
    await page.getByText('Minting the audit-feed credential is queued for a second owner').waitFor();
    t.equal(await page.locator('output.secret').count(), 0, 'no secret for the maker');

    // The maker cannot approve their own action; the second owner can, and gets the secret once.
    await go(owner, stack.origin, 'Members');
    const queue = page.getByRole('table', { name: /Owner actions/ });
    await queue.getByRole('row', { name: /Mint a pull credential/ }).waitFor();
    t.equal(
      await queue.getByRole('button', { name: /^Approve/ }).count(),
      0,
      'the maker has no approve button',
    );
    t.equal(await queue.getByRole('button', { name: 'Withdraw: Mint a pull credential' }).count(), 1);

    await op.page.reload();
    await go(op, stack.origin, 'Members');
    t.match(await op.page.locator('.who').textContent(), /operator@example\.org · owner/);
    await op.page.getByRole('button', { name: 'Approve: Mint a pull credential' }).click();
    await op.page.getByRole('dialog').getByRole('button', { name: 'Approve and carry out' }).click();
    await op.page.locator('output.secret').waitFor();
    const credential = (await op.page.locator('output.secret').textContent()) ?? '';
    t.match(credential, /^dpc_[\w-]+\.dps_[\w-]+$/, 'the approver gets the secret');
    const feed = await fetch(`${stack.origin}/support/audit-feed`, {
      headers: { authorization: `Bearer ${credential}` },
    });
    t.equal(feed.status, 200, 'the approved credential pulls the audit feed');
    await op.page.getByRole('button', { name: 'Done' }).click();
    const opQueue = op.page.getByRole('table', { name: /Owner actions/ });
    await opQueue
      .getByRole('row', { name: /Mint a pull credential/ })
      .getByText('consumed')
      .waitFor();

    // Disarming is itself queued; the second owner rejects it, and the gate stays armed.
    await page.getByRole('button', { name: 'Disarm dual control' }).click();
    await page.getByText('Disarming is queued for a second owner to approve.').waitFor();
    await op.page.reload();
    await op.page.getByRole('button', { name: 'Reject: Disarm dual control' }).click();
    await op.page.getByRole('dialog').getByRole('button', { name: 'Reject' }).click();
    await op.page.getByText('The action was rejected.').waitFor();
    await opQueue
      .getByRole('row', { name: /Disarm dual control/ })
      .getByText('rejected')
      .waitFor();
    t.ok(await op.page.getByRole('button', { name: 'Disarm dual control' }).isVisible(), 'still armed');
    await assertAccessible(t, op.page, 'members (owner-action queue)');
  });

  await t.test('phone width', async (t) => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const title of ['Audit', 'Members', 'Support', 'Account']) {
      await go(owner, stack.origin, title);
      await page.locator('main table, main dl').first().waitFor();
      await assertAccessible(t, page, `${title.toLowerCase()} (phone width)`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      t.ok(overflow <= 0, `${title}: nothing wider than the phone (${overflow}px)`);
    }
  });

  t.same(owner.problems, [], 'no CSP violation or page error for the owner');
  t.same(operator?.problems, [], 'no CSP violation or page error for the operator');
});
