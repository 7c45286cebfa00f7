// The Posture screen in Chromium against a real engine (SQLite, the local destination, no SMTP, no
// update channel, no licence): the owner sees the preflight grouped, with the local destination
// `verified` (written, read back and deleted by the engine just now) and SMTP `unconfigured`, each
// status in words and marks, evidence and remediation; the summary matches the engine's own
// preflight; "Run the preflight again" runs it again (a new report with a later check time); the
// status highlights and the licence card (no licence, with the note that it never stops a backup
// or a restore) are shown. A viewer sees the same facts and no acknowledge button. The owner's
// acknowledgement refused with 409 (answered by the browser's request routing: this engine has
// every key, so the engine cannot refuse it) names the missing key in words; then the real
// acknowledgement is kept by the engine and the screen shows it. axe finds no serious violation;
// nothing scrolls sideways at 390 px; no CSP violation or page error.
import t from 'tap';
import { noSidewaysScroll, openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
} from './helpers/stack.ts';

t.test('posture: preflight, status, licence and the set-up acknowledgement', async (t) => {
  const stack = await startStack(t);
  const owner = await stack.persona();
  const { page } = owner;
  await signInFirstOwner(owner, stack);

  const firstPreflight = page.waitForResponse(
    (r) => r.url().endsWith('/admin/preflight') && r.request().method() === 'GET',
  );
  await openScreen(owner, 'Posture');
  const firstReport = await (await firstPreflight).json();
  const preflight = page.getByRole('region', { name: 'Preflight' });
  const destination = preflight.locator('[data-item="destination:default"]');
  await destination.waitFor();
  t.equal(
    await destination.locator('[data-status]').getAttribute('data-status'),
    'verified',
    'the local destination is verified',
  );
  t.match(await destination.textContent(), /Verified/, 'the status is written in words');
  t.match(await destination.textContent(), /write, read, compare, delete/, 'with its evidence: the steps');
  const smtp = preflight.locator('[data-item="smtp"]');
  t.equal(
    await smtp.locator('[data-status]').getAttribute('data-status'),
    'unconfigured',
    'SMTP unconfigured',
  );
  t.match(await smtp.textContent(), /Not configured/, 'in words, not colour alone');
  t.match(await smtp.textContent(), /What to do: Set ENGINE_SMTP_URL/, 'with the remediation');
  t.ok(await preflight.getByRole('region', { name: 'Destinations' }).isVisible(), 'items are grouped');
  t.ok(await preflight.getByRole('region', { name: 'Keys' }).isVisible(), 'the keys have their group');
  t.equal(
    await preflight
      .locator('[data-summary="verified"]')
      .textContent()
      .then((x) => Number.parseInt(x ?? '', 10)),
    firstReport.summary.verified,
    "the summary is the engine's",
  );
  t.equal(
    await preflight.locator('[data-item]').count(),
    firstReport.items.length,
    'every item the engine reported is shown',
  );

  // Re-run: a new report from the engine, shown in place.
  const again = page.waitForResponse(
    (r) => r.url().endsWith('/admin/preflight') && r.request().method() === 'GET',
  );
  await preflight.getByRole('button', { name: 'Run the preflight again' }).click();
  const second = await (await again).json();
  t.not(second.checkedAt, firstReport.checkedAt, 'the preflight ran again');
  await preflight.getByRole('button', { name: 'Run the preflight again' }).waitFor();
  t.ok(
    await preflight.getByRole('button', { name: 'Run the preflight again' }).isEnabled(),
    're-run is usable again',
  );
  await destination.locator('[data-status="verified"]').waitFor();

  // Status highlights and the licence card.
  const status = page.getByRole('region', { name: 'Engine status' });
  t.match(await status.textContent(), /Ready to seal runsyes/, 'status highlights');
  t.match(await status.textContent(), /Mail \(SMTP\)not configured/, 'presence only');
  const licence = page.getByRole('region', { name: 'Licence' });
  await licence.locator('[data-licence-status="absent"]').waitFor();
  t.match(await licence.textContent(), /Tier in effectfree/, 'the free tier without a licence');
  t.match(
    await licence.textContent(),
    /never stops a backup, a restore or a drill/,
    'the licence is not a gate',
  );
  await assertAccessible(t, page, 'posture (owner)');
  await screenshot(page, 'posture');

  // A viewer: the same facts, no acknowledge button.
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'viewer@example.org',
    role: 'viewer',
  });
  t.equal(invite.status, 200, 'viewer invited');
  const viewer = await stack.persona({ width: 390, height: 844 });
  await viewer.page.goto(`${stack.origin}/`);
  await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: invite.body.inviteToken });
  await viewer.page.goto(`${stack.origin}/posture`);
  await viewer.page.getByRole('heading', { level: 1, name: 'Posture' }).waitFor();
  await viewer.page.locator('[data-item="destination:default"] [data-status="verified"]').waitFor();
  const viewerAck = viewer.page.getByRole('region', { name: 'Set-up acknowledgement' });
  await viewerAck.getByText('Only an owner acknowledges the set-up.').waitFor();
  t.equal(
    await viewer.page.getByRole('button', { name: 'Acknowledge set-up' }).count(),
    0,
    'no button for a viewer',
  );
  t.ok(await noSidewaysScroll(viewer.page), 'nothing scrolls sideways at 390 px');
  await assertAccessible(t, viewer.page, 'posture (viewer, phone)');

  // The owner: a refusal names the missing key in words (the browser answers it once) ...
  const ack = page.getByRole('region', { name: 'Set-up acknowledgement' });
  await page.route('**/admin/setup/acknowledge', (route) =>
    route.fulfill({
      status: 409,
      contentType: 'application/json',
      body: JSON.stringify({
        error: 'keys are not all present; set them before acknowledging',
        missing: ['ENGINE_BREAK_GLASS_PUBLIC_KEY'],
      }),
    }),
  );
  await ack.getByRole('button', { name: 'Acknowledge set-up' }).click();
  const refusal = ack.getByRole('alert');
  await refusal.waitFor();
  t.match(await refusal.textContent(), /not every key is present\. Missing: the break-glass public key/);
  await page.unroute('**/admin/setup/acknowledge');
  t.equal(
    (await stack.admin('GET', '/admin/setup-state')).body.acknowledged,
    false,
    'nothing acknowledged yet',
  );

  // ... and the real acknowledgement is kept by the engine.
  await ack.getByRole('button', { name: 'Acknowledge set-up' }).click();
  await ack.getByText(/Set-up acknowledged on .*The keys in force are the ones acknowledged\./).waitFor();
  const state = await stack.admin('GET', '/admin/setup-state');
  t.equal(state.body.acknowledged, true, 'the engine keeps the acknowledgement');
  t.equal(state.body.acknowledgement.current, true, 'for the keys in force');
  // The status region reloads after the acknowledgement lands: wait for its answer to change
  // rather than read it once (it can still say "no" for a moment).
  await status.getByText('Set-up acknowledged').waitFor();
  await page
    .waitForFunction(
      (el) => /Set-up acknowledgedyes/.test(el?.textContent ?? ''),
      await status.elementHandle(),
      {
        timeout: 10_000,
      },
    )
    .catch(() => undefined);
  t.match(await status.textContent(), /Set-up acknowledgedyes/, 'the status shows it');
  t.equal(
    await ack.getByRole('button', { name: 'Acknowledge set-up' }).count(),
    0,
    'no second acknowledgement',
  );
  const audit = await stack.admin('GET', '/admin/audit?action=setup-acknowledge');
  t.ok(
    (audit.body.events ?? audit.body.items ?? []).some(
      (e: { action: string; outcome: string }) => e.action === 'setup-acknowledge' && e.outcome === 'applied',
    ),
    'audited as applied',
  );

  // The Set-up checklist points to the Posture screen and shows the item done.
  await openScreen(owner, 'Set-up');
  const item = page.locator('li', { hasText: 'Preflight and acknowledgement' });
  await item.getByText('(done)').waitFor();
  t.ok(await item.getByRole('link', { name: 'Posture' }).isVisible(), 'the checklist links to Posture');

  t.same(owner.problems, [], 'no CSP violation or page error (owner)');
  t.same(viewer.problems, [], 'no CSP violation or page error (viewer)');
});
