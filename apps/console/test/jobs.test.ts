// The Jobs and Runs screens in Chromium against a real engine: an owner signed in by passkey
// creates a `files` job through the form (the engine's 400 for a bad cadence is shown next to the
// field and nothing is written), watches the first run reach `ok` without reloading, runs it now
// and sees that run `ok` in the history with its destination verified, looks up a point in time
// (a hit, and a miss with the retained window), meets a 409 when the job was changed behind the
// form's back (the message names the changed field; reload brings the current job and the save
// then succeeds), pauses the job and deletes it. axe finds no serious violation on the list, the
// form and the detail page (also at 390 px, where the page does not scroll sideways); no CSP
// violation or page error along the way.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
} from './helpers/stack.ts';

const LONG = { timeout: 60_000 };

t.test('jobs and runs through the console', async (t) => {
  const stack = await startStack(t);
  const persona = await stack.persona();
  const { page } = persona;
  await signInFirstOwner(persona, stack);

  // A small directory tree to back up (outside the engine's data dir, which jobs may not read).
  const src = join(stack.dataDir, 'source-docs');
  mkdirSync(join(src, 'sub'), { recursive: true });
  writeFileSync(join(src, 'a.txt'), 'alpha\n');
  writeFileSync(join(src, 'b.txt'), 'bravo bravo\n');
  writeFileSync(join(src, 'sub', 'c.txt'), 'charlie '.repeat(100));

  // The list, empty.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Jobs' }).click();
  await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  await page.getByText('No jobs yet.').waitFor();
  await assertAccessible(t, page, 'jobs list (empty)');

  // The form: a cadence under the engine's minimum is refused by the engine, shown by the field.
  await page.getByRole('link', { name: 'New job' }).click();
  await page.getByRole('heading', { name: 'New job', level: 1 }).waitFor();
  await page.getByLabel('ID', { exact: true }).fill('docs');
  await page.getByLabel('Name', { exact: true }).fill('Team documents');
  await page.getByLabel('Cadence (seconds)', { exact: true }).fill('30');
  await page.getByLabel('Directory path').fill(src);
  await page.getByRole('button', { name: 'Create job' }).click();
  const refusal = page.getByRole('alert').filter({ hasText: 'cadenceSeconds must be >= 60' });
  await refusal.waitFor();
  const cadence = page.getByLabel('Cadence (seconds)', { exact: true });
  t.equal(await cadence.getAttribute('aria-invalid'), 'true', 'the cadence field is marked invalid');
  const describedBy = (await cadence.getAttribute('aria-describedby')) ?? '';
  const fieldMessage = await page.locator(`[id="${describedBy.split(' ')[0]}"]`).textContent();
  t.equal(fieldMessage, 'Must be >= 60', "the engine's rule is shown next to the field it names");
  t.same((await stack.admin('GET', '/admin/jobs')).body.jobs, [], 'nothing was written');
  await assertAccessible(t, page, 'job form with a refusal');
  await screenshot(page, 'job-form');

  await cadence.fill('3600');
  await page.getByRole('button', { name: 'Create job' }).click();
  await page.getByRole('heading', { name: 'Team documents', level: 1 }).waitFor();
  t.equal(new URL(page.url()).pathname, '/jobs/docs', 'the new job opens on its own page');
  const created = (await stack.admin('GET', '/admin/jobs')).body.jobs;
  t.equal(created.length, 1);
  t.same(created[0].source, { type: 'files', path: src }, 'the files source as typed');
  t.equal(created[0].cadenceSeconds, 3600);
  t.same(created[0].destinations, ['default'], 'the default destination');

  // A new job is due at once: the scheduler runs it; the page follows the run to `ok` by itself.
  const runs = page.getByRole('table', { name: 'Runs of docs, newest first' });
  const scheduled = runs.getByRole('row').filter({ hasText: 'schedule' });
  await scheduled.locator('.status-ok').waitFor(LONG);

  // Run now: the page shows the run id, then that run reaching `ok` with its destination verified.
  await page.getByRole('button', { name: 'Run now' }).click();
  const started = page.getByRole('status').filter({ hasText: /^Run \S+ started\.$/ });
  await started.waitFor();
  const runId = /^Run (\S+) started\.$/.exec((await started.textContent()) ?? '')?.[1] ?? '';
  t.match(runId, /^\d{8}T\d{9}Z-[0-9a-f]{8}$/, 'the run id from the engine');
  const manual = runs.locator(`tr[data-run-id="${runId}"]`);
  await manual.locator('.status-ok').waitFor(LONG);
  t.match(await manual.textContent(), /manual/, 'triggered manually');
  t.match(await manual.textContent(), /default: verified/, 'the default destination verified');
  t.match(await manual.getByRole('cell').nth(3).textContent(), /^3$/, 'three records read back');
  const ring = (await stack.admin('GET', '/admin/history?id=docs')).body.runs;
  const engineRun = ring.find((r: { runId: string }) => r.runId === runId);
  t.equal(engineRun?.status, 'ok', 'the engine recorded the run ok');
  t.equal(engineRun?.destinations.default.state, 'verified', 'and its copy verified');
  t.equal(ring.length, 2, 'two runs in the history');

  // Point in time: a hit (the manual run is the latest ok), then a miss with the retained window.
  const when = page.getByLabel('Time (your local time)');
  await when.fill('2099-01-01T00:00:00');
  await page.getByRole('button', { name: 'Look up' }).click();
  const result = page.locator('.pit-result');
  await result.filter({ hasText: 'Found' }).waitFor();
  t.match(await result.textContent(), new RegExp(`run ${runId} is the latest successful run`));
  await when.fill('2001-01-01T00:00:00');
  await page.getByRole('button', { name: 'Look up' }).click();
  await result.filter({ hasText: 'No successful run' }).waitFor();
  t.match(await result.textContent(), /holds 2 runs of this job/, 'the retained window');
  await assertAccessible(t, page, 'job detail');
  await screenshot(page, 'job-detail');

  // The 409: the job changes behind the open form; the save is refused and names the field.
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('heading', { name: 'Edit Team documents' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('Team docs (edited)');
  const behind = await stack.admin('POST', '/admin/jobs', {
    id: 'docs',
    name: 'Team documents',
    cadenceSeconds: 7200,
    source: { type: 'files', path: src },
  });
  t.equal(behind.status, 200, 'someone else changed the cadence');
  await page.getByRole('button', { name: 'Save changes' }).click();
  const conflict = page.getByRole('alert').filter({ hasText: 'changed by someone else' });
  await conflict.waitFor();
  const conflictText = (await conflict.textContent()) ?? '';
  t.match(conflictText, /Changed: Cadence \(cadenceSeconds\)\./, 'the changed field is named');
  t.notMatch(conflictText, /\(name\)/, 'only what the other person changed');
  t.equal((await stack.admin('GET', '/admin/jobs')).body.jobs[0].name, 'Team documents', 'nothing saved');
  await assertAccessible(t, page, 'job form with a conflict');
  await conflict.getByRole('button', { name: 'Reload the job' }).click();
  await conflict.waitFor({ state: 'detached' });
  t.equal(
    await page.getByLabel('Cadence (seconds)', { exact: true }).inputValue(),
    '7200',
    'reload shows the current job',
  );
  t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Team documents');
  await page.getByLabel('Name', { exact: true }).fill('Team docs (edited)');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('heading', { name: 'Team docs (edited)', level: 1 }).waitFor();
  await page
    .getByRole('status')
    .filter({ hasText: /^Saved \(revision \d+\)\.$/ })
    .waitFor();
  const saved = (await stack.admin('GET', '/admin/jobs')).body.jobs[0];
  t.equal(saved.name, 'Team docs (edited)', 'the edit is saved');
  t.equal(saved.cadenceSeconds, 7200, "on top of the other person's change");
  t.equal(saved.configRev, behind.body.configRev + 1);

  // Pause: the job stops (no run now), the list shows it paused with its last run.
  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByRole('status').filter({ hasText: 'The job is paused' }).waitFor();
  await page.getByRole('button', { name: 'Resume' }).waitFor();
  t.ok(await page.getByRole('button', { name: 'Run now' }).isDisabled(), 'no run now while paused');
  t.equal((await stack.admin('GET', '/admin/jobs')).body.jobs[0].enabled, false, 'the engine has it paused');

  // Phone width: the detail page stays accessible and does not scroll sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await assertAccessible(t, page, 'job detail (phone width)');
  t.ok(
    await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
    'no sideways scroll at 390 px',
  );
  await page.setViewportSize({ width: 1280, height: 860 });

  await page.getByRole('link', { name: '← All jobs' }).click();
  const listRow = page.getByRole('table', { name: 'Jobs with their state and last run' }).getByRole('row', {
    name: /Team docs \(edited\)/,
  });
  await listRow.waitFor();
  t.match(await listRow.textContent(), /paused/, 'the list shows the state');
  t.match(await listRow.textContent(), /ok/, 'and the last run');
  t.match(await listRow.textContent(), /every 2 hours/);
  await assertAccessible(t, page, 'jobs list');
  await screenshot(page, 'jobs');

  // A viewer (job.read only) sees the job and its runs, and no button to change or run it.
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'viewer@example.org',
    role: 'viewer',
  });
  t.equal(invite.status, 200, 'a viewer is invited');
  const viewer = await stack.persona();
  await viewer.page.goto(`${stack.origin}/`);
  await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: invite.body.inviteToken });
  await viewer.page.goto(`${stack.origin}/jobs`);
  await viewer.page.getByRole('link', { name: 'Team docs (edited)' }).click();
  await viewer.page.getByRole('table', { name: 'Runs of docs, newest first' }).waitFor();
  t.match(await viewer.page.locator('.who').textContent(), /viewer@example\.org · viewer/);
  for (const name of ['Run now', 'Edit', 'Pause', 'Resume', 'Delete'])
    t.equal(
      await viewer.page.getByRole('button', { name, exact: true }).count(),
      0,
      `no ${name} for a viewer`,
    );
  await viewer.page.getByRole('link', { name: '← All jobs' }).click();
  await viewer.page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  t.equal(await viewer.page.getByRole('link', { name: 'New job' }).count(), 0, 'no New job for a viewer');
  t.same(viewer.problems, [], "no CSP violation or page error in the viewer's browser");
  await viewer.context.close();

  // Resume, then a run the destination throttles: the live panel shows it parked with its next try.
  await listRow.getByRole('link', { name: 'Team docs (edited)' }).click();
  await page.getByRole('button', { name: 'Resume' }).click();
  await page.getByRole('status').filter({ hasText: 'The job is active again.' }).waitFor();
  t.equal((await stack.admin('GET', '/admin/jobs')).body.jobs[0].enabled, true, 'the engine has it active');
  const armed = await stack.admin('POST', '/admin/test-fault/arm', {
    target: 'destination',
    destination: 'default',
    fault: 'throttle',
    op: 'put',
    times: 1,
  });
  t.equal(armed.status, 200, 'the destination will ask to slow down once');
  await page.getByRole('button', { name: 'Run now' }).click();
  const live = page.getByRole('region', { name: /Run in progress/ });
  await live.filter({ hasText: 'parked' }).waitFor(LONG);
  t.match(
    await live.textContent(),
    /Parked: a destination or the source asked to slow down; the next attempt is at/,
  );
  t.match(await live.textContent(), /default: /, "the destination's stage");
  t.ok(
    await page.getByRole('button', { name: 'Run now' }).isDisabled(),
    'no second run while one is in flight',
  );
  t.equal(
    (await stack.admin('GET', '/admin/history?id=docs')).body.runs[0].status,
    'parked',
    'the engine has the run parked',
  );

  // Delete, with confirmation.
  await page.getByRole('button', { name: 'Delete' }).click();
  const dialog = page.getByRole('dialog', { name: 'Delete job docs?' });
  await dialog.waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'hidden' });
  t.equal((await stack.admin('GET', '/admin/jobs')).body.jobs.length, 1, 'cancel deletes nothing');
  await page.getByRole('button', { name: 'Delete' }).click();
  await dialog.getByRole('button', { name: 'Delete job' }).click();
  await page.getByRole('heading', { name: 'Jobs', level: 1 }).waitFor();
  await page.getByRole('status').filter({ hasText: 'Job docs was deleted.' }).waitFor();
  await page.getByText('No jobs yet.').waitFor();
  t.same((await stack.admin('GET', '/admin/jobs')).body.jobs, [], 'the engine no longer has the job');

  t.same(persona.problems, [], 'no CSP violation or page error');
});
