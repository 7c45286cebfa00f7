// The Updates screen in Chromium against a real engine whose update channel is a real HTTPS server
// on loopback (a throwaway CA the engine trusts through ENGINE_UPDATE_CA_FILE) serving documents
// signed with @coffer/update's signChannel by a pinned hybrid signer:
// - the screen shows what runs (engine 0.0.0, no console release) and what the channel offers
//   (1.4.0, risk, required steps, sequence), with the guards' verdict per component;
// - "Dry run" shows outcome `dry-run` with the eight lifecycle steps passed and the stop at the
//   dry-run step; nothing is written under the data dir;
// - a live apply without a deploy token is refused by the engine (403) and the dialog says to get
//   a token;
// - refusals in plain words with their code: a release that migrates the state store
//   (ERR_UPDATE_MIGRATION_GUARD, in the components table and at the migration guard of a dry
//   run) and a channel signed by another key than the pinned one (ERR_UPDATE_WRONG_SIGNER, for the
//   channel view and at the channel step of a dry run);
// - a live apply of that migration release, with a deploy token, is queued by the engine for a
//   second owner (202, nothing written) and the approval-policy panel lists it as waiting;
// - the update-approval policy: `migrations` by default (nobody set it); the owner raises it to
//   `all` (step-up, at once) and the panel shows it set by them; lowering it back answers queued
//   (202: a second owner must approve it) and the engine keeps `all`; a viewer sees the policy
//   without the choice; a second owner approves the lowering on Members and the panel shows
//   `migrations` again, set by the owner action;
// - replies answered by the browser's request routing: `queued` (202 under the update-approval
//   policy: a notice naming the owner action) and `restarting` (the screen polls the status through a 503 until the engine answers);
// - the canary section: a flight flown through the test-fault route, shown with its verdict;
// - a viewer sees the screen without any write;
// - last, a live apply: "Get a deploy token" (step-up confirmed in place) shows the token once and
//   fills it in; the live apply sends it in `x-engine-deploy-token` through the console; every
//   check, the upload and its read-back pass and `<data dir>/releases/1.6.0/` appears; the used
//   token is cleared. An engine that stops before promote answers `uploaded`: the record is shown
//   (pending, uploaded inert) and settling and rolling it back are refused with their codes. An
//   engine that promotes answers `restarting` and re-executes into the release, whose program here
//   is a stand-in answering the status as 1.6.0: the screen says the engine answers again.
// axe finds no serious violation (laptop and 390 px, where nothing scrolls sideways); no CSP
// violation or page error in either browser.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateSigner } from '@coffer/crypto';
import { type HttpsRouteServer, startHttpsRouteServer, tempDir } from '@coffer/testkit';
import { type ChannelDocument, signChannel } from '@coffer/update';
import type { Page } from 'playwright-core';
import t from 'tap';
import { confirmStepUps, noSidewaysScroll, openScreen } from './helpers/screens.ts';
import {
  assertAccessible,
  registerInPage,
  screenshot,
  signInFirstOwner,
  startStack,
} from './helpers/stack.ts';

const signer = generateSigner();
const otherSigner = generateSigner();
const HOUR = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const sha384 = (b: Uint8Array) => `sha384:${createHash('sha384').update(b).digest('hex')}`;

/**
 * The engine artefact: a gzip tarball holding `engine/main.js` (docs/updates.md "Engine
 * artefact"). Its program is a stand-in for the released engine: it answers `GET /ready` and
 * `GET /admin/update/status` as `version` on the engine's port, so a console following a restart
 * into it sees the engine answer again.
 */
function engineTarball(dir: string, version: string): Uint8Array {
  const root = join(dir, `engine-${version}`);
  mkdirSync(join(root, 'engine'), { recursive: true });
  writeFileSync(
    join(root, 'engine', 'main.js'),
    `// A stand-in for coffer-engine ${version} (apps/console/test/updates.test.ts).
const http = require('node:http');
const status = JSON.stringify({
  configured: true,
  deployer: 'directory',
  destinationConfigured: true,
  promote: 'restart',
  running: { engine: ${JSON.stringify(version)}, console: null },
  record: null,
  floors: {},
  lastAccepted: null,
  schemaEpoch: 1,
});
http
  .createServer((req, res) => {
    const path = (req.url || '/').split('?')[0];
    const known = path === '/ready' || path === '/admin/update/status';
    res.writeHead(known ? 200 : 404, { 'content-type': 'application/json' });
    res.end(known ? status : '{"error":"not found"}');
  })
  .listen(Number(process.env.PORT), process.env.HOST || '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`,
  );
  const out = join(dir, `engine-${version}.tgz`);
  execFileSync('tar', ['-czf', out, '-C', root, 'engine']);
  return new Uint8Array(readFileSync(out));
}

function artefact(label: string, size: number): Uint8Array {
  const seed = createHash('sha256').update(label).digest();
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = seed[i % seed.length]! ^ (i & 0xff);
  return out;
}

/** Publishes a release (engine and console artefacts beside the signed document). */
function publish(
  srv: HttpsRouteServer,
  dir: string,
  o: {
    sequence: number;
    version: string;
    migration?: boolean;
    secretKey?: Uint8Array;
  },
): void {
  const engine = engineTarball(dir, o.version);
  const consoleBundle = artefact(`console-${o.version}`, 2048);
  const doc: ChannelDocument = {
    kind: 'coffer-update-channel',
    v: 1,
    channel: 'stable',
    sequence: o.sequence,
    issuedAt: iso(Date.now() - HOUR),
    expiresAt: iso(Date.now() + 24 * HOUR),
    recommended: {
      version: o.version,
      risk: 'security',
      requiredSteps: ['back up the state database first'],
      schemaEpoch: 1,
      migration: o.migration ?? false,
    },
    components: {
      engine: {
        version: o.version,
        url: `engine-${o.version}.tgz`,
        sha384: sha384(engine),
        size: engine.length,
      },
      console: {
        version: o.version,
        url: `console-${o.version}.tgz`,
        sha384: sha384(consoleBundle),
        size: consoleBundle.length,
      },
    },
  };
  srv.routes.set('/stable/channel.json', { body: signChannel(doc, o.secretKey ?? signer.secretKey) });
  srv.routes.set(`/stable/engine-${o.version}.tgz`, { body: engine });
  srv.routes.set(`/stable/console-${o.version}.tgz`, { body: consoleBundle });
}

/** The apply section's lifecycle result panel with `outcome`. */
function result(page: Page, outcome: string) {
  return page
    .getByRole('region', { name: "Apply the channel's release" })
    .locator(`[data-outcome="${outcome}"]`);
}

/** Each lifecycle step of that panel and its state (passed, stopped, not reached). */
async function steps(page: Page, outcome: string): Promise<Record<string, string>> {
  const items = result(page, outcome).locator('li[data-step]');
  const out: Record<string, string> = {};
  for (const li of await items.all())
    out[(await li.getAttribute('data-step'))!] = (await li.getAttribute('data-state'))!;
  return out;
}

/** "Check the channel": the engine fetches and verifies the channel again. */
async function checkChannel(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Check the channel' }).click();
}

/** Waits until the engine row of the components table mentions `text`. */
async function engineRowHas(page: Page, text: string): Promise<void> {
  await page.waitForFunction(
    (x) => document.querySelector('tr[data-component="engine"]')?.textContent?.includes(x) === true,
    text,
  );
}

const DRY_RUN_PASSED = [
  'no-update',
  'floor',
  'forward-only',
  'schema-epoch',
  'migration',
  'compat',
  'verify-artefact',
  'record-rollback-target',
];

t.test('updates screen', async (t) => {
  const site = tempDir(t, 'coffer-console-updates-');
  const srv = await startHttpsRouteServer(t, site);
  const keyFile = join(site, 'channel-signer.pub');
  writeFileSync(keyFile, encodeKeyFile('signer-public', signer.publicKey));
  publish(srv, site, { sequence: 1, version: '1.4.0' });
  const stack = await startStack(t, {
    env: {
      ENGINE_UPDATE_CHANNEL: `${srv.origin}/stable/channel.json`,
      ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: keyFile,
      ENGINE_UPDATE_CA_FILE: srv.pki.caFile,
    },
  });
  const engineData = join(stack.dataDir, 'engine');
  const owner = await stack.persona();
  const { page } = owner;
  await signInFirstOwner(owner, stack);
  await confirmStepUps(page);

  await openScreen(owner, 'Updates');
  const running = page.getByRole('region', { name: 'What runs' });
  const offer = page.getByRole('region', { name: 'What the channel offers' });
  await offer.getByText('Engine 1.4.0 is available (running 0.0.0).').waitFor();
  t.match(await running.textContent(), /Engine0\.0\.0/, 'the running engine version');
  t.match(await running.textContent(), /Console releasenone installed/, 'no console release yet');
  const offerText = (await offer.textContent()) ?? '';
  t.match(offerText, /Recommended release1\.4\.0/, 'the recommended release');
  t.match(offerText, /Risksecurity/);
  t.match(offerText, /back up the state database first/, 'the required steps');
  t.match(offerText, /stable, sequence 1/, 'the channel and its sequence');
  const engineRow = offer.locator('tr[data-component="engine"]');
  const consoleRow = offer.locator('tr[data-component="console"]');
  t.match(await engineRow.textContent(), /engine0\.0\.01\.4\.0noneupdate available/, 'engine: update');
  t.match(await consoleRow.textContent(), /consolenone1\.4\.0noneupdate available/, 'console: update');
  // The update-approval policy: the default, set by nobody, nothing waiting; the owner's choice
  // shows it and has nothing to change yet.
  const policy = page.getByRole('region', { name: 'Approval policy' });
  await policy.locator('[data-policy]').waitFor();
  t.equal(
    await policy.locator('[data-policy]').getAttribute('data-policy'),
    'migrations',
    'migrations by default',
  );
  const policyText = (await policy.textContent()) ?? '';
  t.match(
    policyText,
    /Only a release that migrates the state store waits for a second owner/,
    'in plain words',
  );
  t.match(policyText, /Policymigrations only \(migrations\)/);
  t.match(policyText, /Set bynobody: this is the default/, 'never set');
  t.match(policyText, /No update is waiting for a second owner\./);
  const migrationsOnly = policy.getByRole('radio', { name: /^Migrations only/ });
  const everyRelease = policy.getByRole('radio', { name: /^Every release/ });
  const changePolicy = policy.getByRole('button', { name: 'Change the policy' });
  t.ok(await migrationsOnly.isChecked(), 'the choice shows the policy in force');
  t.notOk(await everyRelease.isChecked());
  t.ok(await changePolicy.isDisabled(), 'nothing to change yet');
  await assertAccessible(t, page, 'updates');

  // Dry run: every check up to the upload passes, nothing is written.
  await page.getByRole('button', { name: 'Dry run', exact: true }).click();
  await result(page, 'dry-run').waitFor();
  t.match(await result(page, 'dry-run').textContent(), /Dry run passed/);
  const dry = await steps(page, 'dry-run');
  t.same(
    Object.keys(dry).filter((s) => dry[s] === 'passed'),
    DRY_RUN_PASSED,
    'the eight steps passed, in order',
  );
  t.equal(dry['dry-run'], 'stopped', 'stopped at the dry-run step');
  t.equal(dry.upload, 'not reached');
  t.notOk(existsSync(join(engineData, 'releases')), 'nothing under releases/');

  // A live apply without a deploy token: the engine refuses before anything runs.
  await page.getByRole('button', { name: 'Apply live…' }).click();
  const confirm = page.getByRole('dialog', { name: 'Apply the release live?' });
  await confirm.getByText('No deploy token is filled in').waitFor();
  await confirm.getByRole('button', { name: 'Apply live', exact: true }).click();
  await confirm
    .getByRole('alert')
    .filter({ hasText: 'deploy token is missing, wrong, already used' })
    .waitFor();
  await confirm.getByRole('button', { name: 'Cancel' }).click();
  t.notOk(existsSync(join(engineData, 'releases')), 'still nothing under releases/');

  // A release that migrates the state store: the migration guard refuses it.
  publish(srv, site, { sequence: 2, version: '1.5.0', migration: true });
  await checkChannel(page);
  await engineRowHas(page, '1.5.0');
  t.match(
    await engineRow.textContent(),
    /refused: the release migrates the state store.*\(ERR_UPDATE_MIGRATION_GUARD\)/,
    "the guards' verdict in the table",
  );
  t.match(await offer.textContent(), /Migrates the state storeyes/);
  // A one-click apply stops at the migration guard (the table); a dry run answers what the
  // approved path would do and that a second owner must approve it (update-approval policy).
  await page.getByRole('button', { name: 'Dry run', exact: true }).click();
  await result(page, 'dry-run').waitFor();
  t.match(
    await result(page, 'dry-run').textContent(),
    /a live apply of this release waits for a second owner/,
    'the dry run says a second owner must approve the migration',
  );
  const mig = await steps(page, 'dry-run');
  t.equal(mig.migration, 'passed', 'the approved path passes the migration guard');
  // Live, with a deploy token: the engine takes the token, checks the approved path and queues the
  // apply for a second owner (202) instead of carrying it out; the policy panel lists it.
  await page.getByRole('button', { name: 'Get a deploy token' }).click();
  const firstToken = page.getByRole('region', { name: 'Deploy token' }).locator('output');
  await firstToken.waitFor();
  t.match((await firstToken.textContent()) ?? '', /^\s*cfu_/, 'a deploy token');
  await page.getByRole('button', { name: 'Done' }).click();
  await firstToken.waitFor({ state: 'detached' });
  await page.getByRole('button', { name: 'Apply live…' }).click();
  await confirm.getByRole('button', { name: 'Apply live', exact: true }).click();
  const queuedApply = page.getByRole('status').filter({ hasText: 'The update is queued for a second owner' });
  await queuedApply.waitFor();
  t.match(
    await result(page, 'queued').textContent(),
    /Queued: a second owner must approve this update/,
    'the engine queued the live apply',
  );
  const waiting = policy.getByRole('region', { name: 'Updates waiting for a second owner' });
  await waiting.waitFor();
  const waitingRows = waiting.locator('tbody tr');
  t.equal(await waitingRows.count(), 1, 'one update waits');
  const queuedId = await waitingRows.first().getAttribute('data-pending-update');
  t.match(
    await waitingRows.first().textContent(),
    /Apply engine 1\.5\.0, console 1\.5\.0channel sequence 2owner@example\.org/,
    'what waits and who asked',
  );
  t.match(await queuedApply.textContent(), `(owner action ${queuedId})`, 'the notice names the same action');
  t.match(await policy.textContent(), /Waiting for a second owner \(1\)/);
  t.notOk(existsSync(join(engineData, 'releases')), 'a queued apply writes nothing');

  // A channel signed by another key: not verified, and a dry run stops at the channel.
  publish(srv, site, { sequence: 3, version: '1.6.0', secretKey: otherSigner.secretKey });
  await checkChannel(page);
  const notVerified = offer.getByRole('alert').filter({ hasText: 'The channel did not verify' });
  await notVerified.waitFor();
  t.match(
    await notVerified.textContent(),
    /signed by another key than the pinned signer \(ERR_UPDATE_WRONG_SIGNER\)/,
  );
  await page.getByRole('button', { name: 'Dry run', exact: true }).click();
  await result(page, 'refused').filter({ hasText: 'WRONG_SIGNER' }).waitFor();
  t.match(
    await result(page, 'refused').textContent(),
    /Refused at Channel fetched and verified: the channel is signed by another key.*\(ERR_UPDATE_WRONG_SIGNER\)/,
  );

  // Replies this engine does not give yet, answered by the browser's routing.
  await page.route('**/admin/update/apply', (route) =>
    route.fulfill({
      status: 202,
      contentType: 'application/json',
      body: JSON.stringify({
        outcome: 'queued',
        step: 'approval',
        code: null,
        passed: DRY_RUN_PASSED,
        record: null,
        message: 'a second owner approves this apply (POST /admin/owner-actions/oa_42/approve)',
        approvalRequired: true,
        ownerActionQueued: true,
        approval: { id: 'oa_42', action: 'update-apply', status: 'pending' },
      }),
    }),
  );
  await page.getByRole('button', { name: 'Dry run', exact: true }).click();
  await page
    .getByRole('status')
    .filter({ hasText: 'queued for a second owner (owner action oa_42)' })
    .waitFor();
  t.match(
    await result(page, 'queued').textContent(),
    /Queued: a second owner must approve/,
    'the reply says so too',
  );
  await page.unroute('**/admin/update/apply');
  await page.route('**/admin/update/apply', (route) =>
    route.fulfill({
      status: 200,
      contentType: 'application/json',
      body: JSON.stringify({
        outcome: 'restarting',
        step: 'promote',
        code: null,
        passed: [],
        record: null,
        version: '0.0.0',
      }),
    }),
  );
  let down = 2;
  await page.route('**/admin/update/status', (route) =>
    down-- > 0 ? route.fulfill({ status: 503, body: 'engine restarting' }) : route.continue(),
  );
  await page.getByRole('button', { name: 'Dry run', exact: true }).click();
  await page.getByRole('status').filter({ hasText: 'The engine is restarting into 0.0.0' }).waitFor();
  await page.getByRole('status').filter({ hasText: 'The engine answers again, running 0.0.0.' }).waitFor();
  t.ok(down < 0, 'the screen polled through the restart');
  await page.unroute('**/admin/update/apply');
  await page.unroute('**/admin/update/status');

  // The canary: flown once (test-fault canary-tick), its flight shown with its verdict.
  const tick = await stack.admin('POST', '/admin/test-fault/canary-tick', {});
  t.equal(tick.status, 200, 'the canary flew');
  t.equal(tick.body.canary.verdict, 'alive');
  await page.reload();
  const canary = page.getByRole('region', { name: 'Canary' });
  await canary.getByText('Flies every').waitFor();
  const flights = canary.getByRole('region', { name: 'Canary flights to default' });
  await flights.waitFor();
  t.match(await flights.textContent(), /alive/, 'the flight and its verdict are shown');

  // The owner raises the policy to every release: at once (step-up confirmed in place).
  await everyRelease.check();
  t.ok(await changePolicy.isEnabled(), 'a change to make');
  await changePolicy.click();
  await policy.getByRole('status').filter({ hasText: 'The policy is now every release.' }).waitFor();
  await policy.locator('[data-policy="all"]').waitFor();
  const raised = (await policy.textContent()) ?? '';
  t.match(raised, /Every live apply and every live ramp waits for a second owner\./, 'the panel shows all');
  t.match(raised, /Policyevery release \(all\)/);
  t.match(raised, /Set byyou, /, 'set by the owner');
  t.ok(await everyRelease.isChecked(), 'the choice follows');
  t.match(
    (await stack.admin('GET', '/admin/update/policy')).body,
    { approval: 'all' },
    'the engine holds all',
  );

  // Lowering it back is an owner action: queued (202), the policy stays all until a second owner
  // approves it.
  await migrationsOnly.check();
  await changePolicy.click();
  const loweringQueued = policy
    .getByRole('status')
    .filter({ hasText: 'a second owner must approve lowering the policy to migrations only' });
  await loweringQueued.waitFor();
  const actions = (await stack.admin('GET', '/admin/owner-actions')).body.actions as {
    id: string;
    action: string;
    status: string;
    params?: unknown;
  }[];
  const lowering = actions.find((a) => a.action === 'update-policy');
  t.match(lowering, { status: 'pending', params: { approval: 'migrations' } }, 'the owner action is queued');
  const loweringText = (await loweringQueued.textContent()) ?? '';
  t.match(loweringText, /^Not changed yet: a second owner must approve/, 'the reply says so plainly');
  t.match(loweringText, `owner action ${lowering!.id}`, 'naming the owner action');
  t.match(loweringText, /on the Members screen\. Until then the policy stays every release\./);
  t.equal(
    (await stack.admin('GET', '/admin/update/policy')).body.approval,
    'all',
    'the engine keeps all until approved',
  );
  t.equal(await policy.locator('[data-policy]').getAttribute('data-policy'), 'all', 'and the panel too');
  t.ok(await everyRelease.isChecked(), 'the choice shows the policy in force again');

  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole('heading', { level: 1, name: 'Updates' }).waitFor();
  t.ok(await noSidewaysScroll(page), 'no sideways scroll at 390 px');
  await assertAccessible(t, page, 'updates (390 px)');
  await page.setViewportSize({ width: 1280, height: 860 });
  t.same(owner.problems, [], "no CSP violation or page error in the owner's browser");

  // A viewer: the screen, without any write.
  const invite = await stack.admin('POST', '/admin/roles/invite', {
    email: 'viewer@example.org',
    role: 'viewer',
  });
  t.equal(invite.status, 200, 'viewer invited');
  const viewer = await stack.persona();
  await viewer.page.goto(`${stack.origin}/`);
  await registerInPage(viewer.page, 'viewer@example.org', {}, { inviteToken: invite.body.inviteToken });
  await viewer.page.goto(`${stack.origin}/`);
  await openScreen(viewer, 'Updates');
  const vp = viewer.page;
  await vp.getByRole('region', { name: 'What runs' }).getByText('0.0.0').waitFor();
  await vp.getByRole('region', { name: 'Current update' }).getByText('No update on record yet.').waitFor();
  await vp.getByText('Only an owner (the keys.ceremony capability)').waitFor();
  const viewerPolicy = vp.getByRole('region', { name: 'Approval policy' });
  await viewerPolicy.locator('[data-policy="all"]').waitFor();
  const viewerPolicyText = (await viewerPolicy.textContent()) ?? '';
  t.match(
    viewerPolicyText,
    /Every live apply and every live ramp waits for a second owner\./,
    'the viewer sees it',
  );
  t.match(viewerPolicyText, /Apply engine 1\.5\.0, console 1\.5\.0/, 'and what waits');
  t.match(viewerPolicyText, /Only an owner changes the update-approval policy\./);
  t.equal(await viewerPolicy.getByRole('radio').count(), 0, 'no policy choice for a viewer');
  for (const name of [
    'Dry run',
    'Get a deploy token',
    'Apply live…',
    'Roll back every component',
    'Settle: it works',
    'Change the policy',
  ])
    t.equal(await vp.getByRole('button', { name, exact: true }).count(), 0, `no "${name}" for a viewer`);
  await assertAccessible(t, vp, 'updates (viewer)');
  t.same(viewer.problems, [], "no CSP violation or page error in the viewer's browser");
  await viewer.context.close();

  // A second owner (invited by the owner on Members: the admin token never grants owner) approves
  // the lowering in the owner-action queue there: the policy is migrations only again (set by the
  // owner action), so the live apply below runs at once.
  await openScreen(owner, 'Members');
  await page.getByLabel('Email', { exact: true }).fill('second-owner@example.org');
  await page.getByLabel('Role', { exact: true }).selectOption('owner');
  await page.getByRole('button', { name: 'Create invite link' }).click();
  const inviteLink = (await page.locator('output.secret').textContent()) ?? '';
  const inviteToken = new URLSearchParams(new URL(inviteLink).hash.slice(1)).get('invite');
  t.ok(inviteToken, 'the second owner is invited');
  await page.getByRole('button', { name: 'Done' }).click();
  const second = await stack.persona();
  await second.page.goto(`${stack.origin}/`);
  await registerInPage(second.page, 'second-owner@example.org', {}, { inviteToken: inviteToken! });
  await second.page.goto(`${stack.origin}/`);
  await confirmStepUps(second.page);
  await openScreen(second, 'Members');
  await second.page.getByRole('button', { name: 'Approve: Lower the update-approval policy' }).click();
  await second.page.getByRole('dialog').getByRole('button', { name: 'Approve and carry out' }).click();
  await second.page.getByText(/: carried out\./).waitFor();
  t.same(second.problems, [], "no CSP violation or page error in the second owner's browser");
  await second.context.close();
  t.match(
    (await stack.admin('GET', '/admin/update/policy')).body,
    { approval: 'migrations', setBy: 'owner-action' },
    'the approval lowered the policy',
  );
  await openScreen(owner, 'Updates');
  await policy.locator('[data-policy="migrations"]').waitFor();
  t.match(
    await policy.textContent(),
    /Set bya second owner's approval \(owner action\), /,
    'the panel shows who',
  );

  // Last, a live apply of a good release: get the deploy token (step-up, shown once, filled in),
  // send it, and follow the engine as far as this build goes: `uploaded` (the release inert under
  // releases/<version>/, stopped before promote), or `restarting` where the engine promotes and
  // re-executes into the release (then the release's stand-in answers the screen's polling).
  publish(srv, site, { sequence: 4, version: '1.6.0' });
  await checkChannel(page);
  await engineRowHas(page, '0.0.01.6.0none');
  await page.getByRole('button', { name: 'Get a deploy token' }).click();
  const shown = page.getByRole('region', { name: 'Deploy token' }).locator('output');
  await shown.waitFor();
  const token = ((await shown.textContent()) ?? '').trim();
  t.match(token, /^cfu_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, 'the token is shown once');
  const tokenField = page.getByLabel('Deploy token for the next live step');
  t.equal(await tokenField.inputValue(), token, 'and filled in for the live step');
  await screenshot(page, 'updates');

  await page.getByRole('button', { name: 'Apply live…' }).click();
  t.equal(await confirm.getByText('No deploy token is filled in').count(), 0, 'no warning with a token');
  const sent = page.waitForRequest(
    (r) =>
      r.method() === 'POST' && r.url().endsWith('/admin/update/apply') && r.postDataJSON()?.dryRun === false,
  );
  await confirm.getByRole('button', { name: 'Apply live', exact: true }).click();
  t.equal((await sent).headers()['x-engine-deploy-token'], token, 'the browser sent the token header');
  const live = result(page, 'uploaded').or(result(page, 'restarting'));
  await live.waitFor();
  const outcome = await live.getAttribute('data-outcome');
  const liveSteps = await steps(page, outcome!);
  const passed = Object.keys(liveSteps).filter((s) => liveSteps[s] === 'passed');
  t.same(
    passed.slice(0, 12),
    [...DRY_RUN_PASSED, 'dry-run', 'destination', 'upload', 'read-back'],
    'passed every check, the upload and its read-back',
  );
  t.match(await live.textContent(), /engine 0\.0\.0 → 1\.6\.0/);
  const release = join(engineData, 'releases', '1.6.0');
  t.ok(existsSync(release), 'releases/1.6.0/ is in place');
  t.ok(
    existsSync(join(release, 'engine', 'main.js')) || existsSync(join(release, 'engine-1.6.0.tgz')),
    'holding the verified artefact',
  );
  t.equal(await tokenField.inputValue(), '', 'the used token is cleared');
  t.same(owner.problems, [], "no CSP violation or page error in the owner's browser");

  if (outcome === 'uploaded') {
    t.equal(liveSteps.promote, 'stopped', 'stopped before promote');
    const status = (await stack.admin('GET', '/admin/update/status')).body;
    t.match(status.record, { status: 'pending', phase: 'uploading', to: { engine: '1.6.0' } }, 'the record');
    // The record; settle and rollback are refused (nothing was promoted), in plain words.
    const current = page.getByRole('region', { name: 'Current update' });
    await current.locator('[data-record-phase="uploading"]').waitFor();
    const recordText = (await current.textContent()) ?? '';
    t.match(recordText, /Statuspending/);
    t.match(recordText, /uploaded inert/);
    t.match(recordText, /engine0\.0\.0 → 1\.6\.0/);
    t.match(recordText, /consolenone → 1\.6\.0/);
    await assertAccessible(t, page, 'updates after a live apply');
    await current.getByRole('button', { name: 'Roll back every component' }).click();
    const rollback = page.getByRole('dialog', { name: 'Roll back every component of this update?' });
    await rollback.getByRole('button', { name: 'Roll back', exact: true }).click();
    await rollback.waitFor({ state: 'hidden' });
    const refusedRollback = current.getByRole('region', { name: 'Rollback: refused' });
    await refusedRollback.waitFor();
    t.match(
      await refusedRollback.textContent(),
      /there is nothing to go back to.*\(ERR_UPDATE_NO_ROLLBACK_TARGET\)/,
      'the rollback refusal with its code',
    );
    await current.getByRole('button', { name: 'Settle: it works' }).click();
    await page
      .getByRole('dialog', { name: 'Settle the update as alive?' })
      .getByRole('button', { name: 'Settle as alive' })
      .click();
    const refusedSettle = current.getByRole('region', { name: 'Settle: refused' });
    await refusedSettle.waitFor();
    t.match(await refusedSettle.textContent(), /\(ERR_UPDATE_[A-Z_]+\)/, 'the settle refusal with its code');
    t.same(owner.problems, [], 'still no CSP violation or page error');
  } else {
    // The engine re-executes into releases/1.6.0/engine/main.js: the stand-in below answers the
    // status as 1.6.0 once it listens, and the screen says the engine is back.
    await page.getByRole('status').filter({ hasText: 'The engine is restarting into 1.6.0' }).waitFor();
    await page
      .getByRole('status')
      .filter({ hasText: 'The engine answers again, running 1.6.0.' })
      .waitFor({ timeout: 60_000 });
    t.pass('the screen followed the restart into 1.6.0');
    t.same(owner.problems, [], 'no page error while following the restart');
  }
});
