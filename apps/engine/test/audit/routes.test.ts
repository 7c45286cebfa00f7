/**
 * The admin audit routes on a real engine (real SQLite): events written by jobs mutations and
 * refusals and by start-up, the list with filters and paging, JSON and CSV export with the head,
 * verify ok, and a tampered stored event (edited directly in the SQLite file) that verify names.
 */
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { verifyExportDocument } from '@coffer/audit';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, ISSUER, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

const job = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  cadenceSeconds: 3600,
  source: { type: 'files', path: '/srv/data' },
  ...extra,
});

t.test('mutations and refusals are in the chain; list, export, verify, tamper', async (t) => {
  const e = await startEngine(t);
  const auth = bearer();
  t.equal((await http(`${e.url}/admin/jobs`, { headers: auth, body: job('alpha') })).status, 200);
  t.equal(
    (await http(`${e.url}/admin/jobs`, { headers: auth, body: job('alpha', { ifMatchRev: 7 }) })).status,
    409,
  );
  t.equal(
    (
      await http(`${e.url}/admin/jobs/bulk`, {
        headers: auth,
        body: { jobs: [job('b1'), job('b2'), { id: 'bad' }] },
      })
    ).status,
    200,
  );
  t.equal((await http(`${e.url}/admin/jobs/delete`, { headers: auth, body: { id: 'b1' } })).status, 200);
  t.equal((await http(`${e.url}/admin/jobs/delete`, { headers: auth, body: { id: 'b1' } })).status, 409);

  const list = await http(`${e.url}/admin/audit`, { headers: auth });
  t.equal(list.status, 200);
  const page = list.json();
  t.equal(page.kind, 'engine-audit-list');
  const actions = page.events.map((ev: { action: string }) => ev.action);
  // The invalid bulk item never reaches a write, so it has no job-upsert event of its own.
  t.same(actions.slice(0, 7), [
    'job-delete',
    'job-delete',
    'job-bulk',
    'job-upsert',
    'job-upsert',
    'job-upsert',
    'job-upsert',
  ]);
  t.ok(actions.includes('engine-version-change'), 'start-up wrote the version');
  t.ok(actions.includes('engine-secret-present'), 'start-up wrote the admin token presence');
  const secretEv = page.events.find((ev: { action: string }) => ev.action === 'engine-secret-present');
  t.same(secretEv.detail, { variable: 'ADMIN_TOKEN', present: true });
  t.equal(page.headSeq, page.events[0].seq);
  const refused = page.events.find(
    (ev: { action: string; outcome: string }) => ev.action === 'job-upsert' && ev.outcome === 'refused',
  );
  t.equal(refused.detail.reason, 'base-moved');
  t.equal(refused.actor.method, 'admin-token');
  t.equal(refused.role, 'owner');
  t.equal(refused.sourceAddress, '127.0.0.1');
  t.notMatch(list.text, /test-admin-token/, 'the token never reaches an event');

  // Filters and paging.
  const deletes = (await http(`${e.url}/admin/audit?action=job-delete`, { headers: auth })).json();
  t.equal(deletes.count, 2);
  const small = (await http(`${e.url}/admin/audit?limit=2`, { headers: auth })).json();
  t.equal(small.count, 2);
  const next = (
    await http(`${e.url}/admin/audit?limit=2&beforeSeq=${small.nextBeforeSeq}`, { headers: auth })
  ).json();
  t.equal(next.events[0].seq, small.events[1].seq - 1);
  t.equal((await http(`${e.url}/admin/audit?since=yesterday`, { headers: auth })).status, 400);
  const future = (await http(`${e.url}/admin/audit?since=2999-01-01T00:00:00Z`, { headers: auth })).json();
  t.equal(future.count, 0);

  // Export: JSON verifies standalone; CSV carries the head in headers.
  const exp = await http(`${e.url}/admin/audit/export?format=json`, { headers: auth });
  t.equal(exp.status, 200);
  t.equal(exp.headers.get('x-audit-head-seq'), String(page.headSeq));
  const doc = exp.json();
  t.equal(doc.headHash, page.headHash);
  t.equal(verifyExportDocument(doc).ok, true, 'exported document verifies without the engine');
  const csv = await http(`${e.url}/admin/audit/export?format=csv`, { headers: auth });
  t.match(csv.headers.get('content-type'), /text\/csv/);
  t.equal(csv.headers.get('x-audit-head-hash'), page.headHash);
  t.equal(csv.text.trim().split('\r\n').length, page.headSeq + 1, 'header plus one row per event');
  t.equal((await http(`${e.url}/admin/audit/export?format=xml`, { headers: auth })).status, 400);

  const ok = (await http(`${e.url}/admin/audit/verify`, { headers: auth })).json();
  t.same([ok.ok, ok.headSeq, ok.anchored], [true, page.headSeq, true]);

  // Tamper with one stored event directly in the SQLite file.
  const db = new DatabaseSync(join(e.dataDir, 'state.sqlite'));
  const row = db.prepare('SELECT event FROM audit_events WHERE seq = 3').get() as { event: string };
  const edited = JSON.parse(row.event);
  edited.outcome = edited.outcome === 'applied' ? 'refused' : 'applied';
  db.prepare('UPDATE audit_events SET event = ? WHERE seq = 3').run(JSON.stringify(edited));
  db.close();
  const bad = await http(`${e.url}/admin/audit/verify`, { headers: auth });
  t.equal(bad.status, 200, 'a break is a 200 result');
  t.same([bad.json().ok, bad.json().firstBadSeq], [false, 3]);
});

t.test('audit routes need audit.read; a capability refusal on a job write is recorded', async (t) => {
  const e = await startEngine(t);
  t.equal((await http(`${e.url}/admin/audit`)).status, 401);
  t.equal((await http(`${e.url}/admin/audit/verify`)).status, 401);
  t.equal((await http(`${e.url}/admin/audit/export`)).status, 401);
});

t.test('changes of the restore approval policy are audited with the values before and after', async (t) => {
  const pki = makePki(tempDir(t));
  const keys = await startKeySet(pki);
  t.teardown(() => keys.close());
  const e = await startEngine(
    t,
    { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
    { testOnly: { perimeterJwksUrl: keys.jwksUrl, perimeterJwksCa: pki.caCert } },
  );
  await e.app.state.roles.assign({
    subject: `${ISSUER}#op-3`,
    role: 'operator',
    email: 'op-3@example.com',
    grantedBy: null,
  });
  const operator = {
    'perimeter-access-jwt-assertion': await keys.sign({ sub: 'op-3', email: 'op-3@example.com' }),
  };
  const denied = await http(`${e.url}/admin/restore/approval-policy`, {
    headers: operator,
    body: { enabled: false },
  });
  t.equal(denied.status, 403, 'keys.ceremony only');
  const post = (body: unknown) => http(`${e.url}/admin/restore/approval-policy`, { headers: bearer(), body });
  t.equal((await post({ enabled: true, minDelaySeconds: 120 })).status, 200);
  t.equal((await post({ enabled: false })).status, 200);
  t.equal((await post({ enabled: false })).status, 200);
  const page = (
    await http(`${e.url}/admin/audit?action=restore-approval-policy`, { headers: bearer() })
  ).json();
  const events = [...page.events].reverse();
  t.match(events.shift(), {
    outcome: 'refused',
    actor: { email: 'op-3@example.com' },
    detail: { reason: 'capability', required: 'keys.ceremony' },
  });
  t.same(
    events.map((ev: { outcome: string; target: string | null; detail: unknown }) => [
      ev.outcome,
      ev.target,
      ev.detail,
    ]),
    [
      [
        'applied',
        null,
        {
          enabled: true,
          minDelaySeconds: 120,
          previous: { enabled: false, minDelaySeconds: 60 },
          changedFields: ['enabled', 'minDelaySeconds'],
        },
      ],
      [
        'applied',
        null,
        {
          enabled: false,
          minDelaySeconds: 120,
          previous: { enabled: true, minDelaySeconds: 120 },
          changedFields: ['enabled'],
        },
      ],
      [
        'applied',
        null,
        {
          enabled: false,
          minDelaySeconds: 120,
          previous: { enabled: false, minDelaySeconds: 120 },
          changedFields: [],
        },
      ],
    ],
  );
  t.match(events[1], { actor: { method: 'admin-token' }, role: 'owner' });
  const verify = (await http(`${e.url}/admin/audit/verify`, { headers: bearer() })).json();
  t.equal(verify.ok, true, 'the chain still verifies');
});
