// The whole update lifecycle on a real engine process (docs/updates.md "Promote and restart"):
// the installed engine (this repository, version 0.0.0) is updated from a real https channel on
// loopback to a real release artefact built from this repository (scripts/build-release.mjs,
// stamped 0.1.0). The engine re-executes itself into the release (same process id); its canary
// is then made to fail on purpose (test-fault routes) and the engine rolls back on its own; a
// restart proves the persisted outcome; a second apply settles `applied` and raises the floor,
// which then refuses an older release across another restart.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import type { ChannelDocument } from '@coffer/update';
import t from 'tap';
import { ADMIN_TOKEN, bearer, ENGINE_MAIN, freePort, http } from '../helpers/engine.ts';
import { channelSite } from './helpers.ts';

const BUILD = join(import.meta.dirname, '..', '..', 'scripts', 'build-release.mjs');
const HOUR = 3600_000;
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

function buildRelease(dir: string, version: string): { name: string; bytes: Uint8Array; sha384: string } {
  const out = JSON.parse(
    execFileSync(process.execPath, [BUILD, '--out', dir, '--version', version], { encoding: 'utf8' }),
  ) as { file: string; sha384: string };
  return { name: `engine-${version}.tgz`, bytes: readFileSync(out.file), sha384: out.sha384 };
}

function doc(sequence: number, version: string, a: { name: string; bytes: Uint8Array; sha384: string }) {
  const d: ChannelDocument = {
    kind: 'coffer-update-channel',
    v: 1,
    channel: 'stable',
    sequence,
    issuedAt: iso(Date.now() - HOUR),
    expiresAt: iso(Date.now() + 24 * HOUR),
    recommended: { version, risk: 'routine', requiredSteps: [], schemaEpoch: 1, migration: false },
    components: { engine: { version, url: a.name, sha384: a.sha384, size: a.bytes.length } },
  };
  return { doc: d, files: new Map([[a.name, a.bytes]]) };
}

t.test('an engine process updates itself, rolls back on a dead canary, keeps its floor', async (t) => {
  const site = await channelSite(t);
  const release = buildRelease(tempDir(t), '0.1.0');
  site.publish(doc(1, '0.1.0', release));

  const dataDir = tempDir(t, 'coffer-engine-');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    ...site.env,
    ENGINE_DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_TOKEN,
    HARNESS_TEST_FAULTS: '1',
    ENGINE_UPDATE_SETTLE_DELAY_SECONDS: '3600',
    ENGINE_LOG_LEVEL: 'warn',
  };
  let child: ChildProcess | null = null;
  let stderr = '';
  const start = () => {
    const c = spawn(process.execPath, [ENGINE_MAIN], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    c.stderr?.on('data', (d) => {
      stderr += d;
    });
    child = c;
    return c;
  };
  const stop = async () => {
    const c = child;
    if (c === null || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGTERM');
    });
  };
  t.teardown(stop);

  /** Waits until the engine answers /ready with `version` (through restarts). */
  const readyAt = async (version: string) => {
    const until = Date.now() + 90_000;
    let last = '';
    while (Date.now() < until) {
      if (child?.exitCode !== null) throw new Error(`engine exited (${child?.exitCode}): ${stderr}`);
      try {
        const r = await http(`${base}/ready`);
        last = r.text;
        if (r.status === 200 && r.json().version === version) return;
      } catch {
        // restarting: not listening for a moment
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`engine never answered as ${version} (last: ${last}) ${stderr}`);
  };
  const get = (path: string) => http(`${base}/admin${path}`, { headers: bearer() });
  const post = (path: string, body: unknown = {}, headers: Record<string, string> = {}) =>
    http(`${base}/admin${path}`, { headers: { ...bearer(), ...headers }, body });
  const token = async () => {
    const r = await post('/update/deploy-token');
    t.equal(r.status, 200, 'deploy token minted');
    return { 'x-engine-deploy-token': r.json().token as string };
  };
  const auditRows = async (action: string) => {
    const r = await get('/audit?limit=500');
    t.equal(r.status, 200);
    return (r.json().events as { action: string; detail: Record<string, unknown> }[]).filter(
      (e) => e.action === action,
    );
  };
  /** Posts, tolerating the connection closing because the engine restarts right after. */
  const postRestarting = async (path: string, body: unknown = {}) => {
    try {
      return await post(path, body);
    } catch {
      return null;
    }
  };

  const first = start();
  await readyAt('0.0.0');
  const pid = first.pid;

  // 1. A live apply: verified, uploaded, promoted, and the engine restarts into the release.
  const applied = await post('/update/apply', { dryRun: false }, await token());
  t.equal(applied.status, 202, applied.text);
  t.equal(applied.json().outcome, 'restarting');
  t.equal(applied.json().record.phase, 'settling', 'persisted settling before the restart');
  await readyAt('0.1.0');
  t.equal(child!.pid, pid, 'the same process now runs the release (re-executed, not respawned)');
  t.equal(child!.exitCode, null);
  let status = (await get('/update/status')).json();
  t.equal(status.running.engine, '0.1.0');
  t.equal(status.record.status, 'pending');
  t.equal(status.record.phase, 'settling', 'awaits its canary');
  const up = (await auditRows('engine-version-change')).find((e) => e.detail.to === '0.1.0');
  t.same(up?.detail, { from: '0.0.0', to: '0.1.0' }, 'the release observed the version change');

  // 2. The canary fails on purpose: every write to the destination is refused.
  const arm = await post('/test-fault/arm', {
    target: 'destination',
    destination: 'default',
    fault: 'access-denied',
    op: 'put',
    times: 0,
  });
  t.equal(arm.status, 200, arm.text);
  await postRestarting('/test-fault/canary-tick');
  await readyAt('0.0.0');
  t.equal(child!.pid, pid, 'rolled back in the same process');
  status = (await get('/update/status')).json();
  t.equal(status.running.engine, '0.0.0');
  t.equal(status.record.status, 'settled');
  t.equal(status.record.outcome, 'rolled-back', 'the dead canary rolled the engine back');
  t.equal(status.floors.engine ?? null, null, 'a rolled-back release raises no floor');
  const settles = await auditRows('update-settle');
  t.ok(
    settles.some((e) => e.detail.automatic === true && e.detail.verdict === 'dead'),
    'the automatic settle is audited with its verdict',
  );
  t.ok(
    (await auditRows('engine-version-change')).some(
      (e) => e.detail.from === '0.1.0' && e.detail.to === '0.0.0',
    ),
    'the rollback is observed as a version change',
  );

  // 3. A restart keeps the persisted outcome and runs the installed build.
  await stop();
  start();
  await readyAt('0.0.0');
  status = (await get('/update/status')).json();
  t.equal(status.record.outcome, 'rolled-back', 'the outcome survived the restart');

  // 4. Applied again, this time the canary lives: applied, floor raised.
  const again = await post('/update/apply', { dryRun: false }, await token());
  t.equal(again.status, 202, again.text);
  await readyAt('0.1.0');
  const tick = await post('/test-fault/canary-tick');
  t.equal(tick.status, 200, tick.text);
  t.equal(tick.json().canary.verdict, 'alive');
  status = (await get('/update/status')).json();
  t.equal(status.record.outcome, 'applied');
  t.equal(status.floors.engine, '0.1.0', 'the floor is the settled version');

  // 5. Restarted from the installed program, the launcher enters the promoted release again, and
  // an older release is refused by the floor even with the downgrade opt-in.
  await stop();
  start();
  await readyAt('0.1.0');
  const older = { ...release, name: 'engine-0.0.9.tgz' };
  site.publish(doc(2, '0.0.9', older));
  const refused = await post('/update/apply', { dryRun: true, allowDowngrade: true });
  t.equal(refused.status, 409, refused.text);
  t.equal(refused.json().code, 'ERR_UPDATE_BELOW_FLOOR');
});
