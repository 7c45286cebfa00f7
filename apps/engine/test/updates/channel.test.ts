// GET /admin/updates through a started engine, on SQLite and PostgreSQL, against a real https
// channel on 127.0.0.1 under a test CA: unconfigured, verified (update available, compatible, the
// per-component view), and every verification failure answered inside the payload (expired,
// lowered sequence after a restart, wrong signer), never as an error status. Any authenticated
// caller may check; the status route needs job.read; writes need keys.ceremony.
import { postgresUrl, tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http } from '../helpers/engine.ts';
import { BACKENDS, channelSite, otherSigner, release, updateEngine } from './helpers.ts';

t.test('unconfigured channel: configured false, never an error', async (t) => {
  const e = await updateEngine(t, null);
  const r = await e.get('/updates');
  t.equal(r.status, 200, r.text);
  t.match(r.json(), {
    configured: false,
    verified: false,
    running: { engine: '1.3.0', console: null },
    floors: {},
    schemaEpoch: 1,
    lastAccepted: null,
  });
  const apply = await e.post('/update/apply', {});
  t.equal(apply.status, 409);
  t.match(apply.json(), { outcome: 'refused', step: 'channel', code: null, error: /no update channel/ });
  const bodiless = await http(`${e.url}/admin/update/apply`, { method: 'POST', headers: bearer() });
  t.equal(bodiless.status, 409, 'no body at all is the defaults (a dry run)');
  t.match(bodiless.json(), { step: 'channel' });
  t.equal((await e.post('/update/apply', { dryRun: 'no' })).status, 400, 'wrong type');
  t.equal((await e.post('/update/apply', { force: true })).status, 400, 'unknown field');
  t.equal((await http(`${e.url}/admin/updates`)).status, 401, 'authentication still required');
});

for (const backend of BACKENDS)
  t.test(`channel check (${backend})`, async (t) => {
    const site = await channelSite(t);
    site.publish(
      release({ sequence: 8, recommended: { minEngineVersion: '1.2.0', requiredSteps: ['read the notes'] } }),
    );
    const databaseUrl = backend === 'postgres' ? await postgresUrl() : undefined;
    const dataDir = tempDir(t);
    const e = await updateEngine(t, site, { databaseUrl, dataDir });

    const r = await e.get('/updates');
    t.equal(r.status, 200, r.text);
    const v = r.json();
    t.match(v, {
      configured: true,
      verified: true,
      channel: { name: 'stable', sequence: 8, digest: /^sha384:[0-9a-f]{96}$/ },
      recommended: {
        version: '1.4.0',
        risk: 'routine',
        requiredSteps: ['read the notes'],
        schemaEpoch: 1,
        migration: false,
        minEngineVersion: '1.2.0',
      },
      updateAvailable: true,
      compatible: true,
      running: { engine: '1.3.0', console: null },
    });
    t.same(
      v.components.map((c: { component: string; verdict: string; newer: boolean }) => [
        c.component,
        c.verdict,
        c.newer,
      ]),
      [
        ['engine', 'update', true],
        ['console', 'update', true],
      ],
    );
    t.match(v.lastAccepted, { sequence: 8, digest: v.channel.digest }, 'the accepted sequence is persisted');

    // Concurrent checks share one fetch of the channel.
    site.srv.hits.length = 0;
    const views = await Promise.all([e.app.updates.check(), e.app.updates.check(), e.app.updates.check()]);
    t.same(
      views.map((x) => x.verified),
      [true, true, true],
    );
    t.same(site.srv.hits, ['/stable/channel.json'], 'one fetch for concurrent checks');

    // Any authenticated caller may check; status needs job.read; writes need keys.ceremony.
    const viewer = await e.session('viewer');
    const operator = await e.session('operator');
    t.equal((await e.get('/updates', viewer)).status, 200, 'a viewer checks the channel');
    t.equal((await e.get('/update/status', operator)).status, 200, 'an operator reads the status');
    for (const [who, headers] of [
      ['viewer', viewer],
      ['operator', operator],
    ] as const)
      for (const path of [
        '/update/apply',
        '/update/settle',
        '/update/rollback',
        '/update/ramp',
        '/update/ramp/settle',
        '/update/deploy-token',
      ]) {
        const res = await http(`${e.url}/admin${path}`, { headers, body: {} });
        t.equal(res.status, 403, `${who} ${path}`);
        t.match(res.json(), { error: 'forbidden', required: 'keys.ceremony' });
      }
    const audit = (await e.get('/audit?action=update-apply&limit=100')).json();
    t.ok(
      (audit.events as { outcome: string }[]).some((x) => x.outcome === 'refused'),
      'the capability refusal is audited',
    );

    // A signature by another key: verified false with the code, in a 200.
    site.publish(release({ sequence: 9 }), otherSigner.secretKey);
    t.match((await e.get('/updates')).json(), {
      configured: true,
      verified: false,
      code: 'ERR_UPDATE_WRONG_SIGNER',
      lastAccepted: { sequence: 8 },
    });

    // Expired (a frozen mirror).
    site.publish(
      release({ sequence: 9, issuedAt: '2026-01-01T00:00:00Z', expiresAt: '2026-01-02T00:00:00Z' }),
    );
    t.match((await e.get('/updates')).json(), { verified: false, code: 'ERR_UPDATE_EXPIRED' });
    const expiredApply = await e.post('/update/apply', {});
    t.equal(expiredApply.status, 409);
    t.match(expiredApply.json(), { outcome: 'refused', step: 'channel', code: 'ERR_UPDATE_EXPIRED' });

    // A replayed older document, also after a restart against the same store.
    await e.app.close();
    const again = await updateEngine(t, site, { databaseUrl, dataDir });
    site.publish(release({ sequence: 7 }));
    t.match((await again.get('/updates')).json(), {
      verified: false,
      code: 'ERR_UPDATE_SEQUENCE_ROLLBACK',
      lastAccepted: { sequence: 8 },
    });
    const replayApply = await again.post('/update/apply', {});
    t.equal(replayApply.status, 409);
    t.match(replayApply.json(), { step: 'channel', code: 'ERR_UPDATE_SEQUENCE_ROLLBACK' });

    // A newer document is accepted and recorded.
    site.publish(release({ sequence: 10, version: '1.5.0' }));
    t.match((await again.get('/updates')).json(), {
      verified: true,
      recommended: { version: '1.5.0' },
      lastAccepted: { sequence: 10 },
    });
  });

t.test('update available only for the engine row; compat reported', async (t) => {
  const site = await channelSite(t);
  // The engine is current; only the console would move: updateAvailable stays false.
  site.publish(release({ version: '1.3.0', console: '1.3.1', recommended: { minEngineVersion: '1.3.0' } }));
  const e = await updateEngine(t, site);
  const v = (await e.get('/updates')).json();
  t.equal(v.updateAvailable, false);
  t.equal(v.compatible, true);
  t.match(v.components, [
    { component: 'engine', verdict: 'current', newer: false },
    { component: 'console', verdict: 'update', newer: true },
  ]);
  site.publish(release({ sequence: 8, version: '1.5.0', recommended: { minEngineVersion: '1.4.0' } }));
  const w = (await e.get('/updates')).json();
  t.equal(w.updateAvailable, true);
  t.equal(w.compatible, false, 'running 1.3.0 is older than the minimum 1.4.0');
  t.match(w.components[0], { component: 'engine', verdict: 'refused', code: 'ERR_UPDATE_INCOMPATIBLE' });
});
