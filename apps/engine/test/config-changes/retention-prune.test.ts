/**
 * Retention prunes under dual control, through HTTP on a real run history (files source, sealed
 * runs on the filesystem destination): with `retention.prune-approval.enabled` on, the retention
 * pass deletes nothing and holds a pending prune approval per job; a person with `job.delete`
 * approves it (the prune is re-planned: the latest good copy is never deleted, even when the
 * approval names it) or rejects it; turning the policy off waits for another owner.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns } from '@coffer/archive';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { PRUNE_PENDING_PREFIX } from '../../src/runs/retention.ts';
import { bearer } from '../helpers/engine.ts';
import { ISSUER } from '../helpers/perimeter.ts';
import { peopleWorld } from './helpers.ts';

const p = await peopleWorld(t);
const { w } = p;
const state = w.e.app.state;
const store = w.e.app.destinations.get('default')!;
const sub = (name: string) => `${ISSUER}#${name}`;
await p.grant([
  ['alice', 'operator'],
  ['vera', 'viewer'],
  ['olga', 'owner'],
  ['oscar', 'owner'],
]);

const src = join(tempDir(t, 'coffer-cc-prune-'), 'tree');
mkdirSync(src, { recursive: true });
for (let i = 0; i < 3; i++) writeFileSync(join(src, `f${i}.txt`), `record ${i}\n`.repeat(20));

/** One more ok run of `docs`, then retention `keepLast: 1` (backUp rewrites the job without it). */
async function run(): Promise<string> {
  const id = await w.backUp('docs', { type: 'files', path: src });
  const r = await w.post('/jobs', {
    id: 'docs',
    cadenceSeconds: 3600,
    source: { type: 'files', path: src },
    retention: { keepLast: 1 },
  });
  if (r.status !== 200) throw new Error(r.text);
  return id;
}
const present = async () => (await listRuns(store, 'docs')).map((r) => r.runId).sort();
const approvals = async () => (await w.get('/retention-prune/approvals', await p.as('vera'))).json();

t.test('a held prune is listed, approved by another person and re-planned', async (t) => {
  const on = await w.post('/retention-prune/approval-policy', { enabled: true }, await p.as('olga'));
  t.equal(on.status, 200, on.text);
  t.match((await p.audit('retention-prune-approval-policy'))[0], {
    outcome: 'applied',
    actor: { subject: sub('olga') },
    detail: { enabled: true },
  });
  t.same(await state.settings.get('retention.prune-approval.enabled'), {
    enabled: true,
    by: sub('olga'),
    at: (await state.settings.get<{ at: string }>('retention.prune-approval.enabled'))!.at,
  });

  const r1 = await run();
  const r2 = await run();
  const [result] = await w.e.app.runs.pruneAll();
  t.same(result!.pruned, [], 'nothing deleted');
  t.match(result!.held, { id: /^rp_/, runs: 1 });
  t.same(await present(), [r1, r2].sort(), 'both runs still in the destination');

  const listed = await approvals();
  t.equal(listed.enabled, true);
  t.match(listed.approvals, [
    { id: result!.held!.id, job: 'docs', status: 'pending', destinations: { default: [r1] }, runs: 1 },
  ]);
  await w.e.app.runs.pruneAll();
  t.equal((await approvals()).approvals[0].id, result!.held!.id, 'the same plan keeps its id');
  const id = result!.held!.id;

  t.equal(
    (await w.post(`/config/changes/${id}/approve`, {}, bearer())).status,
    403,
    'the admin token has no subject',
  );
  const viewer = await w.post(`/config/changes/${id}/approve`, {}, await p.as('vera'));
  t.equal(viewer.status, 403);
  t.match(viewer.json(), { required: 'job.delete' });
  t.same(await present(), [r1, r2].sort());

  const ok = await w.post(`/config/changes/${id}/approve`, {}, await p.as('alice'));
  t.equal(ok.status, 200, ok.text);
  t.match(ok.json(), { status: 'applied', kind: 'retention-prune', target: 'docs', pruned: [r1] });
  t.same(await present(), [r2], 'the older run pruned, the latest good copy kept');
  t.same((await approvals()).approvals, [], 'no longer pending');
  t.equal(
    (await w.post(`/config/changes/${id}/approve`, {}, await p.as('alice'))).status,
    404,
    'gone from the pending slot',
  );
  const decided = (await w.get('/config/changes?status=applied')).json().changes;
  t.match(
    decided.find((c: { id: string }) => c.id === id),
    { kind: 'retention-prune', decidedBy: { subject: sub('alice') } },
  );
  t.match(
    (await p.audit('config-change-approved')).find((e: { target: string }) => e.target === id),
    {
      outcome: 'applied',
      approver: { subject: sub('alice') },
      detail: { kind: 'retention-prune', jobId: 'docs', pruned: 1 },
    },
  );
});

t.test('an approval naming the latest good copy never deletes it', async (t) => {
  const [r2] = await present();
  const r3 = await run();
  const [result] = await w.e.app.runs.pruneAll();
  t.match(result!.held, { runs: 1 });
  // The pending plan is edited to name the newest run too: the re-plan at approval keeps it.
  const key = `${PRUNE_PENDING_PREFIX}docs`;
  const pending = (await state.settings.get<{ destinations: Record<string, string[]> }>(key))!;
  t.same(pending.destinations, { default: [r2] });
  await state.settings.set(key, { ...pending, destinations: { default: [r2!, r3] } });
  const ok = await w.post(`/config/changes/${result!.held!.id}/approve`, {}, await p.as('alice'));
  t.equal(ok.status, 200, ok.text);
  t.same(ok.json().pruned, [r2]);
  t.same(await present(), [r3], 'the latest good copy survives an approval that named it');
});

t.test('a rejected prune deletes nothing', async (t) => {
  const [r3] = await present();
  const r4 = await run();
  const [result] = await w.e.app.runs.pruneAll();
  const id = result!.held!.id;
  const rej = await w.post(`/config/changes/${id}/reject`, {}, await p.as('alice'));
  t.same(rej.json(), { ok: true, id, status: 'rejected' });
  t.same(await present(), [r3, r4].sort(), 'nothing deleted');
  t.same((await approvals()).approvals, []);
  t.match((await p.audit('config-change-rejected'))[0], {
    target: id,
    actor: { subject: sub('alice') },
    detail: { kind: 'retention-prune', jobId: 'docs' },
  });
});

t.test('turning prune approval off waits for another owner', async (t) => {
  const [r3, r4] = await present();
  const off = await w.post('/retention-prune/approval-policy', { enabled: false }, await p.as('olga'));
  t.equal(off.status, 202, off.text);
  const id = off.json().changeId;
  t.equal(
    (await w.post(`/config/changes/${id}/approve`, {}, await p.as('alice'))).status,
    403,
    'an owner approves',
  );
  await w.e.app.runs.pruneAll();
  t.same(await present(), [r3, r4].sort(), 'still held while the lowering is pending');
  const ok = await w.post(`/config/changes/${id}/approve`, {}, await p.as('oscar'));
  t.equal(ok.status, 200, ok.text);
  t.equal((await approvals()).enabled, false);
  await w.e.app.runs.pruneAll();
  t.same(await present(), [r4], 'pruned at once again');
  t.same((await approvals()).approvals, [], 'the held plan of the earlier pass is superseded');
});
