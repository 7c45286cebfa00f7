// POST /admin/update/apply and the guards in order, through a started engine on SQLite and
// PostgreSQL against a real https channel: dry run (the default) replying `dry-run` with the steps
// passed; no-update; forward-only and the downgrade opt-in; the schema epoch; the migration and
// compat guards; a tampered artefact; a live apply refused without the one-shot deploy token and
// going, with it, through the upload under <data dir>/releases/ and the promote (pointers switched,
// `restarting`; this in-process engine has no restart hook, restart.test.ts runs a real process);
// the anti-rollback floor, raised by a settle and refusing lower targets also after a restart
// against the same store, with or without the downgrade opt-in.
import { existsSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { postgresUrl, tempDir } from '@coffer/testkit';
import { inRamp } from '@coffer/update';
import t from 'tap';
import { artefact, BACKENDS, channelSite, release, updateEngine } from './helpers.ts';

const GUARDS_AND_VERIFY = [
  'no-update',
  'floor',
  'forward-only',
  'schema-epoch',
  'migration',
  'compat',
  'verify-artefact',
  'record-rollback-target',
];

for (const backend of BACKENDS)
  t.test(`apply: guards, dry run, deploy token, upload, floor (${backend})`, async (t) => {
    const site = await channelSite(t);
    site.publish(release({ sequence: 1 }));
    const databaseUrl = backend === 'postgres' ? await postgresUrl() : undefined;
    const dataDir = tempDir(t);
    const e = await updateEngine(t, site, { databaseUrl, dataDir });

    // Dry run by default: every step before the dry-run stop passed, nothing persisted or placed.
    const dry = await e.post('/update/apply', {});
    t.equal(dry.status, 200, dry.text);
    const d = dry.json();
    t.match(d, {
      outcome: 'dry-run',
      step: 'dry-run',
      code: null,
      record: {
        status: 'pending',
        components: ['console', 'engine'],
        from: { engine: '1.3.0', console: null },
      },
    });
    t.same(d.passed, GUARDS_AND_VERIFY);
    t.same((await e.get('/update/status')).json().record, null, 'a dry run persists no record');
    t.notOk(existsSync(join(dataDir, 'releases')), 'nothing uploaded');

    // no-update: the engine is already on the channel's version.
    site.publish(release({ sequence: 2, version: '1.3.0', console: null }));
    t.match((await e.post('/update/apply', {})).json(), {
      outcome: 'no-update',
      step: 'no-update',
      passed: [],
    });

    // Forward-only: an older release needs the opt-in; across a schema epoch never.
    site.publish(release({ sequence: 3, version: '1.2.0', console: null }));
    const older = await e.post('/update/apply', {});
    t.equal(older.status, 409);
    t.match(older.json(), {
      outcome: 'refused',
      step: 'forward-only',
      code: 'ERR_UPDATE_FORWARD_ONLY',
      passed: ['no-update', 'floor'],
    });
    t.match((await e.post('/update/apply', { allowDowngrade: true })).json(), { outcome: 'dry-run' });
    site.publish(release({ sequence: 4, version: '1.2.0', console: null, recommended: { schemaEpoch: 0 } }));
    t.match((await e.post('/update/apply', { allowDowngrade: true })).json(), {
      step: 'schema-epoch',
      code: 'ERR_UPDATE_SCHEMA_EPOCH',
    });

    // Migration guard: no one-click apply of a release that migrates the state store.
    site.publish(
      release({ sequence: 5, version: '1.4.0', recommended: { migration: true, schemaEpoch: 2 } }),
    );
    // (A migration release goes through the approval queue instead: approval.test.ts.)
    const mig = await e.post('/update/ramp', { percentage: 50 });
    t.equal(mig.status, 409);
    t.match(mig.json(), { step: 'migration', code: 'ERR_UPDATE_MIGRATION_GUARD' });
    t.match((await e.post('/update/apply', {})).json(), { outcome: 'dry-run', approvalRequired: true });

    // Compat guard: the running engine is older than the release's minimum.
    site.publish(release({ sequence: 6, version: '1.4.0', recommended: { minEngineVersion: '1.3.5' } }));
    t.match((await e.post('/update/apply', {})).json(), { step: 'compat', code: 'ERR_UPDATE_INCOMPATIBLE' });

    // A tampered artefact: refused against the signed SHA-384.
    const rel = release({ sequence: 7 });
    site.publish(rel);
    site.srv.routes.set('/stable/engine-1.4.0.tgz', {
      body: artefact('something else', rel.doc.components.engine.size),
    });
    const tampered = await e.post('/update/apply', {});
    t.equal(tampered.status, 409);
    t.match(tampered.json(), { step: 'verify-artefact', code: 'ERR_UPDATE_ARTEFACT_HASH' });
    site.publish(rel);

    // A live apply needs the deploy token: absent, malformed, wrong secret.
    const noToken = await e.post('/update/apply', { dryRun: false });
    t.equal(noToken.status, 403);
    t.same(noToken.json(), { error: 'deploy token required', deployTokenRequired: true });
    t.equal(
      (await e.post('/update/apply', { dryRun: false }, { 'x-engine-deploy-token': 'nope' })).status,
      403,
    );
    const token = await e.deployToken();
    t.match(token, /^cfu_[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{43}$/);
    const forged = `${token.slice(0, token.indexOf('.') + 1)}${'A'.repeat(43)}`;
    t.equal(
      (await e.post('/update/apply', { dryRun: false }, { 'x-engine-deploy-token': forged })).status,
      403,
    );
    t.equal(
      (await e.post('/update/apply', { dryRun: false }, { 'x-engine-deploy-token': token })).status,
      403,
      'a wrong secret used the token up',
    );
    const stored = JSON.stringify(await e.app.state.identity.getToken(token.slice(4, 20)));
    t.notOk(stored.includes(token.slice(21)), 'the store never holds the secret');

    // Nothing promoted yet: settle and rollback refuse with their codes.
    const early = await e.post('/update/settle', { verdict: 'alive' });
    t.equal(early.status, 409);
    t.match(early.json(), { outcome: 'refused', code: 'ERR_UPDATE_NO_PENDING' });
    t.match((await e.post('/update/rollback', {})).json(), { code: 'ERR_UPDATE_NO_ROLLBACK_TARGET' });

    // With a fresh token: uploaded, read back, promoted (console first, engine last), and the
    // engine would now restart into the release (202 restarting, the record persisted settling).
    const live = await e.deployToken();
    const up = await e.post('/update/apply', { dryRun: false }, { 'x-engine-deploy-token': live });
    t.equal(up.status, 202, up.text);
    const u = up.json();
    t.match(u, {
      outcome: 'restarting',
      step: 'promote',
      restart: true,
      record: {
        status: 'pending',
        phase: 'settling',
        shape: 'apply',
        readBack: { mode: 'warn', mismatched: [] },
      },
    });
    t.same(u.passed, [...GUARDS_AND_VERIFY, 'dry-run', 'destination', 'upload', 'read-back', 'promote']);
    t.same(
      readdirSync(join(dataDir, 'releases')).filter((n) => !n.startsWith('.')),
      ['1.4.0'],
    );
    t.same(
      readdirSync(join(dataDir, 'console-releases')).filter((n) => !n.startsWith('.')),
      ['1.4.0'],
    );
    t.ok(existsSync(join(dataDir, 'releases', '1.4.0', 'engine', 'main.js')), 'the release is unpacked');
    t.equal(readlinkSync(join(dataDir, 'current')), join('releases', '1.4.0'), 'engine pointer switched');
    t.equal(
      readlinkSync(join(dataDir, 'console-current')),
      join('console-releases', '1.4.0'),
      'console pointer switched',
    );
    t.equal(
      (await e.post('/update/apply', { dryRun: false }, { 'x-engine-deploy-token': live })).status,
      403,
      'the token works once',
    );
    const status = (await e.get('/update/status')).json();
    t.match(status, {
      configured: true,
      deployer: 'directory',
      destinationConfigured: true,
      promote: 'restart',
      record: { id: u.record.id, phase: 'settling' },
      lastAccepted: { sequence: 7 },
    });

    const rs = await e.post(
      '/update/ramp/settle',
      { verdict: 'alive' },
      { 'x-engine-deploy-token': await e.deployToken() },
    );
    t.equal(rs.status, 409);
    t.match(rs.json(), { code: 'ERR_UPDATE_NOT_RAMP_RECORD' }, 'ramp/settle refuses an apply-shaped record');

    // Settle, as the canary (restart.test.ts) or the operator would after the restart.
    const settled = await e.post('/update/settle', { verdict: 'alive' });
    t.equal(settled.status, 200, settled.text);
    t.match(settled.json(), {
      outcome: 'applied',
      record: { status: 'settled', floors: { engine: '1.4.0', console: '1.4.0' } },
    });
    t.same((await e.get('/update/status')).json().floors, { engine: '1.4.0', console: '1.4.0' });

    // The floor: a lower target is refused always, even with the opt-in, also after a restart
    // (an older binary, or a restored state) against the same store.
    await e.app.close();
    const again = await updateEngine(t, site, { databaseUrl, dataDir, engineVersion: '1.3.0' });
    site.publish(release({ sequence: 8, version: '1.3.5' }));
    for (const body of [{}, { allowDowngrade: true }]) {
      const r = await again.post('/update/apply', body);
      t.equal(r.status, 409);
      t.match(
        r.json(),
        { step: 'floor', code: 'ERR_UPDATE_BELOW_FLOOR', passed: ['no-update'] },
        JSON.stringify(body),
      );
    }
    t.match((await again.get('/updates')).json(), {
      floors: { engine: '1.4.0' },
      updateAvailable: false,
      components: [{ component: 'engine', verdict: 'refused', code: 'ERR_UPDATE_BELOW_FLOOR' }],
    });

    // Audit rows: the actions of docs/audit.md, no token anywhere.
    const audit = await again.get('/audit?limit=200');
    const rows = (
      audit.json().events as {
        action: string;
        outcome: string;
        target: string;
        detail: Record<string, unknown>;
      }[]
    ).filter((r) => r.action.startsWith('update-'));
    t.ok(
      rows.some(
        (r) => r.action === 'update-apply' && r.detail.outcome === 'dry-run' && r.detail.dryRun === true,
      ),
    );
    t.ok(
      rows.some(
        (r) => r.action === 'update-apply' && r.outcome === 'refused' && r.detail.reason === 'deploy-token',
      ),
    );
    t.ok(
      rows.some(
        (r) => r.action === 'update-apply' && r.detail.outcome === 'restarting' && r.target === '1.4.0',
      ),
    );
    t.ok(rows.some((r) => r.action === 'update-settle' && r.detail.outcome === 'applied'));
    t.ok(rows.some((r) => r.action === 'update-rollback' && r.outcome === 'refused'));
    t.notMatch(audit.text, /cfu_/, 'no deploy token in the audit');
    t.notMatch(e.logs.join(''), /cfu_/, 'nor in the log');
  });

t.test('ramp: engine only, dry run by default, its record settled only by ramp/settle', async (t) => {
  const site = await channelSite(t);
  site.publish(release({ sequence: 1 }));
  // A replica outside a 25 % ramp of 1.4.0 (ramp.test.ts covers one inside).
  const dataDir = tempDir(t);
  let id = 0;
  while (inRamp(`outside-${id}`, '1.4.0', 25)) id++;
  writeFileSync(join(dataDir, 'instance-id'), `outside-${id}\n`);
  const e = await updateEngine(t, site, { dataDir });

  const con = await e.post('/update/ramp', { percentage: 10, components: ['engine', 'console'] });
  t.equal(con.status, 400);
  t.match(con.json(), { outcome: 'refused', code: 'ERR_UPDATE_RAMP_CONSOLE', step: null });
  t.equal((await e.post('/update/ramp', { percentage: 0 })).status, 400, 'percentage 1 to 100');
  t.equal((await e.post('/update/ramp', {})).status, 400, 'percentage required');

  const dry = await e.post('/update/ramp', { percentage: 25 });
  t.equal(dry.status, 200, dry.text);
  t.match(dry.json(), {
    outcome: 'dry-run',
    record: { shape: 'ramp', components: ['engine'], ramp: { percentage: 25 } },
  });
  t.equal(
    (await e.post('/update/ramp', { percentage: 25, dryRun: false })).status,
    403,
    'live needs the token',
  );

  const up = await e.post(
    '/update/ramp',
    { percentage: 25, dryRun: false },
    { 'x-engine-deploy-token': await e.deployToken() },
  );
  t.equal(up.status, 200, up.text);
  t.match(up.json(), { outcome: 'ramping', record: { shape: 'ramp', phase: 'ramping' } });
  t.notOk(existsSync(join(dataDir, 'current')), 'this replica is outside the ramp: nothing moved');

  const settle = await e.post('/update/settle', { verdict: 'alive' });
  t.equal(settle.status, 409);
  t.match(settle.json(), { code: 'ERR_UPDATE_RAMP_RECORD' }, 'settle refuses a ramp-shaped record');
  t.equal(
    (await e.post('/update/ramp/settle', { verdict: 'alive' })).status,
    403,
    'ramp/settle needs the token',
  );
  const dead = await e.post(
    '/update/ramp/settle',
    { verdict: 'dead' },
    { 'x-engine-deploy-token': await e.deployToken() },
  );
  t.equal(dead.status, 200, dead.text);
  t.match(
    dead.json(),
    { outcome: 'rolled-back', record: { shape: 'ramp', status: 'settled', outcome: 'rolled-back' } },
    'a dead ramp rolls back',
  );

  site.publish(release({ sequence: 2, recommended: { migration: true, schemaEpoch: 2 } }));
  t.match((await e.post('/update/ramp', { percentage: 25 })).json(), { code: 'ERR_UPDATE_MIGRATION_GUARD' });
  const audit = (await e.get('/audit?action=update-ramp&limit=50')).json();
  t.ok((audit.events as { detail: { percent: number } }[]).some((r) => r.detail.percent === 25));
});

t.test('container deployer: a destination is an image; the reply says what to do', async (t) => {
  const site = await channelSite(t);
  site.publish(release({ sequence: 1, console: null }));
  const bare = await updateEngine(t, site, { env: { ENGINE_UPDATE_DEPLOYER: 'container' } });
  const refused = await bare.post(
    '/update/apply',
    { dryRun: false },
    { 'x-engine-deploy-token': await bare.deployToken() },
  );
  t.equal(refused.status, 409);
  t.match(refused.json(), { step: 'destination', code: 'ERR_UPDATE_NO_DESTINATION' });
  t.match((await bare.post('/update/apply', {})).json(), { outcome: 'dry-run' }, 'a dry run needs none');

  const withImage = await updateEngine(t, site, {
    env: { ENGINE_UPDATE_DEPLOYER: 'container', ENGINE_UPDATE_IMAGE: 'ghcr.io/acme/coffer-engine' },
  });
  const up = await withImage.post(
    '/update/apply',
    { dryRun: false },
    { 'x-engine-deploy-token': await withImage.deployToken() },
  );
  t.equal(up.status, 202, up.text);
  t.match(up.json(), {
    outcome: 'restarting',
    record: { phase: 'settling' },
    orchestrator: {
      message: 'set the image of the engine deployment to ghcr.io/acme/coffer-engine:1.4.0 and restart it',
    },
  });
  t.notOk(existsSync(join(withImage.dataDir, 'releases')), 'nothing placed on disk');
});
