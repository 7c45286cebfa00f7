/**
 * The restore approval life-cycle through HTTP against a started engine whose restore clock is
 * injected (`buildApp({ restore: { now } })`), with two distinct perimeter-JWT identities: a
 * request of a plan dry-run more than 24 h 30 min ago is 400 "run the dry run again"; the minimum
 * delay measured on that clock (429 with Retry-After, then accepted); an approval used just before
 * its 24 h life ends is consumed; an approved and a pending approval past plannedAt + 24 h are
 * `expired` (the apply is 403 `restore not approved`, a late approve is 409); an approval whose plan
 * changed becomes `void`; a second request for an open plan is 409; approving a plan nobody
 * requested is 404; an apply aborted by a tampered shard (zero written) leaves its approval
 * approved, and the apply after the repair consumes it.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer } from '../helpers/engine.ts';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';
import { restoreWorld } from './helpers.ts';

const HOUR = 3600_000;
const clock = { now: new Date('2030-01-01T00:00:00.000Z') };
const advance = (ms: number) => {
  clock.now = new Date(clock.now.getTime() + ms);
};
const pki = makePki(tempDir(t, 'coffer-approval-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const w = await restoreWorld(
  t,
  { PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN, PERIMETER_ACCESS_AUD: AUDIENCE },
  {
    testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert },
    restore: { now: () => clock.now },
  },
);
const state = w.e.app.state;
await grantRoles(state, [
  ['alice', 'restore-operator'],
  ['bob', 'approver'],
]);
const as = callerHeaders(keySet);

const src = join(tempDir(t, 'coffer-approval-src-'), 'tree');
mkdirSync(join(src, 'docs'), { recursive: true });
writeFileSync(join(src, 'a.txt'), 'alpha\n');
writeFileSync(join(src, 'docs', 'b.txt'), 'bravo\n');
const runId = await w.backUp('docs', { type: 'files', path: src });
t.equal((await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 60 })).status, 200);

/** The approval of a plan hash as the list route shows it. */
async function approvalOf(planHash: string) {
  const list = (await w.get('/restore/approvals', await as('alice'))).json();
  return list.approvals.find((a: { subjectHash: string }) => a.subjectHash === planHash);
}
async function applyAs(who: string, body: Record<string, unknown>) {
  return w.post('/restore', { ...body, confirm: true }, await as(who));
}
async function pollAs(applyId: string) {
  for (let i = 0; i < 400; i++) {
    const r = (await w.get(`/restore/applies?id=${applyId}`, await as('alice'))).json();
    if (r.status !== 'running') return r;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error('apply did not finish');
}

t.test('a plan dry-run more than 24h30m ago cannot be requested', async (t) => {
  const body = { runId, target: { namespaceId: join(w.roots, 'stale') } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  t.equal(plan.plannedAt, clock.now.toISOString(), 'plannedAt is the injected clock');
  t.equal(plan.applyDeadline, new Date(clock.now.getTime() + 24.5 * HOUR).toISOString());
  advance(24.5 * HOUR + 1000);
  const late = await w.post('/restore/request', body, await as('alice'));
  t.equal(late.status, 400, late.text);
  t.match(late.json().error, /run the dry run again/);
  t.equal(await approvalOf(plan.planHash), undefined, 'nothing recorded');
  // The dry run again (same hash, new plannedAt) makes it requestable.
  const again = (await w.post('/restore', body, await as('alice'))).json();
  t.equal(again.planHash, plan.planHash, 'the plan hash does not depend on time');
  const req = await w.post('/restore/request', body, await as('alice'));
  t.equal(req.status, 200, req.text);
  t.equal(req.json().approval.expiresAt, new Date(clock.now.getTime() + 24 * HOUR).toISOString());
  const dup = await w.post('/restore/request', body, await as('alice'));
  t.equal(dup.status, 409, 'a second request for an open plan');
  t.match(dup.json().error, /already pending/);
  t.equal(
    (await w.post('/restore/reject', { planHash: plan.planHash }, await as('alice'))).status,
    200,
    'withdrawn',
  );
});

t.test('minimum delay on the injected clock; used just before expiry; consumed', async (t) => {
  const out = join(w.roots, 'in-time');
  const body = { runId, target: { namespaceId: out } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  advance(HOUR);
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
  advance(30_000);
  const early = await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'));
  t.equal(early.status, 429);
  t.equal(early.headers.get('retry-after'), '30');
  t.same(early.json(), {
    error: 'too early to approve this restore request: try again later',
    planHash: plan.planHash,
    retryAfterSeconds: 30,
  });
  advance(30_000);
  const ok = await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'));
  t.equal(ok.status, 200, ok.text);
  t.equal(ok.json().approval.status, 'approved');
  // One minute before the approval's life (24 h from plannedAt) ends.
  advance(24 * HOUR - HOUR - 60_000 - 60_000);
  t.equal((await approvalOf(plan.planHash)).status, 'approved');
  const r = await applyAs('alice', body);
  t.equal(r.status, 202, r.text);
  const done = await pollAs(r.json().applyId);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(readFileSync(join(out, 'docs', 'b.txt'), 'utf8'), 'bravo\n');
  t.equal((await approvalOf(plan.planHash)).status, 'consumed');
  const again = await applyAs('alice', body);
  t.equal(again.status, 403, 'single use');
  t.same(again.json(), { error: 'restore not approved', planHash: plan.planHash });
});

t.test('approved past plannedAt + 24 h: expired, the apply is refused', async (t) => {
  await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 0 });
  const out = join(w.roots, 'expired');
  const body = { runId, target: { namespaceId: out } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
  t.equal((await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'))).status, 200);
  advance(24 * HOUR + 1000);
  const r = await applyAs('alice', body);
  t.equal(r.status, 403, r.text);
  t.same(r.json(), { error: 'restore not approved', planHash: plan.planHash });
  const a = await approvalOf(plan.planHash);
  t.equal(a.status, 'expired');
  t.ok(a.detail.expiredAt, 'expiry recorded');
  const denied = await state.audit.query({ action: 'restore-apply-denied' });
  t.ok(
    denied.some((ev) => (ev.event.detail as { reason?: string }).reason === 'not-approved'),
    'a denied-apply audit event',
  );
  t.notOk(existsSync(out), 'nothing written');
});

t.test('pending past plannedAt + 24 h: a late approve is refused', async (t) => {
  const body = { runId, target: { namespaceId: join(w.roots, 'late-approve') } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
  advance(24 * HOUR + 1000);
  const late = await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'));
  t.equal(late.status, 409, late.text);
  t.match(late.json().error, /expired/);
  t.equal((await approvalOf(plan.planHash)).status, 'expired');
  const reject = await w.post('/restore/reject', { planHash: plan.planHash }, await as('bob'));
  t.equal(reject.status, 404, 'nothing pending to reject any more');
  // A new dry run and request start a new life.
  await w.post('/restore', body, await as('alice'));
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
});

t.test('void when the plan changed; 404 for a plan nobody requested', async (t) => {
  const target = { namespaceId: join(w.roots, 'void') };
  const body = { runId, target, include: ['docs/'] };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  await w.post('/restore/request', body, await as('alice'));
  t.equal((await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'))).status, 200);
  // Another plan of the same run and target: not approved, and the approval above is voided.
  const other = { runId, target };
  const otherPlan = (await w.post('/restore', other, await as('alice'))).json();
  const r = await applyAs('alice', other);
  t.equal(r.status, 403);
  t.same(r.json(), { error: 'restore not approved', planHash: otherPlan.planHash });
  const a = await approvalOf(plan.planHash);
  t.equal(a.status, 'void');
  t.equal(a.detail.newPlanHash, otherPlan.planHash);
  t.equal((await applyAs('alice', body)).status, 403, 'a void approval is not usable');

  const nobody = await w.post('/restore/approve', { planHash: `sha384:${'ab'.repeat(48)}` }, await as('bob'));
  t.equal(nobody.status, 404);
  t.same(nobody.json(), {
    error: 'no pending restore approval for this plan hash',
    planHash: `sha384:${'ab'.repeat(48)}`,
  });
  const bad = await w.post('/restore/approve', { planHash: 'sha256:00' }, await as('bob'));
  t.equal(bad.status, 400, 'a malformed plan hash');
  t.equal((await w.post('/restore/approval-policy', { enabled: false })).status, 200);
  t.equal((await w.get('/restore/approvals', bearer())).json().approvalRequired, false);
});

t.test('an apply that fails leaves the approval approved for another attempt', async (t) => {
  await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 0 });
  const out = join(w.roots, 'second-attempt');
  const body = { runId, target: { namespaceId: out } };
  const plan = (await w.post('/restore', body, await as('alice'))).json();
  t.equal((await w.post('/restore/request', body, await as('alice'))).status, 200);
  t.equal((await w.post('/restore/approve', { planHash: plan.planHash }, await as('bob'))).status, 200);
  const shard = join(w.e.dataDir, 'destination', 'jobs', 'docs', 'runs', runId, 'shards', '000000.bin');
  const good = readFileSync(shard);
  const bad = Buffer.from(good);
  bad.writeUInt8(bad.readUInt8(bad.length - 20) ^ 1, bad.length - 20);
  writeFileSync(shard, bad);
  const first = await applyAs('alice', body);
  t.equal(first.status, 202, first.text);
  const aborted = await pollAs(first.json().applyId);
  t.equal(aborted.status, 'aborted');
  t.equal(aborted.receipt.written, 0);
  t.notOk(existsSync(out), 'zero written');
  t.equal((await approvalOf(plan.planHash)).status, 'approved', 'not consumed by a failed apply');
  writeFileSync(shard, good); // repaired
  const second = await applyAs('alice', body);
  t.equal(second.status, 202, second.text);
  t.equal((await pollAs(second.json().applyId)).status, 'succeeded');
  t.equal((await approvalOf(plan.planHash)).status, 'consumed');
  await w.post('/restore/approval-policy', { enabled: false });
});
