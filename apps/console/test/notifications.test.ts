// The Notifications screen in Chromium against a real engine that delivers to a real HTTPS
// receiver on loopback (a throwaway CA the engine trusts through ENGINE_NOTIFY_CA_FILE):
// - an owner adds a webhook channel through the form: an `http://` URL is refused at save time and
//   the guard's message is shown next to the URL field (nothing is written); with https, "allow a
//   private target" ticked and a signing secret, the channel is added, listed by its origin with
//   the secret shown as "set", and the two rules the engine creates for a first channel are shown;
// - "Send test" reaches the receiver (`event: notification-test`, HMAC signature verifying with the
//   secret), the row says accepted and the delivery history lists the test record;
// - editing the name with the secret left blank keeps the secret: a second test send still
//   carries a signature that verifies, to the same URL path;
// - a rule for one job with a daily digest is added and listed (and later deleted, confirmed);
// - a run failing on an armed destination fault makes the engine deliver `backup-failure` for that
//   job to the receiver, and the refreshed history shows it, newest first as the engine keeps it;
// - disabling the channel flags every rule as delivering nowhere (as the engine reports); enabling
//   it clears the flag;
// - an operator (invited, own browser) sees the screen and the add form without the private-target
//   switch; a viewer has no Notifications link and the path is "Not here".
// axe finds no serious violation on the screen (laptop and 390 px, where nothing scrolls
// sideways) and on the add form; no CSP violation or page error in any browser.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { makeTestPki, tempDir } from '@coffer/testkit';
import t from 'tap';
import { confirmStepUps, noSidewaysScroll, openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
  triggerRun,
} from './helpers/stack.ts';

const SECRET = 'whsec-console-e2e-signing-secret-0123';
const LONG = { timeout: 60_000 };

interface Hit {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  // biome-ignore lint/suspicious/noExplicitAny: the receiver parses whatever the engine sent
  json: any;
}

/** An HTTPS receiver on 127.0.0.1 that records every request and answers 202. */
async function receiver(t: { teardown(fn: () => unknown): void }, pki: { cert: string; key: string }) {
  const hits: Hit[] = [];
  const server = createServer({ cert: pki.cert, key: pki.key }, async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let json: unknown = null;
    try {
      json = JSON.parse(body);
    } catch {
      // not JSON
    }
    hits.push({ path: req.url ?? '', headers: req.headers, body, json });
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { hits, port: (server.address() as AddressInfo).port };
}

/** The receiver side of docs/notifications.md "Webhook signature". */
function signatureVerifies(secret: string, rawBody: string, header: unknown): boolean {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(typeof header === 'string' ? header : '');
  if (!m || Math.abs(Math.floor(Date.now() / 1000) - Number(m[1])) > 300) return false;
  const want = createHmac('sha256', secret).update(`${m[1]}.${rawBody}`).digest();
  return timingSafeEqual(want, Buffer.from(m[2]!, 'hex'));
}

async function until<T>(what: string, fn: () => T | undefined, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

t.test('notifications screen', async (t) => {
  const root = tempDir(t, 'coffer-console-notify-');
  const pki = makeTestPki(root, { caName: 'coffer console test CA' });
  const hook = await receiver(t, pki);
  const stack = await startStack(t, { env: { ENGINE_NOTIFY_CA_FILE: pki.caFile } });
  const owner = await stack.persona();
  const { page } = owner;
  await signInFirstOwner(owner, stack);
  await confirmStepUps(page);
  const engineChannels = async () => (await stack.admin('GET', '/admin/notify/channels')).body;

  await openScreen(owner, 'Notifications');
  await page.getByText('No channels yet.').waitFor();
  await assertAccessible(t, page, 'notifications (empty)');

  // Add a webhook channel: plain http is refused by the URL guard, shown next to the URL field.
  await page.getByRole('button', { name: 'Add channel' }).click();
  await page.getByRole('heading', { name: 'Add a channel' }).waitFor();
  t.equal(await page.getByLabel('Kind').inputValue(), 'webhook', 'webhook by default');
  const url = page.getByLabel('URL', { exact: true });
  await page.getByLabel('Name', { exact: true }).fill('Ops hook');
  await url.fill(`http://localhost:${hook.port}/hook`);
  await page.getByLabel('Signing secret (optional)').fill(SECRET);
  const privateSwitch = page.getByLabel('Allow a private target');
  await privateSwitch.check();
  t.match(
    await page.locator(`[id="${await privateSwitch.getAttribute('aria-describedby')}"]`).textContent(),
    /private, loopback, link-local and cloud metadata addresses/,
    'the private-target switch says what it allows',
  );
  await page.getByRole('button', { name: 'Add channel' }).click();
  await page.getByRole('alert').filter({ hasText: 'only https is allowed' }).waitFor();
  t.equal(await url.getAttribute('aria-invalid'), 'true', 'the URL field is marked invalid');
  const describedBy = (await url.getAttribute('aria-describedby')) ?? '';
  t.match(
    await page.locator(`[id="${describedBy.split(' ')[0]}"]`).textContent(),
    /Channel url refused: only https is allowed/,
    "the guard's refusal is shown at the URL field",
  );
  t.same((await engineChannels()).channels, [], 'nothing was written');
  await assertAccessible(t, page, 'add-channel form with a refusal');

  await url.fill(`https://localhost:${hook.port}/hook`);
  await page.getByRole('button', { name: 'Add channel' }).click();
  await page.getByRole('status').filter({ hasText: 'Channel Ops hook is added.' }).waitFor();
  const auto = page.getByRole('region', { name: 'Rules created automatically' });
  await auto.waitFor();
  t.match(await auto.textContent(), /rule_backup-failure: backup-failure, global.*critical and above/);
  t.match(await auto.textContent(), /rule_backup-stale: backup-stale, global.*warning and above/);
  const rules = page.getByRole('table', { name: 'Notification rules' });
  for (const id of ['rule_backup-failure', 'rule_backup-stale'])
    await rules.getByRole('row', { name: new RegExp(id) }).waitFor();
  t.pass('the two automatic rules are listed');
  const channels = page.getByRole('table', { name: 'Notification channels' });
  const row = channels.getByRole('row', { name: /Ops hook/ });
  t.match(await row.textContent(), new RegExp(`https://localhost:${hook.port}`), 'the origin is shown');
  t.match(await row.textContent(), /signing secret: set/, 'the secret is shown as set');
  t.match(await row.textContent(), /private target allowed/);
  t.notMatch(await channels.textContent(), /\/hook|whsec/, 'no URL path or secret on the page');
  const stored = (await engineChannels()).channels[0];
  t.match(stored, {
    name: 'Ops hook',
    kind: 'webhook',
    allowPrivateTarget: true,
    signingSecret: { set: true },
  });

  // Send test: the receiver gets the test line, signed; the row says accepted; the history lists it.
  await row.getByRole('button', { name: 'Send test to Ops hook' }).click();
  await row.getByRole('status').filter({ hasText: 'Test accepted (202)' }).waitFor();
  t.equal(hook.hits.length, 1, 'one request reached the receiver');
  const first = hook.hits[0]!;
  t.equal(first.path, '/hook');
  t.match(first.json, { event: 'notification-test', severity: 'info', test: true }, 'the test payload');
  t.ok(signatureVerifies(SECRET, first.body, first.headers['x-coffer-signature']), 'signed with the secret');
  const history = page.getByRole('table', { name: 'Notification deliveries, newest first' });
  const testRow = history.getByRole('row').filter({ hasText: 'notification-test' }).first();
  await testRow.waitFor();
  t.match(await testRow.textContent(), /Ops hook.*accepted.*202.*test/, 'the history has the test send');

  // Edit the name with the secret left blank: the secret (and the URL) are kept.
  await row.getByRole('button', { name: 'Edit Ops hook' }).click();
  await page.getByRole('heading', { name: 'Edit channel Ops hook' }).waitFor();
  t.match(
    await page.getByText(/A signing secret is set\. Leave blank to keep/).textContent(),
    /keep the one stored/,
    'the form says a blank secret is kept',
  );
  t.equal(await page.getByLabel('Signing secret (optional)').inputValue(), '', 'the secret is not shown');
  await page.getByLabel('Name', { exact: true }).fill('Ops hook (edited)');
  await page.getByRole('button', { name: 'Save channel' }).click();
  await page.getByRole('status').filter({ hasText: 'Channel Ops hook (edited) is saved.' }).waitFor();
  const edited = channels.getByRole('row', { name: /Ops hook \(edited\)/ });
  await edited.getByRole('button', { name: 'Send test to Ops hook (edited)' }).click();
  await edited.getByRole('status').filter({ hasText: 'Test accepted (202)' }).waitFor();
  t.equal(hook.hits.length, 2, 'a second test send');
  const second = hook.hits[1]!;
  t.equal(second.path, '/hook', 'the URL was kept');
  t.ok(
    signatureVerifies(SECRET, second.body, second.headers['x-coffer-signature']),
    'the signature header is still sent, with the kept secret',
  );

  // A rule for one job with a daily digest.
  const src = join(stack.dataDir, 'source');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'a.txt'), 'alpha\n');
  const job = (id: string, name: string) =>
    stack.admin('POST', '/admin/jobs', {
      id,
      name,
      cadenceSeconds: 3600,
      source: { type: 'files', path: src },
    });
  t.equal((await job('reports', 'Reports')).status, 200, 'a job for the rule');
  await page.getByRole('button', { name: 'Add rule' }).click();
  await page.getByRole('heading', { name: 'Add a rule' }).waitFor();
  await page.getByRole('option', { name: 'Job Reports (reports)' }).waitFor({ state: 'attached' });
  await page.getByLabel('Scope', { exact: true }).selectOption('reports');
  await page.getByLabel('Digest', { exact: true }).selectOption('daily');
  await page.getByLabel('Only the events chosen below').check();
  await page.getByLabel('backup-success (info)').check();
  t.ok(
    await page.getByRole('checkbox', { name: 'Ops hook (edited)', exact: true }).isChecked(),
    'the only channel is ticked',
  );
  await assertAccessible(t, page, 'add-rule form');
  await page.getByRole('button', { name: 'Add rule' }).click();
  await page
    .getByRole('status')
    .filter({ hasText: /^Rule rule_\S+ is saved\.$/ })
    .waitFor();
  const jobRule = rules.getByRole('row').filter({ hasText: 'job reports' });
  await jobRule.waitFor();
  t.match(await jobRule.textContent(), /job reports.*info.*backup-success.*Ops hook \(edited\).*daily.*ok/);
  const engineRules = (await engineChannels()).rules;
  t.match(
    engineRules.find((r: { scope: unknown }) => typeof r.scope === 'object'),
    { scope: { job: 'reports' }, events: ['backup-success'], digest: 'daily', minSeverity: 'info' },
    'the engine has the rule as shown',
  );

  // A failing run: the engine sends backup-failure to the channel; the history shows it.
  const reportsOk = async () => {
    const runs = (await stack.admin('GET', '/admin/history?id=reports')).body.runs ?? [];
    return runs.some((r: { status: string }) => r.status === 'ok');
  };
  for (let i = 0; i < 300 && !(await reportsOk()); i++) await new Promise((r) => setTimeout(r, 100));
  t.ok(await reportsOk(), 'the job of the rule ran ok before the fault is armed');
  const armed = await stack.admin('POST', '/admin/test-fault/arm', {
    target: 'destination',
    fault: 'access-denied',
    times: 0,
  });
  t.equal(armed.status, 200, 'the destination refuses every write');
  t.equal((await job('docs', 'Team docs')).status, 200, 'a job to fail');
  t.ok(await triggerRun(stack, 'docs'), 'a run of it started (by the trigger or the tick)');
  const failure = await until(
    'backup-failure at the receiver',
    () => hook.hits.find((h) => h.json?.event === 'backup-failure' && h.json?.job?.id === 'docs'),
    LONG.timeout,
  );
  t.match(failure.json, { severity: 'critical', test: false, job: { id: 'docs', name: 'Team docs' } });
  t.ok(signatureVerifies(SECRET, failure.body, failure.headers['x-coffer-signature']), 'signed too');
  await page.getByRole('button', { name: 'Refresh history' }).click();
  const failRow = history.getByRole('row').filter({ hasText: 'backup-failure' }).first();
  await failRow.waitFor();
  t.match(await failRow.textContent(), /backup-failure.*critical.*Ops hook \(edited\).*accepted/);
  t.notMatch(await failRow.textContent(), /test/, 'not a test send');
  const times = await history.locator('tbody tr th').allTextContents();
  t.ok(times.length >= 3, 'three deliveries at least');
  const recs = (await stack.admin('GET', '/admin/notify/history')).body.records as { seq: number }[];
  const shownSeqs = (
    await history.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-seq')))
  ).map(Number);
  t.same(shownSeqs, recs.map((r) => r.seq).slice(0, 50), "the engine's records, in its order");
  t.same(
    shownSeqs,
    [...shownSeqs].sort((a, b) => b - a),
    'newest first',
  );

  await assertAccessible(t, page, 'notifications (laptop)');
  await screenshot(page, 'notifications');

  // Disable the channel: every rule naming it delivers nowhere, and the screen says so; enable again.
  await row.getByRole('button', { name: 'Disable Ops hook (edited)' }).click();
  await page.getByRole('status').filter({ hasText: 'Channel Ops hook (edited) is disabled.' }).waitFor();
  await page.getByRole('alert').filter({ hasText: '3 rules deliver nowhere' }).waitFor();
  t.equal(
    await rules.getByRole('row').filter({ hasText: 'delivering nowhere' }).count(),
    3,
    'each rule is flagged as delivering nowhere',
  );
  t.equal((await engineChannels()).nowhere.length, 3, 'as the engine reports');
  await page.getByRole('button', { name: 'Enable Ops hook (edited)' }).click();
  await page.getByRole('status').filter({ hasText: 'Channel Ops hook (edited) is enabled.' }).waitFor();
  await page.getByRole('alert').filter({ hasText: 'deliver nowhere' }).waitFor({ state: 'detached' });
  t.same((await engineChannels()).nowhere, [], 'delivering again');

  // Delete the per-job rule, with confirmation.
  const ruleId = (await jobRule.locator('th').textContent()) ?? '';
  await jobRule.getByRole('button', { name: `Delete rule ${ruleId}` }).click();
  await page
    .getByRole('dialog', { name: `Delete the rule ${ruleId}?` })
    .getByRole('button', { name: 'Delete rule' })
    .click();
  await page
    .getByRole('status')
    .filter({ hasText: `Rule ${ruleId} was deleted.` })
    .waitFor();
  t.equal(await rules.getByRole('row').filter({ hasText: 'job reports' }).count(), 0, 'the rule is gone');
  t.equal((await engineChannels()).rules.length, 2, 'and gone from the engine');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole('heading', { level: 1, name: 'Notifications' }).waitFor();
  t.ok(await noSidewaysScroll(page), 'no sideways scroll at 390 px');
  await assertAccessible(t, page, 'notifications (390 px)');
  await page.getByRole('button', { name: 'Add channel' }).click();
  await page.getByRole('heading', { name: 'Add a channel' }).waitFor();
  t.ok(await noSidewaysScroll(page), 'the form fits at 390 px');
  await assertAccessible(t, page, 'add-channel form (390 px)');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.setViewportSize({ width: 1280, height: 860 });

  // An operator (notify.config, not owner): the screen, without the private-target switch.
  const invite = async (email: string, role: string) => {
    const r = await stack.admin('POST', '/admin/roles/invite', { email, role });
    t.equal(r.status, 200, `${role} invited`);
    const persona = await stack.persona();
    await persona.page.goto(`${stack.origin}/`);
    await registerInPage(persona.page, email, {}, { inviteToken: r.body.inviteToken });
    await persona.page.goto(`${stack.origin}/`);
    await persona.page.getByRole('button', { name: 'Sign out' }).waitFor();
    return persona;
  };
  const operator = await invite('operator@example.org', 'operator');
  await openScreen(operator, 'Notifications');
  const op = operator.page;
  await op
    .getByRole('table', { name: 'Notification channels' })
    .getByRole('row', { name: /Ops hook/ })
    .waitFor();
  await op.getByRole('button', { name: 'Add channel' }).click();
  await op.getByRole('heading', { name: 'Add a channel' }).waitFor();
  t.equal(
    await op.getByLabel('Allow a private target').count(),
    0,
    'no private-target switch for an operator',
  );
  t.equal(await op.getByText('Owners only.').count(), 0);
  await op.getByRole('button', { name: 'Cancel' }).click();
  await op.getByRole('button', { name: 'Edit Ops hook (edited)' }).click();
  await op.getByRole('heading', { name: 'Edit channel Ops hook (edited)' }).waitFor();
  t.equal(await op.getByLabel('Allow a private target').count(), 0, 'nor when editing');
  await assertAccessible(t, op, 'notifications (operator)');
  t.same(operator.problems, [], "no CSP violation or page error in the operator's browser");
  await operator.context.close();

  // A viewer: no Notifications link, and the path is not theirs.
  const viewer = await invite('viewer@example.org', 'viewer');
  const nav = viewer.page.getByRole('navigation', { name: 'Main' });
  await nav.getByRole('link', { name: 'Overview' }).waitFor();
  t.equal(
    await nav.getByRole('link', { name: 'Notifications' }).count(),
    0,
    'no Notifications link for a viewer',
  );
  await viewer.page.goto(`${stack.origin}/notifications`);
  await viewer.page.getByRole('heading', { name: 'Not here' }).waitFor();
  t.same(viewer.problems, [], "no CSP violation or page error in the viewer's browser");
  await viewer.context.close();

  t.same(owner.problems, [], "no CSP violation or page error in the owner's browser");
});
