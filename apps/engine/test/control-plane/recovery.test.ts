/**
 * Control-plane recovery end to end (issue #20, docs/control-plane.md): an engine with jobs that
 * really ran into a real destination, roles and a custom role, a notification channel and rules,
 * and policies is exported (signed and sealed). Its state is then lost two ways: a second engine
 * on a fresh data dir with the same key files (plain restore), and the first engine's own control
 * plane wiped through the test-only clear route (sealed restore, opened by the real
 * `coffer-recover open-export`). Each is restored with the bare admin token and apply-staged;
 * the same jobs (configRev, cadence), grants and policies come back and the next run continues
 * the same history (seq and prevRunId). The same export imported into a third engine with other
 * keys arrives disabled, with no authority.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { passkeySubject } from '@coffer/identity';
import { postgresUrl } from '@coffer/testkit';
import t, { type Test } from 'tap';
import { type Engine, engineIn, keepKeys, makeWorld, recover, type World } from './helpers.ts';

const WEBHOOK_PATH_SECRET = 'hook-path-secret-0123456789';
const SIGNING_SECRET = 'whsec-signing-secret-0123456789';

interface Source {
  engine: Engine;
  keys: Record<string, string>;
  runs: Array<{ runId: string; seq: number; prevRunId: string | null }>;
  signed: { export: string; signature: string; signerFingerprint: string };
  sealed: Record<string, unknown>;
}

async function buildSource(t: Test, world: World): Promise<Source> {
  const a = await engineIn(t, world);
  const jobs = [
    {
      id: 'docs',
      name: 'Team docs',
      cadenceSeconds: 3600,
      source: { type: 'files', path: world.source },
      destinations: ['offsite'],
      retention: { keepLast: 10 },
    },
    {
      id: 'photos',
      cadenceSeconds: 7200,
      enabled: false,
      source: { type: 'files', path: world.source, include: ['b/**'] },
      destinations: ['offsite'],
    },
  ];
  for (const job of jobs) t.equal((await a.post('/jobs', job)).status, 200);
  // A second write bumps docs to configRev 2: the revision must survive the round trip.
  t.equal((await a.post('/jobs', { ...jobs[0], name: 'Team documents' })).status, 200);
  const runs: Source['runs'] = [];
  for (let i = 0; i < 2; i++) {
    const trig = await a.post('/trigger', { id: 'docs' });
    t.equal(trig.status, 200, trig.text);
    await a.app.runs.idle();
  }
  for (const r of (await a.get('/history?id=docs')).json().runs.reverse())
    runs.push({ runId: r.runId, seq: r.seq, prevRunId: r.prevRunId });
  t.equal(runs.length, 2);
  t.equal(runs[1]!.prevRunId, runs[0]!.runId, 'the source history is chained');

  const roles = a.app.state.roles;
  await roles.putCustomRole({
    name: 'auditor-plus',
    base: 'viewer',
    capabilities: ['audit.read'],
    description: 'reads the audit log',
  });
  await roles.assign({
    subject: passkeySubject('ada@example.org'),
    role: 'owner',
    email: 'ada@example.org',
    grantedBy: 'test',
  });
  await roles.assign({
    subject: passkeySubject('bob@example.org'),
    role: 'operator',
    email: 'bob@example.org',
    grantedBy: 'test',
  });
  await roles.assign({
    subject: passkeySubject('cy@example.org'),
    role: 'auditor-plus',
    email: 'cy@example.org',
    grantedBy: 'test',
  });
  const ch = await a.post('/notify/channels', {
    kind: 'webhook',
    name: 'Ops hook',
    url: `https://hooks.example.org/${WEBHOOK_PATH_SECRET}`,
    signingSecret: SIGNING_SECRET,
  });
  t.equal(ch.status, 200, ch.text);
  await a.app.state.settings.set('restore.approval.enabled', true);
  await a.app.state.settings.set('update.approval-policy', {
    approval: 'all',
    setBy: 'test',
    setAt: new Date().toISOString(),
  });
  await a.app.state.settings.set('identity.owner-action-gate', {
    armed: true,
    by: 'test',
    at: new Date().toISOString(),
  });

  const dl = await a.get('/control-plane/export-download');
  t.equal(dl.status, 200, dl.text);
  t.match(dl.headers.get('content-disposition'), /attachment; filename="coffer-control-plane-.*\.json"/);
  const signed = dl.json();
  t.match(signed, {
    v: 1,
    kind: 'coffer-control-plane-signed-export',
    signerFingerprint: a.app.keys.signer.fingerprint,
  });
  t.notMatch(
    dl.text,
    new RegExp(`${WEBHOOK_PATH_SECRET}|${SIGNING_SECRET}`),
    'channel secrets stay sealed in the export',
  );
  const doc = JSON.parse(signed.export);
  t.match(doc.slices.configuration.jobs, [
    { id: 'docs', configRev: 2 },
    { id: 'photos', configRev: 1 },
  ]);
  t.equal(doc.slices.resume.jobs[0].runs.length, 2);
  t.equal(doc.slices.authority.members.length, 3);
  t.match(doc.slices.configuration.notify.channels[0], { url: /^cnb1\./, signingSecret: /^cnb1\./ });

  const sl = await a.get('/control-plane/export-download?sealed=1');
  t.equal(sl.status, 200, sl.text);
  const sealed = sl.json();
  t.match(sealed, { v: 1, kind: 'coffer-control-plane-sealed-export', header: { bodyHash: /^sha384:/ } });
  t.notMatch(sl.text, /Team documents/, 'the sealed artefact shows no configuration');

  const audit = await a.app.state.audit.query({ action: 'control-plane-export' });
  t.equal(audit.length, 2, 'both downloads are audited');
  t.match(audit[0]!.event, { detail: { sealed: true, jobs: 2 } });

  const keys = keepKeys(a, world.root);
  return { engine: a, keys, runs, signed, sealed };
}

/** The restored engine carries the source's jobs, grants and policies. */
/**
 * `advance` moves the engine's scheduler clock on (the plain-restore engine runs on a clock the
 * test holds): with it the next run is the scheduler's own dispatch; without it, a trigger.
 */
async function assertRestored(t: Test, e: Engine, src: Source, advance?: (ms: number) => void) {
  const jobs = (await e.get('/jobs')).json().jobs as Array<Record<string, unknown>>;
  t.match(
    jobs.map((j) => ({
      id: j.id,
      configRev: j.configRev,
      cadenceSeconds: j.cadenceSeconds,
      enabled: j.enabled,
    })),
    [
      { id: 'docs', configRev: 2, cadenceSeconds: 3600, enabled: true },
      { id: 'photos', configRev: 1, cadenceSeconds: 7200, enabled: false },
    ],
    'same jobs, revisions and schedule',
  );
  const members = (await e.get('/roles')).json().members as Array<{ subject: string; role: unknown }>;
  const byEmail = Object.fromEntries(members.map((m) => [m.subject, m.role]));
  t.match(byEmail, {
    'passkey:ada@example.org': 'owner',
    'passkey:bob@example.org': 'operator',
  });
  t.ok((await e.app.state.roles.getCustomRole('auditor-plus')) !== null, 'the custom role is back');
  t.equal((await e.app.state.roles.get(passkeySubject('cy@example.org')))?.role, 'auditor-plus');
  t.equal(await e.app.state.settings.get('restore.approval.enabled'), true);
  t.match(await e.app.state.settings.get('update.approval-policy'), { approval: 'all' });
  t.match(await e.app.state.settings.get('identity.owner-action-gate'), { armed: true });
  const channels = await e.app.state.notifications.listChannels();
  t.equal(channels.length, 1);
  const rules = await e.app.state.notifications.listRules();
  t.ok(rules.length >= 1, 'the notification rules are back');
  const status = (await e.get('/control-plane/status')).json();
  t.match(status, { recoveryNeeded: false, reasons: [], empty: false, staged: null });

  // The schedule continues from the restored history: a tick now finds docs not yet due (a job
  // without history would be due at once) and photos still paused.
  const tick = await e.app.runs.tick('test');
  t.ok(tick, 'the tick ran');
  // `dispatched` lists the run ids a tick started.
  t.same(tick?.dispatched, [], 'docs is not due: its last run was just before the export');
  t.ok(tick?.standDowns.includes('photos'), 'photos stays paused');
  // The next run continues the same job history.
  const last = src.runs[src.runs.length - 1]!;
  let scheduled: string | undefined;
  if (advance) {
    advance(3600_000 + 60_000);
    const due = await e.app.runs.tick('test');
    t.equal(due?.dispatched.length, 1, 'an hour on, the scheduler starts one run by itself');
    t.ok(due?.standDowns.includes('photos'), 'photos stays paused');
    scheduled = due?.dispatched[0];
  } else {
    const trig = await e.post('/trigger', { id: 'docs' });
    t.equal(trig.status, 200, trig.text);
  }
  await e.app.runs.idle();
  const hist = (await e.get('/history?id=docs')).json().runs;
  t.equal(hist.length, 3, 'two restored runs plus the new one');
  t.match(hist[0], { status: 'ok', seq: last.seq + 1, prevRunId: last.runId, prevRunIdStatus: 'retained' });
  if (scheduled !== undefined) t.equal(hist[0].runId, scheduled, "the new run is the scheduler's");
  t.same(
    hist.slice(1).map((r: { runId: string }) => r.runId),
    src.runs.map((r) => r.runId).reverse(),
  );
}

for (const backend of ['sqlite', 'postgres'] as const)
  t.test(
    `export, lose the state, restore plain (${backend}) and sealed, apply-staged, continue history`,
    async (t) => {
      const world = makeWorld(t);
      const src = await buildSource(t, world);

      // --- A fresh data dir with the same keys: plain restore.
      let aheadMs = 0;
      const b = await engineIn(
        t,
        world,
        {
          ...src.keys,
          ...(backend === 'postgres' ? { ENGINE_DATABASE_URL: await postgresUrl() } : {}),
        },
        { runs: { now: () => new Date(Date.now() + aheadMs) } },
      );
      t.equal(b.app.keys.signer.fingerprint, src.engine.app.keys.signer.fingerprint, 'the keys are shared');
      const before = await b.get('/control-plane/status');
      t.equal(before.status, 200, 'readable with the bare token before any owner exists');
      t.match(before.json(), {
        recoveryNeeded: true,
        empty: true,
        staged: null,
        counts: { jobs: 0, members: 0, channels: 0 },
      });
      t.ok(before.json().reasons.includes('keys-predate-state'), 'the keys are older than this state');
      t.ok(before.json().reasons.includes('archives-in-destination'), 'archives of this signer exist');

      const viewer = await b.person('vic@example.org');
      const asPerson = await b.post('/control-plane/restore', src.signed, viewer);
      t.equal(asPerson.status, 403, 'a signed-in person may not restore');
      t.match(asPerson.json(), { error: 'forbidden', required: 'bare admin token' });
      t.equal((await b.post('/control-plane/apply-staged', {}, viewer)).status, 403);

      const restored = await b.post('/control-plane/restore', src.signed);
      t.equal(restored.status, 200, restored.text);
      t.match(restored.json(), {
        ok: true,
        sealed: false,
        applied: {
          jobs: [
            { id: 'docs', outcome: 'restored', configRev: 2 },
            { id: 'photos', outcome: 'restored' },
          ],
          runs: 2,
        },
        staged: { resume: { jobs: 2, runs: 2 }, authority: { members: 3, customRoles: 1 } },
      });
      t.equal((await b.app.state.roles.list()).length, 0, 'authority waits for apply-staged');
      const history = (await b.get('/config/history')).json();
      t.match(history, { chain: { ok: true } }, 'the restored versions form an unbroken chain');
      t.same(
        history.versions.map((v: { kind: string; target: string; actor: { method: string } }) => [
          v.kind,
          v.target,
          v.actor.method,
        ]),
        [
          ['control-plane-restore', 'photos', 'admin-token'],
          ['control-plane-restore', 'docs', 'admin-token'],
        ],
        'each restored job is a config-history version',
      );
      const staged = (await b.get('/control-plane/status')).json();
      t.match(staged, {
        recoveryNeeded: true,
        reasons: ['restore-staged'],
        staged: { sealed: false, members: 3 },
      });
      t.equal((await b.post('/control-plane/restore', src.signed)).status, 409, 'one restore at a time');
      const applied = await b.post('/control-plane/apply-staged');
      t.equal(applied.status, 200, applied.text);
      t.match(applied.json(), { ok: true, applied: { authority: { members: 3, customRoles: 1 } } });
      t.equal((await b.post('/control-plane/apply-staged')).status, 409, 'nothing left staged');
      t.equal((await b.post('/control-plane/restore', src.signed)).status, 409, 'no longer empty');
      await assertRestored(t, b, src, (ms) => {
        aheadMs += ms;
      });
      const rows = await b.app.state.audit.query({ action: 'control-plane-restore' });
      t.match(rows.find((r) => r.event.outcome === 'applied')?.event, {
        detail: { sealed: false, signerFingerprint: src.signed.signerFingerprint, jobs: 2 },
      });
      t.equal((await b.app.state.audit.query({ action: 'control-plane-apply-staged' })).length >= 1, true);

      // --- The first engine's control plane wiped (keys, archives, audit chain kept): sealed restore.
      const a = src.engine;
      const headBefore = await a.app.state.audit.head();
      const cleared = await a.post('/test-fault/control-plane-clear');
      t.equal(cleared.status, 200, cleared.text);
      t.match(cleared.json(), { cleared: { jobs: 2, members: 3, channels: 1 } });
      t.match((await a.get('/control-plane/status')).json(), { empty: true, recoveryNeeded: true });
      t.ok((await a.app.state.audit.head())!.seq > headBefore!.seq, 'the audit chain continues');

      const sealedFile = join(world.root, 'export.sealed.json');
      writeFileSync(sealedFile, JSON.stringify(src.sealed));
      const out = join(world.root, 'opened');
      const wrong = join(world.root, 'wrong.key');
      writeFileSync(wrong, encodeKeyFile('recipient-secret', generateRecipient().secretKey), { mode: 0o600 });
      t.equal(
        recover(['open-export', '--key', wrong, '--in', sealedFile, '--out', out]).status,
        4,
        'another key: exit 4',
      );
      const opened = recover([
        'open-export',
        '--key',
        world.bgSecret,
        '--in',
        sealedFile,
        '--out',
        out,
        '--pin-signer',
        a.app.keys.signer.fingerprint,
      ]);
      t.equal(opened.status, 0, opened.stderr);
      const plaintext = JSON.parse(readFileSync(join(out, 'signed-export.json'), 'utf8'));
      t.equal(readFileSync(join(out, 'export.json'), 'utf8'), plaintext.export);
      t.equal(readFileSync(join(out, 'export.sig'), 'utf8').trim(), plaintext.signature);
      t.equal(
        recover(['open-export', '--key', world.bgSecret, '--in', sealedFile, '--out', out]).status,
        7,
        'existing files are not overwritten',
      );

      // The plaintext of ANOTHER export (the plain download made earlier) does not match the signed hash.
      const mismatch = await a.post('/control-plane/restore-sealed', {
        sealed: src.sealed,
        plaintext: { ...src.signed },
      });
      t.equal(mismatch.status, 400);
      t.match(mismatch.json().error, /body hash/);
      const sealedRestore = await a.post('/control-plane/restore-sealed', { sealed: src.sealed, plaintext });
      t.equal(sealedRestore.status, 200, sealedRestore.text);
      t.match(sealedRestore.json(), { sealed: true, applied: { runs: 2 } });
      t.equal((await a.post('/control-plane/apply-staged')).status, 200);
      await assertRestored(t, a, src);

      // --- A third engine with other keys: import grants no authority, foreign jobs arrive disabled.
      const c = await engineIn(t, world);
      t.not(c.app.keys.signer.fingerprint, a.app.keys.signer.fingerprint);
      const signerPub = encodeKeyFile('signer-public', a.app.keys.signer.publicKey);
      const imported = await c.post('/control-plane/import', { ...src.signed, signerPublicKey: signerPub });
      t.equal(imported.status, 200, imported.text);
      t.match(imported.json(), {
        ok: true,
        sameSigner: false,
        items: [
          { id: 'docs', outcome: 'imported', enabled: false, configRev: 2 },
          { id: 'photos', outcome: 'imported', enabled: false },
        ],
        channels: { applied: [], skipped: [String] },
      });
      t.equal((await c.app.state.roles.list()).length, 0, 'no authority');
      t.equal(await c.app.state.settings.get('restore.approval.enabled'), undefined, 'no policy');
      t.equal((await c.app.state.runs.listForJob('docs')).length, 0, 'no run history');
      t.equal((await c.app.state.jobs.get('docs'))?.config.enabled, false);
      t.same(
        (await c.get('/config/history'))
          .json()
          .versions.map((v: { kind: string; target: string }) => [v.kind, v.target]),
        [
          ['control-plane-import', 'photos'],
          ['control-plane-import', 'docs'],
        ],
        'each imported job is a config-history version',
      );
      t.match((await c.app.state.audit.query({ action: 'control-plane-import' }))[0]?.event, {
        outcome: 'applied',
        detail: { sealed: false, jobs: 2, disabled: 2 },
      });
      const again = await c.post('/control-plane/import-sealed', {
        sealed: src.sealed,
        plaintext,
        signerPublicKey: signerPub,
      });
      t.equal(again.status, 200, again.text);
      t.match(
        again.json().items,
        [
          { id: 'docs', outcome: 'exists' },
          { id: 'photos', outcome: 'exists' },
        ],
        'never overwritten',
      );
      const otherKey = encodeKeyFile('signer-public', c.app.keys.signer.publicKey);
      const wrongSigner = await c.post('/control-plane/import', { ...src.signed, signerPublicKey: otherKey });
      t.equal(wrongSigner.status, 400, 'verified against the supplied key only');
      const bob = await c.person('bob@example.org');
      await c.app.state.roles.assign({
        subject: passkeySubject('bob@example.org'),
        role: 'operator',
        email: 'bob@example.org',
        grantedBy: 'test',
      });
      const opImport = await c.post(
        '/control-plane/import',
        { ...src.signed, signerPublicKey: signerPub },
        bob,
      );
      t.equal(opImport.status, 403, 'import needs access.policy');
      t.match(opImport.json(), { required: 'access.policy' });
      t.equal((await c.get('/control-plane/export-download', bob)).status, 403, 'so does the export');
    },
  );
