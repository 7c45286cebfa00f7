// Restore, approval, verify and drill events through the real HTTP routes of a started engine:
// an apply that succeeds (`restore-applied`), one aborted by a tampered shard
// (`restore-fell-short`), a live apply cancelled and an interrupted one cancelled
// (`restore-cancelled`; the interruption itself raises nothing); dual control requested, approved
// and rejected by two signed-in people; a verify that finds the tampered shard (`verify-failed`);
// a drill that passes and one that fails.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { hashPrefix } from '../../src/events.ts';
import { bearer } from '../helpers/engine.ts';
import { restoreWorld } from '../restore/helpers.ts';
import { collect, delivered } from './helpers.ts';

const CONSOLE = 'https://console.coffer.test';

function tree(t: Parameters<typeof tempDir>[0], files: number): string {
  const src = join(tempDir(t, 'coffer-events-src-'), 'tree');
  for (let d = 0; d < 10; d++) mkdirSync(join(src, `d${d}`), { recursive: true });
  for (let i = 0; i < files; i++) writeFileSync(join(src, `d${i % 10}`, `f${i}.txt`), `record ${i}\n`);
  return src;
}

t.test('apply outcomes: applied, fell short, cancelled (live and interrupted)', async (t) => {
  const w = await restoreWorld(t);
  const c = collect(w.e.app);
  const runId = await w.backUp('docs', { type: 'files', path: tree(t, 3) });

  const done = await w.apply({ runId, target: { namespaceId: join(w.roots, 'ok') } });
  t.equal(done.status, 'succeeded');
  await delivered();
  const applied = c.named('restore-applied');
  t.equal(applied.length, 1);
  t.same(applied[0]?.jobId, 'docs');
  t.same(applied[0]?.detail, {
    applyId: done.applyId,
    runId,
    planHash: hashPrefix(done.planHash),
    status: 'succeeded',
    written: 3,
    failed: 0,
    skipped: 0,
    alreadyDone: 0,
    attempts: 1,
    failureCode: null,
  });

  // A tampered shard: the apply aborts in phase one (fell short), the verify finds it.
  const shard = join(w.e.dataDir, 'destination', 'jobs', 'docs', 'runs', runId, 'shards', '000000.bin');
  const b = readFileSync(shard);
  b.writeUInt8(b.readUInt8(b.length - 20) ^ 1, b.length - 20);
  writeFileSync(shard, b);
  const short = await w.apply({ runId, target: { namespaceId: join(w.roots, 'short') } });
  t.equal(short.status, 'aborted');
  await delivered();
  const fell = c.named('restore-fell-short');
  t.equal(fell.length, 1);
  t.match(fell[0], {
    jobId: 'docs',
    detail: { applyId: short.applyId, status: 'aborted', written: 0, failureCode: /^ERR_/ },
  });

  const verify = await w.post('/restore/verify', { runId });
  t.equal(verify.json().ok, false, verify.text);
  await delivered();
  const vf = c.named('verify-failed');
  t.equal(vf.length, 1);
  t.same(vf[0]?.jobId, 'docs');
  t.same(vf[0]?.detail, {
    runId,
    records: verify.json().records,
    recordsVerified: verify.json().recordsVerified,
    reason: verify.json().reason,
  });
  // A large run: a live cancel, and an apply interrupted by a stop and then cancelled for good.
  const bigRun = await w.backUp('big', { type: 'files', path: tree(t, 3000) });
  const live = await w.post('/restore', {
    runId: bigRun,
    confirm: true,
    target: { namespaceId: join(w.roots, 'c1') },
  });
  t.equal(live.status, 202, live.text);
  const liveId = live.json().applyId as string;
  const cancel = await w.post('/restore/cancel', { applyId: liveId });
  t.equal(cancel.json().status, 'running', 'cancelled while it ran');
  const cancelled = await c.waitFor((e) => e.name === 'restore-cancelled' && e.detail.applyId === liveId);
  t.match(cancelled, { jobId: 'big', detail: { runId: bigRun, status: 'cancelled', failed: 0 } });

  const okVerify = await w.post('/restore/verify', { runId: bigRun });
  t.equal(okVerify.json().ok, true);
  await delivered();
  t.equal(c.named('verify-failed').length, 1, 'a clean verify raises nothing');
  const cut = await w.post('/restore', {
    runId: bigRun,
    confirm: true,
    target: { namespaceId: join(w.roots, 'c2') },
  });
  t.equal(cut.status, 202, cut.text);
  const cutId = cut.json().applyId as string;
  await w.e.app.restores.stop(); // a graceful stop: left interrupted, resumable
  await delivered();
  t.equal((await w.get(`/restore/applies?id=${cutId}`)).json().status, 'interrupted');
  t.notOk(
    c.all.some((e) => e.detail.applyId === cutId),
    'an interrupted apply raises nothing (it is not over)',
  );
  t.equal((await w.post('/restore/cancel', { applyId: cutId })).json().status, 'cancelled');
  await delivered();
  const gone = c.named('restore-cancelled').filter((e) => e.detail.applyId === cutId);
  t.equal(gone.length, 1, 'cancelling the interrupted apply raises restore-cancelled once');
});

t.test('drills: passed and failed', async (t) => {
  const w = await restoreWorld(t);
  const c = collect(w.e.app);
  const runId = await w.backUp('docs', { type: 'files', path: tree(t, 3) });
  const ev = await w.drill('docs');
  t.equal(ev.verdict, 'pass');
  await delivered();
  t.match(c.named('drill-passed'), [
    { jobId: 'docs', detail: { drillId: ev.id, runId, verdict: 'pass', trigger: 'manual', records: 3 } },
  ]);
  const shard = join(w.e.dataDir, 'destination', 'jobs', 'docs', 'runs', runId, 'shards', '000000.bin');
  const b = readFileSync(shard);
  b.writeUInt8(b.readUInt8(b.length - 20) ^ 1, b.length - 20);
  writeFileSync(shard, b);
  const bad = await w.drill('docs');
  t.not(bad.verdict, 'pass');
  await delivered();
  const failed = c.named('drill-failed');
  t.equal(failed.length, 1);
  t.match(failed[0], {
    jobId: 'docs',
    detail: { drillId: bad.id, runId, verdict: bad.verdict, reason: String },
  });
  t.equal(c.named('drill-passed').length, 1);
});

t.test('dual control: requested, approved (then applied), rejected', async (t) => {
  const w = await restoreWorld(t, { CONSOLE_ORIGIN: CONSOLE });
  const c = collect(w.e.app);
  const app = w.e.app;
  const person = async (email: string, role: 'restore-operator' | 'approver') => {
    await app.state.roles.assign({ subject: passkeySubject(email), role, email, grantedBy: 'test' });
    const m = await app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
    return {
      headers: { cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`, origin: CONSOLE },
      secrets: [m.token, m.csrfToken],
    };
  };
  const alice = await person('alice@example.org', 'restore-operator');
  const bob = await person('bob@example.org', 'approver');
  const runId = await w.backUp('docs', { type: 'files', path: tree(t, 3) });
  t.equal((await w.post('/restore/approval-policy', { enabled: true, minDelaySeconds: 0 })).status, 200);

  const body = { runId, target: { namespaceId: join(w.roots, 'approved') } };
  const plan = await w.post('/restore', body, alice.headers);
  t.equal(plan.status, 200, plan.text);
  const planHash = plan.json().planHash as string;
  const req = await w.post('/restore/request', body, alice.headers);
  t.equal(req.status, 200, req.text);
  await delivered();
  const requested = c.named('restore-approval-requested');
  t.equal(requested.length, 1);
  t.same(requested[0]?.jobId, 'docs');
  t.same(requested[0]?.detail, {
    approvalId: req.json().approval.id,
    planHash: hashPrefix(planHash),
    runId,
    records: 3,
    requestedBy: passkeySubject('alice@example.org'),
    requestedByEmail: 'alice@example.org',
    expiresAt: req.json().approval.expiresAt,
  });

  const ok = await w.post('/restore/approve', { planHash }, bob.headers);
  t.equal(ok.status, 200, ok.text);
  await delivered();
  t.same(c.named('restore-approved')[0]?.detail, {
    approvalId: req.json().approval.id,
    planHash: hashPrefix(planHash),
    requestedBy: passkeySubject('alice@example.org'),
    approvedBy: passkeySubject('bob@example.org'),
    approvedByEmail: 'bob@example.org',
  });
  const applied = await w.apply({ ...body, planHash });
  t.equal(applied.status, 'succeeded');
  await delivered();
  t.equal(c.named('restore-applied').length, 1, 'the approved apply ran');

  const other = { runId, target: { namespaceId: join(w.roots, 'rejected') } };
  const plan2 = (await w.post('/restore', other, alice.headers)).json().planHash as string;
  const req2 = await w.post('/restore/request', other, alice.headers);
  t.equal(req2.status, 200, req2.text);
  const no = await w.post('/restore/reject', { planHash: plan2, reason: 'not today' }, bob.headers);
  t.equal(no.status, 200, no.text);
  await delivered();
  t.same(c.named('restore-rejected')[0]?.detail, {
    approvalId: req2.json().approval.id,
    planHash: hashPrefix(plan2),
    requestedBy: passkeySubject('alice@example.org'),
    rejectedBy: passkeySubject('bob@example.org'),
    rejectedByEmail: 'bob@example.org',
    withdrawn: false,
  });
  t.equal(c.named('restore-approval-requested').length, 2);

  // A refused approval (the requester approving their own) raises nothing.
  const plan3 = (
    await w.post('/restore', { ...other, target: { namespaceId: join(w.roots, 'x') } }, alice.headers)
  ).json().planHash as string;
  await w.post('/restore/request', { ...other, target: { namespaceId: join(w.roots, 'x') } }, alice.headers);
  const self = await w.post('/restore/approve', { planHash: plan3 }, alice.headers);
  t.not(self.status, 200, 'the requester cannot approve');
  await delivered();
  t.equal(c.named('restore-approved').length, 1);

  const text = JSON.stringify(c.all);
  for (const s of [...alice.secrets, ...bob.secrets])
    t.notOk(text.includes(s), 'no session secret in any event');
  t.notOk(text.includes(bearer().authorization.slice(7)), 'no admin token in any event');
});
