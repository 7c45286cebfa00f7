// The Configuration screen in Chromium against a real engine, with two people in browsers of their
// own: the first owner (passkey) and Alice, an operator invited by the admin token who registers a
// passkey of her own.
// - the owner turns configuration approval on (step-up confirmed in place); the engine holds it on;
// - Alice edits a job on the Jobs screen: the save answers 202 and the page says it waits for
//   approval, naming the change and linking to the Configuration screen; the job is unchanged;
// - on the Configuration screen Alice sees her change "waiting for a second person" with Withdraw
//   and no Approve button, and the engine refuses her own approval (403 maker is not checker);
// - the owner approves it; the job shows the new cadence on Alice's Jobs screen;
// - the history lists the version written by Alice and approved by the owner, the chain unbroken,
//   and the version opened shows its signature verified and the configuration it recorded;
// - a second proposal from the old revision, approved by the owner, is refused in words (the job
//   moved); Alice's deletion of the job is held too and she withdraws it;
// - the owner asks to turn configuration approval off: a pending `policy-disable` change that waits
//   for another owner, shown on both screens (Alice cannot approve it); the engine keeps it on;
// - a version edited in the state store: the history shows the alarm (where, why) and the version's fault.
// axe finds no serious violation; no CSP violation or page error in either browser.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import t from 'tap';
import { confirmStepUps, noSidewaysScroll, openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
} from './helpers/stack.ts';

t.test('configuration dual control and history', async (t) => {
  const stack = await startStack(t);
  const owner = await stack.persona();
  await signInFirstOwner(owner, stack, 'owner@example.org');
  await confirmStepUps(owner.page);

  const src = join(stack.dataDir, 'source-docs');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'a.txt'), 'alpha\n');
  const created = await stack.admin('POST', '/admin/jobs', {
    id: 'docs',
    cadenceSeconds: 86400,
    source: { type: 'files', path: src },
  });
  t.equal(created.status, 200, 'a job to change');

  // Alice: an operator (job.write, job.delete), in a browser of her own.
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'alice@example.org',
    role: 'operator',
  });
  t.equal(invite.status, 200, 'alice invited as operator');
  const alice = await stack.persona();
  await alice.page.goto(`${stack.origin}/`);
  await registerInPage(alice.page, 'alice@example.org', {}, { inviteToken: invite.body.inviteToken });
  await alice.page.goto(`${stack.origin}/`);
  await alice.page.getByRole('button', { name: 'Sign out' }).waitFor();

  // The owner turns configuration approval on.
  const o = owner.page;
  await openScreen(owner, 'Configuration');
  const configPolicy = o.locator('[data-policy="config-approval"]');
  await configPolicy.getByRole('heading', { name: 'Configuration approval: off' }).waitFor();
  await assertAccessible(t, o, 'configuration (approval off)');
  await configPolicy.getByRole('button', { name: 'Turn configuration approval on' }).click();
  await configPolicy.getByText('Configuration approval is now on.').waitFor();
  await configPolicy.getByRole('heading', { name: 'Configuration approval: on' }).waitFor();
  t.match(await configPolicy.textContent(), /Set by you/, 'the panel names who set it');
  const policy = await stack.admin('GET', '/admin/config/approval-policy');
  t.equal(policy.body.configApproval.enabled, true, 'the engine holds configuration approval on');
  t.equal(policy.body.maxBatch, 10, 'the bulk cap dropped to 10');

  // Alice edits the job: the save is held for a second person.
  const a = alice.page;
  await openScreen(alice, 'Jobs');
  await a.getByRole('link', { name: 'docs', exact: true }).click();
  await a.getByRole('heading', { name: 'docs', level: 1 }).waitFor();
  await a.getByRole('button', { name: 'Edit' }).click();
  await a.getByLabel('Cadence (seconds)', { exact: true }).fill('7200');
  await a.getByRole('button', { name: 'Save changes' }).click();
  const waiting = a.getByRole('status').filter({ hasText: 'Waiting for approval.' });
  await waiting.waitFor();
  const waitingText = (await waiting.textContent()) ?? '';
  const changeId = /pending change (cc_\S+?):/.exec(waitingText)?.[1] ?? '';
  t.match(changeId, /^cc_/, 'the notice names the pending change');
  t.match(waitingText, /a second person must approve it on the Configuration screen/);
  t.equal(
    (await stack.admin('GET', '/admin/jobs')).body.jobs[0].cadenceSeconds,
    86400,
    'nothing applied yet',
  );
  await assertAccessible(t, a, 'job with a pending change');
  // A second proposal from the same revision (a new name): it will find the job moved.
  await a.getByRole('button', { name: 'Edit' }).click();
  await a.getByLabel('Name', { exact: true }).fill('Team documents');
  await a.getByRole('button', { name: 'Save changes' }).click();
  const second = a.getByRole('status').filter({ hasText: 'Waiting for approval.' });
  await second.filter({ hasNotText: changeId }).waitFor();
  const renameId = /pending change (cc_\S+?):/.exec((await second.textContent()) ?? '')?.[1] ?? '';
  t.match(renameId, /^cc_/, 'a second pending change');
  await waiting.getByRole('link', { name: 'Configuration' }).click();
  await a.getByRole('heading', { name: 'Configuration', level: 1 }).waitFor();
  const aliceRow = a.locator(`tr[data-change-id="${changeId}"]`);
  await aliceRow.waitFor();
  t.match(await aliceRow.textContent(), /Waiting for a second person/, 'the proposer sees it waits');
  t.match(await aliceRow.textContent(), /Cadence \(cadenceSeconds\)/, 'the changed field is named');
  t.match(await aliceRow.textContent(), /you \(alice@example\.org\)/, 'proposed by her');
  t.equal(
    await aliceRow.getByRole('button', { name: /^Approve/ }).count(),
    0,
    'no approve button for her own',
  );
  t.equal(
    await aliceRow.getByRole('button', { name: 'Withdraw job change of docs' }).count(),
    1,
    'she may withdraw',
  );
  await assertAccessible(t, a, 'configuration (proposer)');
  await screenshot(a, 'configuration-proposer');
  const own = await a.evaluate(async (id) => {
    const who = await (await fetch('/admin/whoami')).json();
    const r = await fetch(`/admin/config/changes/${id}/approve`, {
      method: 'POST',
      headers: { 'x-engine-csrf': who.csrfToken, 'content-type': 'application/json' },
      body: '{}',
    });
    return { status: r.status, body: await r.json() };
  }, changeId);
  t.equal(own.status, 403, 'the engine refuses her own approval');
  t.match(own.body.error, /^maker is not checker/);

  // The owner approves it.
  await o.getByRole('button', { name: 'Refresh' }).click();
  const ownerRow = o.locator(`tr[data-change-id="${changeId}"]`);
  await ownerRow.waitFor();
  t.match(await ownerRow.textContent(), /alice@example\.org/, 'the approver sees who proposed it');
  await assertAccessible(t, o, 'configuration (approver)');
  await screenshot(o, 'configuration-approver');
  await ownerRow.getByRole('button', { name: 'Approve job change of docs' }).click();
  await o
    .getByRole('status')
    .filter({ hasText: /^Approved and applied: job change of docs \(configuration version \d+\)\.$/ })
    .waitFor();
  const job = (await stack.admin('GET', '/admin/jobs')).body.jobs[0];
  t.equal(job.cadenceSeconds, 7200, 'the engine applied the change');
  await o.locator(`tr[data-change-id="${changeId}"][data-status="applied"]`).waitFor();

  // The rename proposed from the same revision now finds the job moved: refused, said in words.
  const renameRow = o.locator(`tr[data-change-id="${renameId}"]`);
  await renameRow.getByRole('button', { name: 'Approve job change of docs' }).click();
  const moved = o.locator(`[data-decision="${renameId}"]`);
  await moved.waitFor();
  t.match(
    await moved.textContent(),
    /^Not approved \(job change of docs\): The job moved since the change was proposed \(revision 1 is now 2; changed: cadenceSeconds\)\. The change is refused/,
    'the refusal names what moved',
  );
  t.equal(
    (await stack.admin('GET', '/admin/jobs')).body.jobs[0].name,
    undefined,
    'the rename was not applied',
  );

  // Alice sees the job changed.
  await openScreen(alice, 'Jobs');
  await a.locator('tr[data-job-id="docs"]').getByText('every 2 hours').waitFor();
  t.pass('the job shows the approved cadence');

  // The history: the version written by Alice, approved by the owner, the chain unbroken.
  await openScreen(alice, 'Configuration');
  await a.locator('[data-chain="ok"]').waitFor();
  const history = await stack.admin('GET', '/admin/config/history');
  t.equal(history.body.chain.ok, true, 'the engine finds the chain unbroken');
  const newest = history.body.versions[0];
  t.equal(newest.changeId, changeId, 'the newest version is the approved change');
  const versionRow = a.locator(`tr[data-version-id="${newest.id}"]`);
  const rowText = (await versionRow.textContent()) ?? '';
  t.match(rowText, /Job change: docs/);
  t.match(rowText, /you \(alice@example\.org\)/, 'written by Alice');
  t.match(rowText, /owner@example\.org/, 'approved by the owner');
  t.match(rowText, /verified/, 'its signature verified');
  t.match(
    (await a.locator('[data-chain="ok"]').textContent()) ?? '',
    new RegExp(`head version ${newest.id}`),
    'the chain head is the newest version',
  );
  await versionRow.getByRole('button', { name: `Open version ${newest.id}` }).click();
  const dialog = a.getByRole('dialog', { name: `Configuration version ${newest.id}` });
  await dialog.getByText(/^Verified:/).waitFor();
  t.match(await dialog.locator(`[data-config-of="${newest.id}"]`).textContent(), /"cadenceSeconds": 7200/);
  await assertAccessible(t, a, 'configuration version');
  await dialog.getByRole('button', { name: 'Close' }).click();

  // A deletion is held too; Alice withdraws it.
  await openScreen(alice, 'Jobs');
  await a.getByRole('link', { name: 'docs', exact: true }).click();
  await a.getByRole('button', { name: 'Delete' }).click();
  await a
    .getByRole('dialog', { name: 'Delete job docs?' })
    .getByRole('button', { name: 'Delete job' })
    .click();
  const held = a.getByRole('status').filter({ hasText: 'Deleting job docs is pending change' });
  await held.waitFor();
  const deleteId = /pending change (cc_\S+?):/.exec((await held.textContent()) ?? '')?.[1] ?? '';
  t.match(deleteId, /^cc_/, 'the deletion waits for approval');
  t.equal((await stack.admin('GET', '/admin/jobs')).body.jobs.length, 1, 'the job is still there');
  await held.getByRole('link', { name: 'Configuration' }).click();
  await a.getByRole('button', { name: 'Withdraw job deletion of docs' }).click();
  await a.locator(`[data-decision="${deleteId}"]`).getByText('Withdrawn: job deletion of docs.').waitFor();
  const withdrawn = (await stack.admin('GET', '/admin/config/changes')).body.changes.find(
    (c: { id: string }) => c.id === deleteId,
  );
  t.equal(withdrawn?.status, 'rejected', 'the engine dropped the withdrawn deletion');

  // Turning approval off waits for another owner.
  await o.getByRole('button', { name: 'Refresh' }).click();
  await configPolicy.getByRole('button', { name: 'Turn configuration approval off' }).click();
  await configPolicy.getByText(/^Not turned off yet: another owner must approve/).waitFor();
  await configPolicy.getByText(/Turning it off is waiting for another owner/).waitFor();
  const lowering = o.locator('tr[data-kind="policy-disable"]');
  t.match(await lowering.textContent(), /Waiting for a second person: another owner approves it/);
  t.equal(
    await lowering.getByRole('button', { name: /^Approve/ }).count(),
    0,
    'the owner cannot approve their own',
  );
  t.equal(
    (await stack.admin('GET', '/admin/config/approval-policy')).body.configApproval.enabled,
    true,
    'the engine keeps it on',
  );
  await a.getByRole('button', { name: 'Refresh' }).click();
  const aliceLowering = a.locator('tr[data-kind="policy-disable"]');
  await aliceLowering.waitFor();
  t.match(await aliceLowering.textContent(), /Waiting for another owner/, 'an operator cannot approve it');
  t.equal(await aliceLowering.getByRole('button').count(), 0, 'and has no button for it');

  // At phone width nothing scrolls sideways.
  await a.setViewportSize({ width: 390, height: 844 });
  t.ok(await noSidewaysScroll(a), 'no sideways scroll at 390 px');
  await assertAccessible(t, a, 'configuration (390 px)');

  // Someone edits the first version in the state store: the history raises the alarm.
  const db = new DatabaseSync(join(stack.dataDir, 'engine', 'state.sqlite'));
  db.exec('PRAGMA busy_timeout = 10000');
  const key = 'config.version.000000000001';
  const stored = JSON.parse(
    (db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as { value: string }).value,
  );
  stored.record.target = 'tampered';
  db.prepare('UPDATE settings SET value = ? WHERE key = ?').run(JSON.stringify(stored), key);
  db.close();
  await a.getByRole('button', { name: 'Refresh' }).click();
  const alarm = a.locator('[data-chain="broken"]');
  await alarm.waitFor();
  t.equal(await alarm.getAttribute('role'), 'alert', 'the break is an alert');
  t.match(
    await alarm.textContent(),
    /^The configuration history is broken at version 1: a version's fields were edited after it was written \(hash-mismatch\)/,
    'where and why, in words',
  );
  t.match(
    await a.locator('tr[data-version-id="1"]').textContent(),
    /fails: hash-mismatch/,
    'the edited version fails its own check',
  );

  t.same(owner.problems, [], 'no CSP violation or page error (owner)');
  t.same(alice.problems, [], 'no CSP violation or page error (alice)');
});
