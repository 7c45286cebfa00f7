// The Control plane screen in Chromium (docs/control-plane.md, docs/console.md "Control plane"):
// an owner downloads the signed and the sealed export through the UI; the engine's control plane
// is then wiped (the test-only clear, HARNESS_TEST_FAULTS) and restored from a browser WITH NO
// SESSION at /recover, reached from the sign-in screen: the admin token typed into the recovery
// panel, the sealed export opened IN THE BROWSER with the break-glass secret key file, the
// restore's applied and staged parts shown, then "Apply the staged slices": the job, its run
// history and the owner are back. A second engine (no break-glass key: the sealed download is
// absent with its reason) first shows a token session the recovery panel on the screen (its bearer
// requests go without the session cookie; the first engine's export is refused there, another
// signer), then, signed in as its owner, imports the first one's sealed export, opened in the
// browser too: the job arrives disabled, what was ignored is listed, and the signed export of the
// same engine reports it as existing. A viewer sees the status only. Every request the pages sent is observed:
// the break-glass secret key never appears in any of them, and the admin token only ever as the
// bearer of the control-plane requests.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, fingerprint, fromBase64Url, generateRecipient } from '@coffer/crypto';
import type { Page } from 'playwright-core';
import t from 'tap';
import {
  ADMIN_TOKEN,
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
  triggerRun,
} from './helpers/stack.ts';

interface Seen {
  url: string;
  headers: Record<string, string>;
  body: string;
}

const pending: Promise<unknown>[] = [];
/** Records every request the page sends, with all its headers (cookies included). */
function observe(page: Page, into: Seen[]): void {
  page.on('request', (r) => {
    pending.push(
      r.allHeaders().then(
        (headers) => into.push({ url: r.url(), headers, body: r.postData() ?? '' }),
        () => into.push({ url: r.url(), headers: r.headers(), body: r.postData() ?? '' }),
      ),
    );
  });
}

t.test('export, browser-unsealed restore into the wiped engine, import into another', async (t) => {
  const a = await startStack(t);
  const keyFile = a.breakGlassKeyFile!;
  const secretText = readFileSync(keyFile, 'utf8');
  const secretLines = secretText
    .split('\n')
    .filter((l) => l.length >= 32 && !l.startsWith('-----') && !l.includes(':'));
  t.ok(secretLines.length > 0, 'the key file has key material lines to look for');
  const seen: Seen[] = [];

  // A job with one finished run on the first engine.
  const source = join(a.dataDir, 'source');
  mkdirSync(source, { recursive: true });
  writeFileSync(join(source, 'a.txt'), 'the control plane is what we lose\n');
  const job = await a.admin('POST', '/admin/jobs', {
    id: 'docs',
    cadenceSeconds: 86_400,
    source: { type: 'files', path: source },
  });
  t.equal(job.status, 200, 'job created');
  const runId = await triggerRun(a, 'docs');
  let runStatus = '';
  for (let i = 0; i < 450; i++) {
    const h = await a.admin('GET', '/admin/history?id=docs');
    const run = (h.body.runs as { runId: string; status: string }[] | undefined)?.find(
      (r) => r.runId === runId,
    );
    runStatus = run?.status ?? '';
    if (run && run.status !== 'running' && run.status !== 'parked') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(runStatus, 'ok', 'the run finished');

  // The owner exports, signed and sealed, through the screen.
  const owner = await a.persona();
  observe(owner.page, seen);
  await signInFirstOwner(owner, a);
  const page = owner.page;
  await page.getByRole('link', { name: 'Control plane', exact: true }).click();
  await page.getByRole('heading', { name: 'Control plane', level: 1 }).waitFor();
  await page.getByText('No recovery needed.').waitFor();
  t.ok(await page.getByText('Configured').isVisible(), 'the engine is not empty');
  t.equal(
    await page.getByRole('heading', { name: 'Restore into this empty engine' }).count(),
    0,
    'no recovery panel on a configured engine',
  );
  await assertAccessible(t, page, 'control plane');
  await screenshot(page, 'control-plane');
  const outDir = join(a.dataDir, 'operator');
  mkdirSync(outDir, { recursive: true });
  const [signedDl] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download signed export' }).click(),
  ]);
  t.match(signedDl.suggestedFilename(), /^coffer-control-plane-\d{8}T\d{6}Z\.json$/, 'signed file name');
  const signedPath = join(outDir, signedDl.suggestedFilename());
  await signedDl.saveAs(signedPath);
  const signed = JSON.parse(readFileSync(signedPath, 'utf8'));
  t.equal(signed.kind, 'coffer-control-plane-signed-export', 'the signed envelope was saved');
  t.match(JSON.parse(signed.export).slices.configuration.jobs, [{ id: 'docs' }], 'it carries the job');
  const [sealedDl] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download sealed export' }).click(),
  ]);
  t.match(sealedDl.suggestedFilename(), /\.sealed\.json$/, 'sealed file name');
  const sealedPath = join(outDir, sealedDl.suggestedFilename());
  await sealedDl.saveAs(sealedPath);
  const sealed = JSON.parse(readFileSync(sealedPath, 'utf8'));
  t.equal(sealed.kind, 'coffer-control-plane-sealed-export', 'the sealed artefact was saved');
  t.notOk(readFileSync(sealedPath, 'utf8').includes('"docs"'), 'the sealed file does not show the job');
  const statusA = await a.admin('GET', '/admin/control-plane/status');
  // The signer's public key file an operator would hand over (the artefact embeds its raw bytes).
  const signerPub = fromBase64Url(sealed.signerPublicKey);
  t.equal(fingerprint(signerPub), statusA.body.signerFingerprint, "the artefact names engine A's signer");
  const signerPubPath = join(outDir, 'engine-a-signer.pub');
  writeFileSync(signerPubPath, encodeKeyFile('signer-public', signerPub));
  await owner.context.close();

  // The control plane is lost (keys, archives and audit chain kept).
  const cleared = await a.admin('POST', '/admin/test-fault/control-plane-clear');
  t.equal(cleared.status, 200, 'control plane wiped');
  t.same((await a.admin('GET', '/admin/jobs')).body.jobs, [], 'no jobs left');

  // Nobody can sign in: the recovery panel is reached from the sign-in screen with no session.
  const rescuer = await a.persona();
  observe(rescuer.page, seen);
  const rp = rescuer.page;
  await rp.goto(`${a.origin}/`);
  await rp.getByRole('tab', { name: 'Admin token' }).click();
  await rp.getByRole('link', { name: 'Restore the control plane from an export' }).click();
  await rp.getByRole('heading', { name: 'Control-plane recovery', level: 1 }).waitFor();
  t.equal(new URL(rp.url()).pathname, '/recover');
  await rp.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await rp.getByRole('button', { name: 'Read the status with the token' }).click();
  await rp.getByText('Empty (no jobs, no members, no notification channels)').waitFor();
  t.pass('the status, read with the bare token, says the engine is empty');
  await rp.getByLabel('Export file (signed or sealed)').setInputFiles(sealedPath);
  await rp.getByText('a sealed export.').waitFor();
  // Another break-glass key does not open it, and nothing is sent.
  const wrongKey = join(outDir, 'someone-else.key');
  writeFileSync(wrongKey, encodeKeyFile('recipient-secret', generateRecipient().secretKey));
  await rp.getByLabel('Break-glass secret key file').setInputFiles(wrongKey);
  await rp.getByRole('button', { name: 'Restore', exact: true }).click();
  await rp.getByRole('alert').filter({ hasText: 'not to this key' }).waitFor();
  t.notOk(
    seen.some((s) => s.url.includes('/admin/control-plane/restore')),
    'a key that does not open the capsule sends nothing',
  );
  await rp.getByLabel('Break-glass secret key file').setInputFiles(keyFile);
  await assertAccessible(t, rp, 'recover');
  await rp.getByRole('button', { name: 'Restore', exact: true }).click();
  const result = rp.getByRole('region', { name: 'Restore result' });
  await result.waitFor();
  t.ok(
    await result.getByRole('row').filter({ hasText: 'docs' }).filter({ hasText: 'restored' }).isVisible(),
    'the job is listed as restored',
  );
  t.ok(await result.getByText('1 member(s)').isVisible(), 'the owner waits in the staged authority slice');
  await screenshot(rp, 'control-plane-recover');
  t.same(
    (await a.admin('GET', '/admin/control-plane/status')).body.staged?.sealed,
    true,
    'the engine staged a sealed restore',
  );
  await rp.setViewportSize({ width: 390, height: 844 });
  t.ok(
    (await rp.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)) <= 0,
    'recover: nothing wider than a phone',
  );
  await rp.getByRole('button', { name: 'Apply the staged slices' }).click();
  await rp.getByText('Applied the staged slices').waitFor();
  t.equal(await rp.getByLabel('Admin token').inputValue(), '', 'the token is dropped once done');

  const jobs = await a.admin('GET', '/admin/jobs');
  t.match(jobs.body.jobs, [{ id: 'docs', state: { paused: false } }], 'the job is back, enabled');
  const history = await a.admin('GET', '/admin/history?id=docs');
  t.ok(
    (history.body.runs as { runId: string }[]).some((r) => r.runId === runId),
    'its run history is back',
  );
  const after = await a.admin('GET', '/admin/control-plane/status');
  t.equal(after.body.staged, null, 'nothing staged any more');
  t.equal(after.body.counts.members, 1, 'the owner is back');

  // Another engine, without a break-glass key, imports engine A's sealed export.
  const b = await startStack(t, { withoutBreakGlassKey: true });
  const other = await b.persona();
  observe(other.page, seen);
  const bp = other.page;
  // Before any owner: a token session sees the empty engine and the recovery panel on the screen;
  // the panel's bearer requests go without the session cookie (else the engine would refuse them
  // as a session), and engine A's export is refused here (another signer).
  await bp.goto(`${b.origin}/`);
  await bp.getByRole('tab', { name: 'Admin token' }).click();
  await bp.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await bp.getByRole('button', { name: 'Sign in with admin token' }).click();
  await bp.getByRole('link', { name: 'Control plane', exact: true }).click();
  const panel = bp.getByRole('region', { name: 'Restore into this empty engine' });
  await panel.waitFor();
  await panel.page().getByText('Empty (no jobs, no members, no notification channels)').waitFor();
  t.pass('the status says B is empty');
  await panel.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await panel.getByLabel('Export file (signed or sealed)').setInputFiles(signedPath);
  await panel.getByText('a signed export.').waitFor();
  await panel.getByRole('button', { name: 'Restore', exact: true }).click();
  await panel.getByRole('alert').waitFor();
  const refusedRestore = seen.filter(
    (s) => s.url.startsWith(b.origin) && s.url.endsWith('/admin/control-plane/restore'),
  );
  t.equal(refusedRestore.length, 1, 'the plain restore was sent to B');
  t.equal(refusedRestore[0]?.headers.cookie, undefined, 'without the token session cookie');
  t.match(
    await panel.getByRole('alert').textContent(),
    /signer|signature|verif/i,
    "B refuses A's export: another signer",
  );
  t.same((await b.admin('GET', '/admin/jobs')).body.jobs, [], 'nothing restored into B');
  await bp.getByRole('button', { name: 'Sign out' }).click();
  await bp.getByRole('tab', { name: 'Admin token' }).waitFor();
  await signInFirstOwner(other, b);
  await bp.getByRole('link', { name: 'Control plane', exact: true }).click();
  await bp.getByRole('heading', { name: 'Control plane', level: 1 }).waitFor();
  await bp.getByText('No sealed export: this engine has no break-glass key').waitFor();
  t.equal(
    await bp.getByRole('button', { name: 'Download sealed export' }).count(),
    0,
    'no sealed download without a break-glass key',
  );
  await bp.getByLabel('Export file to import (signed or sealed)').setInputFiles(sealedPath);
  await bp.getByText('a sealed export.').waitFor();
  await bp.getByLabel('Signer public key of the exporting engine (.pub)').setInputFiles(signerPubPath);
  await bp.getByLabel('Break-glass secret key file (to open the sealed export)').setInputFiles(keyFile);
  await bp.getByRole('button', { name: 'Import', exact: true }).click();
  const imported = bp.getByRole('region', { name: 'Import result' });
  await imported.waitFor();
  t.ok(
    await imported
      .getByRole('row')
      .filter({ hasText: 'docs' })
      .filter({ hasText: 'imported disabled' })
      .isVisible(),
    'the foreign job arrived disabled',
  );
  t.ok(await imported.getByText('Ignored (an import never brings these)').isVisible(), 'what was ignored');
  await assertAccessible(t, bp, 'control plane (import result)');
  await bp.setViewportSize({ width: 390, height: 844 });
  t.ok(
    (await bp.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)) <= 0,
    'control plane: nothing wider than a phone',
  );
  await assertAccessible(t, bp, 'control plane (390 px)');
  await bp.setViewportSize({ width: 1280, height: 860 });
  t.match(
    (await b.admin('GET', '/admin/jobs')).body.jobs,
    [{ id: 'docs', state: { paused: true } }],
    'engine B holds the job, disabled',
  );
  // The signed (plain) export of the same engine: the job exists here and is left untouched.
  await bp.getByLabel('Export file to import (signed or sealed)').setInputFiles(signedPath);
  await bp.getByText('a signed export.').waitFor();
  t.equal(
    await bp.getByLabel('Break-glass secret key file (to open the sealed export)').count(),
    0,
    'no key asked for a signed export',
  );
  await bp.getByRole('button', { name: 'Import', exact: true }).click();
  await imported.getByRole('row').filter({ hasText: 'exists here (left untouched)' }).waitFor();
  t.pass('a signed import reports the job as existing');
  t.ok(
    seen.some((s) => s.url.endsWith('/admin/control-plane/import')),
    'the plain import was sent',
  );

  // A viewer (no access.policy) sees the status, and no export or import.
  const invited = await b.admin('POST', '/admin/roles/invite', {
    email: 'viewer@example.org',
    role: 'viewer',
  });
  t.equal(invited.status, 200, 'viewer invited');
  const viewer = await b.persona();
  await viewer.page.goto(`${b.origin}/`);
  await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: invited.body.inviteToken });
  await viewer.page.goto(`${b.origin}/control-plane`);
  await viewer.page.getByText('No recovery needed.').waitFor();
  t.equal(await viewer.page.getByRole('button', { name: /Download/ }).count(), 0, 'no export for a viewer');
  t.equal(
    await viewer.page.getByRole('heading', { name: 'Import from another engine' }).count(),
    0,
    'no import',
  );
  await viewer.page
    .getByText('Exports and imports are for people who hold the access.policy capability.')
    .waitFor();
  t.same(viewer.problems, [], 'no page error for the viewer');

  // What the pages sent.
  await Promise.all(pending);
  t.ok(
    seen.some((s) => s.url.endsWith('/admin/control-plane/restore-sealed')),
    'restore-sealed was sent',
  );
  t.ok(
    seen.some((s) => s.url.endsWith('/admin/control-plane/import-sealed')),
    'import-sealed was sent',
  );
  t.notOk(
    seen.some((s) =>
      secretLines.some(
        (l) => s.body.includes(l) || s.url.includes(l) || JSON.stringify(s.headers).includes(l),
      ),
    ),
    'no request from any page carried any part of the break-glass secret key',
  );
  const withToken = seen.filter((s) => JSON.stringify(s).includes(ADMIN_TOKEN));
  t.ok(withToken.length >= 3, 'the token went with the status, restore and apply requests');
  t.ok(
    withToken.every(
      (s) =>
        s.headers.authorization === `Bearer ${ADMIN_TOKEN}` &&
        !s.body.includes(ADMIN_TOKEN) &&
        !s.url.includes(ADMIN_TOKEN) &&
        (new URL(s.url).pathname.startsWith('/admin/control-plane/') ||
          // signInFirstOwner's own registration proof, and the token sign-in on B
          new URL(s.url).pathname === '/admin/auth/register/begin' ||
          new URL(s.url).pathname === '/admin/session/bootstrap'),
    ),
    'the admin token only ever travelled as the bearer',
  );
  t.ok(
    seen
      .filter((s) => /\/admin\/control-plane\/(restore|restore-sealed|apply-staged)$/.test(s.url))
      .every((s) => s.headers.cookie === undefined),
    'the restore requests carried no session cookie',
  );
  for (const p of [rescuer, other]) t.same(p.problems, [], 'no page error or CSP violation');
});
