/**
 * Retention keeps a run that a pending restore approval, a restore apply in progress or a drill in
 * progress is using (runs/pins.ts), through HTTP against a started engine on a real SQLite state
 * store: the pin holds while the user holds, and the run is pruned once the approval is withdrawn,
 * the approved apply has used it, the apply ended or the drill ended.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listRuns } from '@coffer/archive';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { PIN_PREFIX } from '../../src/runs/pins.ts';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { holdReads, restoreWorld } from './helpers.ts';

const pki = makePki(tempDir(t, 'coffer-pins-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const w = await restoreWorld(
  t,
  { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
  { testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert } },
);
const state = w.e.app.state;
await grantRoles(state, [
  ['alice', 'restore-operator'],
  ['bob', 'approver'],
]);
const as = callerHeaders(keySet);
const store = w.e.app.destinations.get('default')!;

/** Two ok runs of a job with `keepLast: 1`: without a pin, the older one goes at the next prune. */
async function twoRuns(job: string, files: number): Promise<[string, string]> {
  const src = join(tempDir(t, `coffer-pins-${job}-`), 'tree');
  mkdirSync(src, { recursive: true });
  for (let i = 0; i < files; i++) writeFileSync(join(src, `f${i}.txt`), `record ${i}\n`.repeat(20));
  const older = await w.backUp(job, { type: 'files', path: src });
  const newer = await w.backUp(job, { type: 'files', path: src });
  const rec = await state.jobs.get(job);
  await state.jobs.upsert({ ...rec!.config, id: job, retention: { keepLast: 1 } } as unknown as {
    id: string;
  });
  return [older, newer];
}
const present = async (job: string, runId: string) =>
  (await listRuns(store, job)).some((r) => r.runId === runId);
const prune = () => w.e.app.runs.pruneAll();

/**
 * Holds every read of `runId`'s shards until the returned function is called, so an apply or a
 * drill of that run is surely still in progress while the prune runs (on a fast machine the 1,500
 * records were read before the prune had listed the runs). Manifests and the index are not held:
 * the prune reads those.
 */
function holdShardReads(runId: string): () => void {
  return holdReads(store, (key) => key.includes(`/runs/${runId}/shards/`));
}

t.test('a pending approval pins its run until it is withdrawn', async (t) => {
  t.equal((await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 0 })).status, 200);
  const [older] = await twoRuns('pending', 3);
  const body = { runId: older, target: { namespaceId: join(w.roots, 'pending') } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  const req = await w.post('/restore/request', body, await as('alice'));
  t.equal(req.status, 200, req.text);
  const approvalId = req.json().approval.id as string;
  t.match(await state.settings.get(`${PIN_PREFIX}approval.${approvalId}`), {
    purpose: 'restore-approval',
    runId: older,
    expiresAt: req.json().approval.expiresAt,
  });
  await prune();
  t.ok(await present('pending', older), 'kept while the approval is pending');
  const rej = await w.post('/restore/reject', { planHash: plan.planHash }, await as('alice'));
  t.equal(rej.status, 200, rej.text);
  t.equal(await state.settings.get(`${PIN_PREFIX}approval.${approvalId}`), undefined, 'pin released');
  await prune();
  t.notOk(await present('pending', older), 'pruned once withdrawn');
});

t.test('an approved request pins its run until the apply has used it', async (t) => {
  const [older] = await twoRuns('approved', 3);
  const out = join(w.roots, 'approved');
  const body = { runId: older, target: { namespaceId: out } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
  t.equal((await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'))).status, 200);
  await prune();
  t.ok(await present('approved', older), 'kept while approved and unused');
  const r = await w.post('/restore', { ...body, confirm: true }, await as('alice'));
  t.equal(r.status, 202, r.text);
  let view: { status: string } = { status: 'running' };
  for (let i = 0; i < 1200 && view.status === 'running'; i++) {
    await new Promise((res) => setTimeout(res, 25));
    view = (await w.get(`/restore/applies?id=${r.json().applyId}`, await as('alice'))).json();
  }
  t.equal(view.status, 'succeeded');
  t.same(
    (await state.settings.list(PIN_PREFIX)).filter((p) => (p.value as { runId: string }).runId === older),
    [],
    'the approval and the apply released their pins',
  );
  await prune();
  t.notOk(await present('approved', older), 'pruned once used');
  t.equal((await w.post('/restore/approval-policy', { enabled: false })).status, 200);
});

t.test('a restore apply in progress pins its run; the run goes after the apply', async (t) => {
  const [older] = await twoRuns('applying', 1500);
  const release = holdShardReads(older);
  t.teardown(release);
  const r = await w.post('/restore', {
    runId: older,
    target: { namespaceId: join(w.roots, 'applying') },
    confirm: true,
  });
  t.equal(r.status, 202, r.text);
  const applyId = r.json().applyId as string;
  await prune();
  const during = (await w.get(`/restore/applies?id=${applyId}`)).json();
  t.equal(during.status, 'running', 'the prune ran while the apply was in progress');
  t.ok(await present('applying', older), 'kept while the apply reads it');
  release();
  let view = during;
  for (let i = 0; i < 2400 && view.status === 'running'; i++) {
    await new Promise((res) => setTimeout(res, 25));
    view = (await w.get(`/restore/applies?id=${applyId}`)).json();
  }
  t.equal(view.status, 'succeeded', 'the apply read the whole run');
  t.equal(view.progress?.written, 1500);
  await prune();
  t.notOk(await present('applying', older), 'pruned after the apply ended');
});

t.test('a drill in progress pins its run; the run goes after the drill', async (t) => {
  const [older] = await twoRuns('drilled', 1500);
  const release = holdShardReads(older);
  t.teardown(release);
  const started = await w.e.app.drills.start('drilled', { runId: older, trigger: 'manual' });
  if (started.kind !== 'started') throw new Error(`drill: ${started.kind}`);
  await prune();
  t.ok(w.e.app.drills.active, 'the prune ran while the drill was in progress');
  t.ok(await present('drilled', older), 'kept while the drill reads it');
  release();
  const ev = await started.done;
  t.equal(ev?.verdict, 'pass');
  await prune();
  t.notOk(await present('drilled', older), 'pruned after the drill ended');
});
