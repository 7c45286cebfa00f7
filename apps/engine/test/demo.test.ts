/**
 * `POST /admin/demo/reset` on a real engine (docs/configuration.md "Demo reset"): absent without
 * ENGINE_DEMO (404 before authentication), bare admin token only, refused while a run is running,
 * and a reset that wipes state but leaves every archive byte in its destination.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from './helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from './helpers/perimeter.ts';
import { makePki } from './helpers/tls.ts';
import { writeTree } from './runs/helpers/world.ts';

/** Every file under `dir` with the SHA-256 of its bytes. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out[p.slice(dir.length)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

t.test('without ENGINE_DEMO the route does not exist: 404 before authentication', async (t) => {
  const { url } = await startEngine(t);
  for (const headers of [{}, bearer()]) {
    const r = await http(`${url}/admin/demo/reset`, { method: 'POST', headers });
    t.equal(r.status, 404);
    t.equal(r.text, 'not found');
  }
});

t.test('with ENGINE_DEMO: bare admin token only; state wiped, archives untouched', async (t) => {
  const root = tempDir(t, 'coffer-demo-');
  const bg = generateRecipient();
  const pub = join(root, 'bg.pub');
  writeFileSync(pub, encodeKeyFile('recipient-public', bg.publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha', 'b/c.txt': 'charlie' });
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const e = await startEngine(
    t,
    {
      ENGINE_DEMO: '1',
      ENGINE_BREAK_GLASS_PUBLIC_KEY: pub,
      ENGINE_DESTINATIONS: `offsite=${join(root, 'offsite')}`,
      PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
      PERIMETER_ACCESS_AUD: AUDIENCE,
    },
    { testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  const post = (path: string, body: unknown = {}) =>
    http(`${e.url}/admin${path}`, { headers: bearer(), body });
  const get = (path: string) => http(`${e.url}/admin${path}`, { headers: bearer() });

  // Authentication first, then the bare admin token: an owner's perimeter session is not enough.
  t.equal((await http(`${e.url}/admin/demo/reset`, { method: 'POST' })).status, 401);
  await e.app.state.roles.assign({
    subject: `${ISSUER}#owner-1`,
    role: 'owner',
    email: 'owner-1@example.com',
    grantedBy: null,
  });
  const owner = {
    'perimeter-access-jwt-assertion': await keys.sign({ sub: 'owner-1', email: 'owner-1@example.com' }),
  };
  const byOwner = await http(`${e.url}/admin/demo/reset`, { method: 'POST', headers: owner });
  t.equal(byOwner.status, 403);
  t.same(byOwner.json(), { error: 'forbidden', required: 'admin-token', have: 'owner' });

  const job = {
    id: 'docs',
    cadenceSeconds: 3600,
    source: { type: 'files', path: source },
    destinations: ['default', 'offsite'],
  };
  t.equal((await post('/jobs', job)).status, 200);
  t.equal((await post('/trigger', { id: 'docs' })).status, 200);
  await e.app.runs.idle();
  t.equal((await get('/history?id=docs')).json().runs[0].status, 'ok');
  t.equal((await post('/restore/approval-policy', { enabled: true })).status, 200);

  // A run still running (another replica's, say) would write into the wiped state: refused.
  await e.app.state.runs.start({ id: 'elsewhere-run', jobId: 'docs' });
  const busy = await post('/demo/reset');
  t.equal(busy.status, 409);
  t.match(busy.json(), { error: /running/, runs: 1 });
  await e.app.state.runs.update('elsewhere-run', {
    status: 'failed',
    finishedAt: new Date().toISOString(),
  });
  t.equal((await get('/jobs')).json().jobs.length, 1, 'a refused reset changed nothing');

  const destinations = [join(e.dataDir, 'destination'), join(root, 'offsite')];
  const before = destinations.map(snapshot);
  t.ok(
    Object.keys(before[0] ?? {}).length > 0 && Object.keys(before[1] ?? {}).length > 0,
    'archives written',
  );

  const reset = await post('/demo/reset');
  t.equal(reset.status, 200, reset.text);
  t.same(reset.json(), { ok: true, jobs: 1, runs: 2, approvals: 0, applies: 0 });
  t.same((await get('/jobs')).json().jobs, [], 'no jobs');
  t.same((await get('/history')).json().jobs, [], 'no run history');
  t.equal((await get('/restore/approvals')).json().approvalRequired, false, 'approval policy back to off');
  t.same(destinations.map(snapshot), before, 'every archive byte is still in its destination');

  const events = (await get('/audit?action=demo-reset')).json().events;
  t.equal(events.length, 1);
  t.match(events[0], { outcome: 'applied', actor: { method: 'admin-token' }, detail: { jobs: 1, runs: 2 } });
  t.equal((await get('/audit/verify')).json().ok, true, 'the audit chain is kept and verifies');

  // The demo goes on: the same job can be written and run again.
  t.equal((await post('/jobs', job)).status, 200);
  t.equal((await post('/trigger', { id: 'docs' })).status, 200);
  await e.app.runs.idle();
  t.equal((await get('/history?id=docs')).json().runs[0].status, 'ok');
});
