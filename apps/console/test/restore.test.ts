// The Restore wizard and the Approvals screen in Chromium against a real engine: a files job is
// backed up (a real run), then (1) the owner dry-runs a restore into a directory under the
// engine's restore roots, reviews the plan (counts, bytes, plan hash, deadline), applies it and
// follows it to the end, and the files are on disk byte for byte; a target outside the roots is
// shown as a refusal with nothing to apply; (2) with approval turned on (through the Approvals
// screen), the owner requests a restore, a second person (an invited approver with a passkey of
// their own, in a second browser context at phone width) sees the pending request with its plan
// and approves it, and the requester applies; another request is rejected with a reason and
// nothing is written; (3) a pending request is withdrawn by its requester, and a running apply is
// cancelled; a viewer gets the plan but no request, apply or approval action. axe on every step
// and on the approvals screen (phone width too); no page error or CSP violation.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Page } from 'playwright-core';
import t from 'tap';
import {
  assertAccessible,
  registerInPage,
  type Stack,
  screenshot,
  signInFirstOwner,
  startStack,
  triggerRun,
} from './helpers/stack.ts';

const FILES: Record<string, Buffer> = {
  'readme.txt': Buffer.from('Coffer restore end to end\n'),
  'docs/report.bin': Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 31 + 7) % 251)),
  'docs/deep/notes.md': Buffer.from('# notes\n\n- one\n- two\n'),
};
const BIG_FILES = 8000;
const TOTAL_BYTES = Object.values(FILES).reduce((n, b) => n + b.length, 0);

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p).split('\\').join('/')] = sha(readFileSync(p));
    }
  };
  walk(dir);
  return out;
}

async function backedUpJob(stack: Stack, id: string, files: Record<string, Buffer>): Promise<string> {
  const src = join(stack.dataDir, `source-${id}`);
  for (const [name, bytes] of Object.entries(files)) {
    mkdirSync(join(src, name, '..'), { recursive: true });
    writeFileSync(join(src, name), bytes);
  }
  const job = await stack.admin('POST', '/admin/jobs', {
    id,
    cadenceSeconds: 86_400,
    source: { type: 'files', path: src },
  });
  if (job.status !== 200) throw new Error(`job upsert ${job.status} ${JSON.stringify(job.body)}`);
  const runId = await triggerRun(stack, id);
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const h = await stack.admin('GET', `/admin/history?id=${id}`);
    const run = (h.body.runs as { runId: string; status: string }[]).find((r) => r.runId === runId);
    if (run?.status === 'ok') return runId;
    if (run && run.status !== 'running') throw new Error(`run ended ${run.status}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the run did not finish');
}

/** No sideways scrolling of the page (tables scroll inside their own wrapper). */
const fitsWidth = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth <= document.documentElement.clientWidth);

const stepHeading = (page: Page, n: number) =>
  page.getByRole('heading', { name: new RegExp(`^Step ${n} of 4`) });

/** Steps 1 and 2 of the wizard up to the plan: job, run, target directory, include prefixes. */
async function planRestore(
  page: Page,
  origin: string,
  o: { job: string; runId: string; target: string; include?: string },
): Promise<string> {
  await page.goto(`${origin}/restore`);
  await stepHeading(page, 1).waitFor();
  await page.getByLabel('Job', { exact: true }).selectOption(o.job);
  await page.getByLabel('Run', { exact: true }).selectOption(o.runId);
  await page.getByRole('button', { name: 'Next: what to restore' }).click();
  await stepHeading(page, 2).waitFor();
  await page.getByLabel('Include (prefixes, one per line)').fill(o.include ?? '');
  await page.getByLabel('Target directory').fill(o.target);
  await page.getByRole('button', { name: 'Run the dry run' }).click();
  await stepHeading(page, 3).waitFor();
  const hash = (await page.getByTestId('plan-hash').locator('code').textContent()) ?? '';
  return hash;
}

async function applyFromPlan(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Apply restore…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Apply this restore?' });
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Apply now' }).click();
  await stepHeading(page, 4).waitFor();
}

t.test('restore wizard, approvals with two people, rejection, withdrawal and cancel', async (t) => {
  const stack = await startStack(t);
  // A bigger job (many small files), so an apply runs long enough to be cancelled from the UI.
  const many: Record<string, Buffer> = {};
  for (let i = 0; i < BIG_FILES; i++) many[`d${i % 40}/f${i}.txt`] = Buffer.from(`file ${i}\n`.repeat(40));
  const [runId, bigRunId] = await Promise.all([
    backedUpJob(stack, 'docs', FILES),
    backedUpJob(stack, 'many', many),
  ]);
  const source = tree(join(stack.dataDir, 'source-docs'));

  const owner = await stack.persona();
  await signInFirstOwner(owner, stack);
  const page = owner.page;

  // ---- (1) dry run, apply, follow to the end, files on disk byte for byte ----
  await page.getByRole('link', { name: 'Restore' }).click();
  await page.getByRole('heading', { name: 'Restore', level: 1 }).waitFor();
  await stepHeading(page, 1).waitFor();
  await assertAccessible(t, page, 'restore step 1 (job and run)');
  await page.getByLabel('Job', { exact: true }).selectOption('docs');
  await page.getByLabel('Run', { exact: true }).selectOption(runId);
  t.match(
    await page.getByLabel('Run', { exact: true }).locator('option:checked').textContent(),
    /3 records/,
    'the run is shown with its record count',
  );
  await page.getByRole('button', { name: 'Next: what to restore' }).click();
  await stepHeading(page, 2).waitFor();
  t.equal(
    await page.evaluate(() => document.activeElement?.textContent),
    'Step 2 of 4: What and where',
    'the new step’s heading takes the focus',
  );
  const plainDir = join(stack.restoreRoot, 'plain');
  await page.getByLabel('Target directory').fill(plainDir);
  await assertAccessible(t, page, 'restore step 2 (what and where)');
  await page.getByRole('button', { name: 'Run the dry run' }).click();
  await stepHeading(page, 3).waitFor();
  t.equal(await page.getByTestId('plan-writes').textContent(), '3', 'the plan counts three records');
  t.match(
    await page.getByTestId('plan-bytes').textContent(),
    `(${TOTAL_BYTES.toLocaleString('en-US')} bytes)`,
    'the plan shows the bytes to write',
  );
  const plainHash = (await page.getByTestId('plan-hash').locator('code').textContent()) ?? '';
  t.match(plainHash, /^sha384:[0-9a-f]{96}$/, 'the plan hash is shown in full');
  await page.getByText('Apply before').waitFor();
  for (const name of Object.keys(FILES)) await page.getByRole('cell', { name, exact: true }).waitFor();
  await page.getByText(/Approval is off on this engine/).waitFor();
  await assertAccessible(t, page, 'restore step 3 (plan)');
  await screenshot(page, 'restore-plan');
  t.notOk(existsSync(plainDir), 'a dry run writes nothing');

  await applyFromPlan(page);
  await page.getByTestId('apply-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 60_000 });
  await page.getByText(/Restore finished: 3 records/).waitFor();
  t.match(await page.getByTestId('receipt').textContent(), /Written3 of 3/, 'the receipt counts the writes');
  await assertAccessible(t, page, 'restore step 4 (apply)');
  t.same(tree(plainDir), source, 'every file is restored byte for byte');

  // A refusal: a point in time finds the run; a target outside the restore roots is shown as the
  // apply's refusal, and nothing can be applied from that plan.
  await page.getByRole('button', { name: 'Start another restore' }).click();
  await stepHeading(page, 1).waitFor();
  await page.getByLabel('Job', { exact: true }).selectOption('docs');
  await page.getByLabel('The latest successful run at a time').check();
  const later = new Date(Date.now() + 3_600_000);
  const local = new Date(later.getTime() - later.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
  await page.getByLabel('Time', { exact: true }).fill(local);
  await page.getByRole('button', { name: 'Find the run' }).click();
  await page.getByText(new RegExp(`Found: .*${runId}`)).waitFor();
  await assertAccessible(t, page, 'restore step 1 (point in time)');
  const earlier = new Date(Date.now() - 86_400_000 * 400);
  await page
    .getByLabel('Time', { exact: true })
    .fill(new Date(earlier.getTime() - earlier.getTimezoneOffset() * 60_000).toISOString().slice(0, 19));
  await page.getByRole('button', { name: 'Find the run' }).click();
  await page.getByText(/No successful run at or before/).waitFor();
  t.ok(
    await page.getByRole('button', { name: 'Next: what to restore' }).isDisabled(),
    'no run, no next step',
  );
  await page.getByLabel('Time', { exact: true }).fill(local);
  await page.getByRole('button', { name: 'Find the run' }).click();
  await page.getByText(new RegExp(`Found: .*${runId}`)).waitFor();
  await page.getByRole('button', { name: 'Next: what to restore' }).click();
  await stepHeading(page, 2).waitFor();
  const outside = join(stack.dataDir, 'outside-the-roots');
  await page.getByLabel('Target directory').fill(outside);
  await page.getByRole('button', { name: 'Run the dry run' }).click();
  await stepHeading(page, 3).waitFor();
  await page.getByRole('alert').filter({ hasText: 'An apply of this plan would be refused' }).waitFor();
  t.match(
    await page.getByRole('alert').filter({ hasText: 'refused' }).textContent(),
    /ERR_RESTORE_OUTSIDE_ROOTS/,
    'the refusal names its reason',
  );
  t.equal(await page.getByRole('button', { name: 'Apply restore…' }).count(), 0, 'no apply button');

  // ---- (3, first half) cancel a running apply (the receipt says cancelled; what was written stays) ----
  const cancelDir = join(stack.restoreRoot, 'cancelled');
  await planRestore(page, stack.origin, { job: 'many', runId: bigRunId, target: cancelDir });
  t.equal(await page.getByTestId('plan-writes').textContent(), String(BIG_FILES));
  await applyFromPlan(page);
  await page.getByRole('button', { name: 'Cancel apply' }).click();
  await page.getByTestId('apply-status').filter({ hasText: 'cancelled' }).waitFor({ timeout: 60_000 });
  await page.getByText(/Restore cancelled: /).waitFor();
  const receiptText = (await page.getByTestId('receipt').textContent()) ?? '';
  const written = Number(/Written(\d+) of/.exec(receiptText)?.[1]);
  t.ok(written < BIG_FILES, `the apply stopped early (${written} of ${BIG_FILES} written)`);
  const onDisk = existsSync(cancelDir)
    ? Object.keys(tree(cancelDir)).filter((n) => !/\.coffer-[0-9a-f]+\.tmp$/.test(n)).length
    : 0;
  t.ok(
    onDisk >= written && onDisk < BIG_FILES,
    `the records written before the cancel stay (${onDisk} on disk)`,
  );
  t.equal(await page.getByRole('button', { name: 'Cancel apply' }).count(), 0, 'nothing left to cancel');

  // ---- (2) approval with two people ----
  // The owner turns approval on through the Approvals screen (no delay, so the test need not wait).
  await page.getByRole('link', { name: 'Approvals' }).click();
  await page.getByRole('heading', { name: 'Approvals', level: 1 }).waitFor();
  t.match(await page.getByTestId('policy-summary').textContent(), /Approval is off/);
  await page.getByLabel('Require approval for every restore apply').check();
  await page.getByLabel('Minimum delay before approving (seconds)').fill('0');
  await page.getByRole('button', { name: 'Save policy' }).click();
  await page.getByTestId('policy-summary').filter({ hasText: 'Approval is on' }).waitFor();
  const policy = await stack.admin('GET', '/admin/restore/approvals');
  t.equal(policy.body.approvalRequired, true, 'the engine holds the policy');

  // A second person: invited as approver, registers a passkey in a second browser context (phone width).
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'approver@example.org',
    role: 'approver',
  });
  t.equal(invite.status, 200, 'invite minted');
  const approver = await stack.persona({ width: 390, height: 844 });
  await approver.page.goto(`${stack.origin}/`);
  await registerInPage(approver.page, 'approver@example.org', {}, { inviteToken: invite.body.inviteToken });
  await approver.page.goto(`${stack.origin}/approvals`);
  await approver.page.getByRole('heading', { name: 'Approvals', level: 1 }).waitFor();
  t.match(await approver.page.locator('.who').textContent(), /approver@example\.org · approver/);
  t.equal(
    await approver.page.getByLabel('Require approval for every restore apply').count(),
    0,
    'an approver does not see the policy form (owner only)',
  );

  // The owner plans a restore of docs/ only and requests approval.
  const approvedDir = join(stack.restoreRoot, 'approved');
  const approvedHash = await planRestore(page, stack.origin, {
    job: 'docs',
    runId,
    target: approvedDir,
    include: 'docs/',
  });
  t.equal(await page.getByTestId('plan-writes').textContent(), '2', 'the include selector keeps two records');
  await page.getByText(/Approval is on: an owner requires a second person/).waitFor();
  t.equal(await page.getByRole('button', { name: 'Apply restore…' }).count(), 0, 'no apply before approval');
  await page.getByRole('button', { name: 'Request approval' }).click();
  await page.getByText(/Waiting for approval: requested by owner@example\.org/).waitFor();
  await page.setViewportSize({ width: 390, height: 844 });
  await assertAccessible(t, page, 'restore step 3 (waiting for approval, phone width)');
  t.ok(await fitsWidth(page), 'the plan fits a 390 px screen without sideways scrolling');
  await screenshot(page, 'restore-plan-phone');
  await page.setViewportSize({ width: 1280, height: 860 });

  // The requester sees their own request without an Approve button.
  const ownerSecond = await owner.context.newPage();
  const secondProblems: string[] = [];
  ownerSecond.on('pageerror', (e) => secondProblems.push(e.message));
  await ownerSecond.goto(`${stack.origin}/approvals`);
  const ownView = ownerSecond.getByRole('article').filter({ hasText: approvedHash });
  await ownView.getByText('You requested this restore').waitFor();
  t.equal(await ownView.getByRole('button', { name: 'Approve' }).count(), 0, 'no self-approval button');
  t.equal(await ownView.getByRole('button', { name: 'Withdraw…' }).count(), 1, 'the requester may withdraw');
  await ownerSecond.close();

  // The approver sees it with its plan: where, how much, hash, who asked, deadline; then approves.
  const ap = approver.page;
  const request = ap.getByRole('article').filter({ hasText: approvedHash });
  await request.waitFor({ timeout: 15_000 });
  const text = (await request.textContent()) ?? '';
  t.match(text, approvedDir, 'the target directory is shown');
  t.match(text, /Records2 \(/, 'the record count is shown');
  t.match(text, /owner@example\.org/, 'the requester is shown');
  t.match(text, runId, 'the run is shown');
  t.match(text, /Apply before/, 'the apply deadline is shown');
  await assertAccessible(t, ap, 'approvals (phone width)');
  t.ok(await fitsWidth(ap), 'the approvals screen fits a 390 px screen without sideways scrolling');
  await screenshot(ap, 'approvals');
  await request.getByRole('button', { name: 'Approve' }).click();
  await ap.getByRole('heading', { name: 'Waiting for a decision (0)' }).waitFor();
  await ap.getByRole('cell', { name: 'approved', exact: true }).waitFor();

  // The requester's wizard sees the approval and applies.
  await page.getByText(/Approved by approver@example\.org/).waitFor({ timeout: 15_000 });
  await applyFromPlan(page);
  await page.getByTestId('apply-status').filter({ hasText: 'succeeded' }).waitFor({ timeout: 60_000 });
  const docsOnly = Object.fromEntries(Object.entries(source).filter(([n]) => n.startsWith('docs/')));
  t.same(tree(approvedDir), docsOnly, 'the approved subset is restored byte for byte');
  const used = await stack.admin('GET', '/admin/restore/approvals');
  t.equal(
    used.body.approvals.find((a: { subjectHash: string }) => a.subjectHash === approvedHash)?.status,
    'consumed',
    'the approval is used up by the successful apply',
  );

  // Rejection: another plan, rejected with a reason; the requester sees why; nothing is written.
  const rejectedDir = join(stack.restoreRoot, 'rejected');
  const rejectedHash = await planRestore(page, stack.origin, { job: 'docs', runId, target: rejectedDir });
  await page.getByRole('button', { name: 'Request approval' }).click();
  await page.getByText(/Waiting for approval/).waitFor();
  const toReject = ap.getByRole('article').filter({ hasText: rejectedHash });
  await toReject.waitFor({ timeout: 15_000 });
  await toReject.getByRole('button', { name: 'Reject…' }).click();
  const rejectDialog = ap.getByRole('dialog', { name: 'Reject this restore request?' });
  await rejectDialog.getByLabel('Reason (optional)').fill('wrong target directory');
  await assertAccessible(t, ap, 'approvals (reject dialog)');
  await rejectDialog.getByRole('button', { name: 'Reject request' }).click();
  await ap.getByRole('heading', { name: 'Waiting for a decision (0)' }).waitFor();
  await page
    .getByText(/Rejected by approver@example\.org .*: wrong target directory/)
    .waitFor({ timeout: 15_000 });
  t.equal(
    await page.getByRole('button', { name: 'Apply restore…' }).count(),
    0,
    'a rejected plan cannot be applied',
  );
  t.notOk(existsSync(rejectedDir), 'nothing is written for a rejected request');

  // ---- (3) cancel: a pending request withdrawn by its requester ----
  await page.getByRole('button', { name: 'Request approval' }).click();
  await page.getByText(/Waiting for approval/).waitFor();
  await ap.getByRole('article').filter({ hasText: rejectedHash }).waitFor({ timeout: 15_000 });
  await page.getByRole('button', { name: 'Withdraw the request' }).click();
  await page.getByText(/Withdrawn by owner@example\.org/).waitFor();
  await ap.getByRole('heading', { name: 'Waiting for a decision (0)' }).waitFor({ timeout: 15_000 });
  const withdrawn = await stack.admin('GET', '/admin/restore/approvals');
  t.same(
    withdrawn.body.approvals
      .filter((a: { subjectHash: string }) => a.subjectHash === rejectedHash)
      .map((a: { status: string }) => a.status),
    ['rejected', 'rejected'],
    'the engine holds the rejection and the withdrawal',
  );

  // A viewer may dry-run but neither request, apply nor approve: those actions are not offered.
  const viewerInvite = await stack.admin('POST', '/admin/roles/invite', { email: 'viewer@example.org' });
  t.equal(viewerInvite.status, 200, 'viewer invite minted');
  const viewer = await stack.persona();
  await viewer.page.goto(`${stack.origin}/`);
  await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: viewerInvite.body.inviteToken });
  await viewer.page.goto(`${stack.origin}/`);
  await viewer.page.getByRole('button', { name: 'Sign out' }).waitFor();
  t.match(await viewer.page.locator('.who').textContent(), /viewer@example\.org · viewer/);
  t.equal(
    await viewer.page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Approvals' })
      .count(),
    0,
    'a viewer has no Approvals screen',
  );
  await planRestore(viewer.page, stack.origin, {
    job: 'docs',
    runId,
    target: join(stack.restoreRoot, 'viewer'),
  });
  t.equal(await viewer.page.getByTestId('plan-writes').textContent(), '3', 'a viewer sees the plan');
  await viewer.page.getByText(/Your role \(viewer\) cannot request a restore/).waitFor();
  t.equal(
    await viewer.page.getByRole('button', { name: 'Request approval' }).count(),
    0,
    'no request button',
  );
  t.equal(await viewer.page.getByRole('button', { name: 'Apply restore…' }).count(), 0, 'no apply button');

  t.same(viewer.problems, [], 'no page error or CSP violation (viewer)');
  t.same(owner.problems, [], 'no page error or CSP violation (owner)');
  t.same(approver.problems, [], 'no page error or CSP violation (approver)');
  t.same(secondProblems, [], 'no page error (owner, second tab)');
});
