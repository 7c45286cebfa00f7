// First-run set-up in Chromium, on an engine started without a break-glass key: sign in with the
// admin token, claim the first owner with a passkey from the Set-up screen (recovery codes shown
// once and confirmed), generate the break-glass key IN THE BROWSER (the secret half only ever
// leaves as a download; the engine receives the public half), then a run seals to it and
// `coffer-recover extract` opens that run offline with the downloaded key alone.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeKeyFile, fingerprint, recipientPublicKeyFromSecret } from '@coffer/crypto';
import t from 'tap';
import {
  ADMIN_TOKEN,
  assertAccessible,
  RECOVER_CLI,
  screenshot,
  startStack,
  triggerRun,
} from './helpers/stack.ts';

t.test('first-run set-up: first owner, break-glass key in the browser, offline recovery', async (t) => {
  const stack = await startStack(t, { withoutBreakGlassKey: true });
  const p = await stack.persona();
  const { page } = p;
  const sent: string[] = [];
  page.on('request', (r) => {
    const body = r.postData();
    if (body) sent.push(body);
  });

  await page.goto(`${stack.origin}/`);
  await page.getByRole('tab', { name: 'Admin token' }).click();
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in with admin token' }).click();
  await page.getByText('Runs cannot seal yet').waitFor();
  await page.getByRole('link', { name: 'Set-up' }).first().click();
  await page.getByRole('heading', { name: 'Set-up', level: 1 }).waitFor();
  await assertAccessible(t, page, 'set-up (fresh)');
  await screenshot(page, 'setup');

  // Claim the first owner.
  await page.getByLabel('Owner email').fill('first@example.org');
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Claim first owner with a passkey' }).click();
  await page.getByRole('list', { name: 'Recovery codes' }).waitFor();
  const codes = await page.getByRole('list', { name: 'Recovery codes' }).locator('code').allTextContents();
  t.equal(codes.length, 10, 'ten recovery codes shown once');
  t.ok(
    await page.getByRole('button', { name: 'Confirm and continue' }).isDisabled(),
    'confirm waits for the tick',
  );
  await page.getByLabel('I have kept these codes').check();
  await page.getByRole('button', { name: 'Confirm and continue' }).click();
  await page.locator('.who', { hasText: 'first@example.org · owner' }).waitFor();
  t.pass('signed in as the first owner with the new passkey');

  // The break-glass key, made in the browser.
  await page.getByRole('button', { name: 'Generate the break-glass key in this browser' }).click();
  const send = page.getByRole('button', { name: 'Send the public key to the engine' });
  await send.waitFor();
  t.ok(await send.isDisabled(), 'the public half is not sent before the secret half is saved');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Download secret key file' }).click(),
  ]);
  t.equal(download.suggestedFilename(), 'coffer-break-glass.key');
  const keyFile = join(stack.dataDir, 'operator', 'coffer-break-glass.key');
  mkdirSync(join(stack.dataDir, 'operator'), { recursive: true });
  await download.saveAs(keyFile);
  const secretText = readFileSync(keyFile, 'utf8');
  const secret = decodeKeyFile(secretText);
  t.equal(secret.kind, 'recipient-secret', 'the download is the secret key file');
  const fp = fingerprint(recipientPublicKeyFromSecret(secret.key));
  t.ok(await page.getByText(fp).isVisible(), 'the page shows the fingerprint of that key');
  await assertAccessible(t, page, 'set-up (key generated)');
  await page.getByLabel('I have saved the secret key file somewhere safe').check();
  await send.click();
  // The checklist item turns done and names the key in force.
  await page.locator('li', { hasText: 'In force:' }).getByText(fp).waitFor();

  // The key material lines (not the armour, the version or the public fingerprint header).
  const secretLines = secretText
    .split('\n')
    .filter((l) => l.length >= 32 && !l.startsWith('-----') && !l.includes(':'));
  t.ok(secretLines.length > 0);
  t.notOk(
    sent.some((b) => secretLines.some((l) => b.includes(l))),
    'no request from the page carried any part of the secret key',
  );
  const status = await stack.admin('GET', '/admin/status');
  t.equal(status.body.keysReady, true, 'the engine is ready');
  const setupState = await stack.admin('GET', '/admin/setup-state');
  t.equal(
    setupState.body.fingerprints.breakGlass,
    fp,
    'the engine holds the public half of the downloaded key',
  );
  await page.reload();
  await page.getByText('Set-up is complete').waitFor();
  await screenshot(page, 'setup-complete');

  // A run seals to it; coffer-recover opens it with the downloaded key alone.
  const source = join(stack.dataDir, 'source');
  mkdirSync(join(source, 'sub'), { recursive: true });
  writeFileSync(join(source, 'a.txt'), 'hello from the worst day\n');
  writeFileSync(join(source, 'sub', 'b.bin'), Buffer.alloc(70_000, 7));
  t.equal(
    (
      await stack.admin('POST', '/admin/jobs', {
        id: 'docs',
        cadenceSeconds: 86400,
        source: { type: 'files', path: source },
      })
    ).status,
    200,
  );
  const runId = await triggerRun(stack, 'docs');
  let run: { runId: string; status: string } | undefined;
  for (let i = 0; i < 300; i++) {
    const h = await stack.admin('GET', '/admin/history?id=docs');
    run = (h.body.runs as { runId: string; status: string }[] | undefined)?.find((r) => r.runId === runId);
    if (run && run.status !== 'running' && run.status !== 'parked') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(run?.status, 'ok', 'the run sealed and verified');
  const out = join(stack.dataDir, 'recovered');
  const r = spawnSync(
    process.execPath,
    [
      RECOVER_CLI,
      'extract',
      '--from',
      join(stack.dataDir, 'engine', 'destination'),
      '--run',
      run!.runId,
      '--job',
      'docs',
      '--key',
      keyFile,
      '--to',
      out,
      '--pin-signer',
      setupState.body.fingerprints.signer,
      '--no-progress',
    ],
    { encoding: 'utf8' },
  );
  t.equal(r.status, 0, `coffer-recover extract: ${r.stderr}`);
  t.equal(readFileSync(join(out, 'a.txt'), 'utf8'), 'hello from the worst day\n', 'recovered offline');
  t.same(readFileSync(join(out, 'sub', 'b.bin')), Buffer.alloc(70_000, 7));
  t.same(p.problems, [], 'no CSP violation or page error');
});
