// The Reports screen in Chromium against a real engine (SQLite, the local destination) with one job
// and one real run that ended `ok`. A viewer (reports.read is every role's) opens Reports: the
// period defaults to the last 30 days; the backup-coverage figures show the job covered with the
// run counted; "Download signed JSON" saves exactly the bytes the engine replied, and the real
// `coffer-recover verify-report` (apps/recover/dist/cli.js) verifies that file against the
// engine's signer public key (`_RECOVERY/signer.pub` of the destination, pinned to the fingerprint
// the engine's set-up state names), while a copy with one changed byte is refused (exit 3);
// "Download PDF" saves a PDF (`%PDF-`); the verification recipe the engine returned and the note
// that the PDF carries no checkable signature are shown. The restore-drills report lists the job
// as never drilled and the audit attestation shows the chain intact; a period ending before it starts is refused by the engine and the reason is shown. axe
// finds no serious violation; no CSP violation or page error.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  RECOVER_CLI,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
  triggerRun,
} from './helpers/stack.ts';

t.test('reports: figures, signed JSON verified offline, PDF', async (t) => {
  const stack = await startStack(t);
  const owner = await stack.persona();
  await signInFirstOwner(owner, stack);

  // One job and one real run.
  const source = join(stack.dataDir, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'a.txt'), 'reported\n');
  const created = await stack.admin('POST', '/admin/jobs', {
    id: 'docs',
    name: 'Team documents',
    cadenceSeconds: 86400,
    source: { type: 'files', path: source },
  });
  t.equal(created.status, 200, 'job created');
  const runId = await triggerRun(stack, 'docs');
  let status: string | undefined;
  for (let i = 0; i < 300; i++) {
    const h = await stack.admin('GET', '/admin/history?id=docs');
    status = (h.body.runs as { runId: string; status: string }[] | undefined)?.find(
      (r) => r.runId === runId,
    )?.status;
    if (status && status !== 'running' && status !== 'parked') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(status, 'ok', 'the run ended ok');

  // A viewer reads reports.
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'viewer@example.org',
    role: 'viewer',
  });
  t.equal(invite.status, 200, 'viewer invited');
  const viewer = await stack.persona();
  const { page } = viewer;
  await page.goto(`${stack.origin}/`);
  await registerInPage(page, 'viewer@example.org', {}, { inviteToken: invite.body.inviteToken });
  await page.goto(`${stack.origin}/`);
  await openScreen(viewer, 'Reports');

  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
  t.equal(
    await page.getByLabel('From (UTC day)').inputValue(),
    day(Date.now() - 30 * 86_400_000),
    '30 days back',
  );
  t.equal(await page.getByLabel('To (UTC day, included)').inputValue(), day(Date.now()), 'to today');
  t.ok(await page.getByRole('radio', { name: 'Backup coverage' }).isChecked(), 'coverage by default');

  const replied = page.waitForResponse((r) => r.url().includes('/admin/reports/backup-coverage'));
  await page.getByRole('button', { name: 'View report' }).click();
  const response = await replied;
  const engineBytes = await response.body();
  const report = page.getByRole('region', { name: 'Backup coverage' });
  const row = report.locator('tr[data-job="docs"]');
  await row.waitFor();
  t.equal(await row.locator('[data-verdict]').getAttribute('data-verdict'), 'covered', 'the job is covered');
  t.match(await row.textContent(), /Team documents/, 'named');
  t.match(await row.textContent(), /1 \/ 0 \/ 1/, 'its run counted (ok / failed / total)');
  t.match(
    await report.locator('[data-figure="summary"]').textContent(),
    /1 job: 1 covered, 0 stale, 0 never run/,
    'the summary',
  );
  t.match(
    await report.locator('[data-recipe]').textContent(),
    /coffer-recover verify-report/,
    'the recipe shown',
  );
  t.match(
    await report.locator('[data-note="pdf"]').textContent(),
    /no checkable signature/,
    'the PDF note shown',
  );
  await assertAccessible(t, page, 'reports');
  await screenshot(page, 'reports');

  // The signed JSON: exactly the engine's bytes, verified offline by coffer-recover.
  const out = join(stack.dataDir, 'downloads');
  mkdirSync(out, { recursive: true });
  const [jsonDownload] = await Promise.all([
    page.waitForEvent('download'),
    report.getByRole('button', { name: 'Download signed JSON' }).click(),
  ]);
  t.match(
    jsonDownload.suggestedFilename(),
    /^coffer-report-backup-coverage-\d{4}-\d{2}-\d{2}\.json$/,
    'named for the kind and day',
  );
  const jsonFile = join(out, 'backup-coverage.json');
  await jsonDownload.saveAs(jsonFile);
  const saved = readFileSync(jsonFile);
  t.ok(saved.equals(engineBytes), 'the download is exactly the bytes the engine replied');

  const signerPub = join(stack.dataDir, 'engine', 'destination', '_RECOVERY', 'signer.pub');
  t.ok(existsSync(signerPub), 'the destination holds the signer public key');
  const pin = (await stack.admin('GET', '/admin/setup-state')).body.fingerprints.signer as string;
  const verify = (file: string) =>
    spawnSync(
      process.execPath,
      [RECOVER_CLI, 'verify-report', '--report', file, '--signer', signerPub, '--pin-signer', pin, '--json'],
      { encoding: 'utf8' },
    );
  const ok = verify(jsonFile);
  t.equal(ok.status, 0, `coffer-recover verify-report: ${ok.stderr}`);
  t.match(ok.stdout, /backup-coverage/, 'it names the kind');
  // One changed byte inside the signed text: refused.
  const text = saved.toString('utf8');
  const tampered = join(out, 'tampered.json');
  writeFileSync(tampered, text.replace('\\"covered\\":1', '\\"covered\\":2'));
  t.not(readFileSync(tampered, 'utf8'), text, 'the copy differs');
  t.equal(verify(tampered).status, 3, 'a changed report does not verify');

  // The PDF.
  const [pdfDownload] = await Promise.all([
    page.waitForEvent('download'),
    report.getByRole('button', { name: 'Download PDF' }).click(),
  ]);
  t.match(
    pdfDownload.suggestedFilename(),
    /^coffer-report-backup-coverage-.*\.pdf$/,
    "the engine's file name",
  );
  const pdfFile = join(out, 'report.pdf');
  await pdfDownload.saveAs(pdfFile);
  t.equal(readFileSync(pdfFile).subarray(0, 5).toString('latin1'), '%PDF-', 'a PDF');

  // The restore drills: the job, never drilled.
  await page.getByRole('radio', { name: 'Restore drills' }).check();
  await page.getByRole('button', { name: 'View report' }).click();
  const drills = page.getByRole('region', { name: 'Restore drills' });
  const drillRow = drills.locator('tr[data-job="docs"]');
  await drillRow.waitFor();
  t.match(await drillRow.textContent(), /0 \/ 0 \/ 0.*never/, 'no drill in the period, never drilled');
  t.match(
    await drills.locator('[data-figure="summary"]').textContent(),
    /1 never drilled/,
    'the drills summary',
  );

  // The audit attestation.
  await page.getByRole('radio', { name: 'Audit attestation' }).check();
  await page.getByRole('button', { name: 'View report' }).click();
  const attestation = page.getByRole('region', { name: 'Audit attestation' });
  await attestation.locator('[data-figure="chain"]').waitFor();
  t.match(await attestation.locator('[data-figure="chain"]').textContent(), /intact/, 'the chain is intact');

  // A period the engine refuses: the reason is shown.
  await page.getByLabel('From (UTC day)').fill(day(Date.now()));
  await page.getByLabel('To (UTC day, included)').fill(day(Date.now() - 2 * 86_400_000));
  await page.getByRole('button', { name: 'View report' }).click();
  const alert = page.getByRole('alert');
  await alert.waitFor();
  t.match(await alert.textContent(), /From must be before to/, "the engine's reason");

  t.same(viewer.problems, [], 'no CSP violation or page error');
});
