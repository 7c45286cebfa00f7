/**
 * Restore end to end through HTTP against a started engine: a real backup run of a files tree,
 * dry run, apply into a restore root compared byte for byte, every 400, the gate order (a caller
 * without restore.apply is refused before anything is read, with a denied-apply audit event), the
 * approval life-cycle with two distinct perimeter-JWT identities, a shard tampered between dry
 * run and apply, attestation, verify, a drill and the RTO estimate.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { encodeKeyFile, generateRecipient } from '@coffer/crypto';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { bearer, http, startEngine } from '../helpers/engine.ts';
import { AUDIENCE, callerHeaders, grantRoles, startKeySet, TEAM_DOMAIN } from '../helpers/perimeter.ts';
import { makePki } from '../helpers/tls.ts';

const root = tempDir(t, 'coffer-restore-e2e-');
const pki = makePki(tempDir(t, 'coffer-restore-pki-'));
const keySet = await startKeySet(pki);
t.teardown(() => keySet.close());
const bg = generateRecipient();
writeFileSync(join(root, 'bg.pub'), encodeKeyFile('recipient-public', bg.publicKey));
const roots = join(root, 'roots');
mkdirSync(roots);
const src = join(root, 'source');
const files: Record<string, Buffer> = {
  'a.txt': Buffer.from('alpha\n'),
  'docs/b.bin': randomBytes(150_000),
  'docs/deep/c.txt': Buffer.from('charlie'),
};
for (const [n, b] of Object.entries(files)) {
  mkdirSync(join(src, n, '..'), { recursive: true });
  writeFileSync(join(src, n), b);
}
const e = await startEngine(
  t,
  {
    PERIMETER_ACCESS_TEAM_DOMAIN: TEAM_DOMAIN,
    PERIMETER_ACCESS_AUD: AUDIENCE,
    ENGINE_BREAK_GLASS_PUBLIC_KEY: join(root, 'bg.pub'),
    ENGINE_RESTORE_ROOTS: roots,
  },
  {
    testOnly: { perimeterJwksUrl: keySet.jwksUrl, perimeterJwksCa: pki.caCert },
    rateLimit: { max: 1000, windowSeconds: 60 },
  },
);
const state = e.app.state;
await grantRoles(state, [
  ['alice', 'restore-operator'],
  ['bob', 'approver'],
]);
const as = callerHeaders(keySet);
const post = async (path: string, who: Record<string, string>, body: unknown) =>
  http(`${e.url}/admin${path}`, { headers: who, body });
const get = async (path: string, who: Record<string, string>) =>
  http(`${e.url}/admin${path}`, { headers: who });

const upsert = await post('/jobs', bearer(), {
  id: 'docs',
  cadenceSeconds: 3600,
  source: { type: 'files', path: src },
});
if (upsert.status !== 200) throw new Error(`job upsert: ${upsert.text}`);
const trig = await post('/trigger', bearer(), { id: 'docs' });
if (trig.status !== 200) throw new Error(`trigger: ${trig.text}`);
const runId = trig.json().runId as string;
await e.app.runs.idle();

async function poll(applyId: string, who: Record<string, string>) {
  for (let i = 0; i < 400; i++) {
    const r = (await get(`/restore/applies?id=${applyId}`, who)).json();
    if (r.status !== 'running') return r;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error('apply did not finish');
}

const tree = (dir: string): string[] =>
  existsSync(dir)
    ? readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((d) => d.isFile())
        .map((d) => join(d.parentPath, d.name).slice(dir.length + 1))
        .sort()
    : [];

t.test('every 400 before anything is read', async (t) => {
  const viewer = await as('carol');
  const cases: Array<[unknown, string]> = [
    [{}, 'runId is required'],
    [{ runId: '' }, 'runId is required'],
    [{ runId, include: ['docs/', ''] }, 'include[1] must be a non-empty string'],
    [{ runId, exclude: [7] }, 'exclude[0] must be a non-empty string'],
    [{ runId, onExisting: 'merge' }, "onExisting must be 'overwrite' or 'skip'"],
    [
      { runId, recordName: 'a.txt', d1Tables: { database: 'd', tables: ['t'] } },
      'd1Tables cannot be combined with recordName',
    ],
    [{ runId, maxRecords: 0 }, 'maxRecords must be a positive integer'],
  ];
  for (const [body, error] of cases) {
    const r = await post('/restore', viewer, body);
    t.equal(r.status, 400, error);
    t.same(r.json(), { error });
  }
  const outside = await post('/restore', viewer, { runId, target: { namespaceId: join(root, 'elsewhere') } });
  t.equal(outside.status, 200, 'a dry run is not refused for where an apply would write');
  t.match(outside.json().advisories, [
    { code: 'ERR_RESTORE_OUTSIDE_ROOTS', message: /outside the configured/ },
  ]);
  const old = await post('/restore/request', await as('alice'), {
    runId,
    include: ['never-dry-run/'],
    target: { namespaceId: join(roots, 'x') },
  });
  t.equal(old.status, 400);
  t.match(old.json().error, /run the dry run again/);
});

t.test('dry run (any auth), gate order, apply byte for byte', async (t) => {
  const viewer = await as('carol');
  const out = join(roots, 'out1');
  const plan = await post('/restore', viewer, { runId, target: { namespaceId: out } });
  t.equal(plan.status, 200, plan.text);
  t.match(plan.json(), {
    ok: true,
    mode: 'dry-run',
    runId,
    job: 'docs',
    isLatest: true,
    plannedWrites: 3,
    recordsVerified: 3,
  });
  t.notOk(existsSync(out));

  // A caller without restore.apply is refused first, even with a body that would be a 400.
  const denied = await post('/restore', viewer, { confirm: true });
  t.equal(denied.status, 403);
  t.same(denied.json(), { error: 'forbidden', required: 'restore.apply', have: 'viewer' });
  const events = await state.audit.query({ action: 'restore-apply-denied' });
  t.ok(
    events.some((ev) => (ev.event.detail as { reason?: string }).reason === 'capability'),
    'denied-apply audit event',
  );
  t.notOk(existsSync(out));

  const alice = await as('alice');
  const r = await post('/restore', alice, {
    runId,
    confirm: true,
    target: { namespaceId: out },
    planHash: plan.json().planHash,
  });
  t.equal(r.status, 202, r.text);
  t.match(r.json(), {
    ok: true,
    mode: 'apply',
    status: 'running',
    planHash: plan.json().planHash,
    plannedWrites: 3,
  });
  const done = await poll(r.json().applyId, alice);
  t.equal(done.status, 'succeeded', JSON.stringify(done));
  t.equal(done.receipt.written, 3);
  t.same(tree(out), Object.keys(files).sort());
  for (const [n, b] of Object.entries(files))
    t.ok(readFileSync(join(out, n)).equals(b), `${n} byte for byte`);
  t.ok((await state.audit.query({ action: 'restore-apply' })).length >= 1, 'restore-apply audit event');
});

t.test('approval life-cycle with two identities', async (t) => {
  const alice = await as('alice');
  const bob = await as('bob');
  t.equal((await post('/restore/approval-policy', alice, { enabled: true })).status, 403, 'owner only');
  t.equal(
    (await post('/restore/approval-policy', bearer(), { enabled: true, minDelaySeconds: 60 })).status,
    200,
  );
  const body = { runId, target: { namespaceId: join(roots, 'out2') }, include: ['docs/'] };
  const plan = (await post('/restore', alice, body)).json();
  const notApproved = await post('/restore', alice, { ...body, confirm: true });
  t.equal(notApproved.status, 403);
  t.same(notApproved.json(), { error: 'restore not approved', planHash: plan.planHash });

  const tokenReq = await post('/restore/request', bearer(), body);
  t.equal(tokenReq.status, 403, 'the bare admin token cannot request');
  const req = await post('/restore/request', alice, body);
  t.equal(req.status, 200, req.text);
  t.equal(req.json().approval.status, 'pending');
  t.equal(req.json().approval.subjectHash, plan.planHash);
  const early = await post('/restore/approve', bob, { planHash: plan.planHash });
  t.equal(early.status, 429);
  t.ok(Number(early.headers.get('retry-after')) >= 1);
  t.match(early.headers.get('content-type'), /application\/json/);
  t.equal(early.json().error, 'too early to approve this restore request: try again later');
  await post('/restore/approval-policy', bearer(), { enabled: true, minDelaySeconds: 0 });
  const self = await post('/restore/approve', alice, { planHash: plan.planHash });
  t.equal(self.status, 403, 'alice lacks restore.approve');
  const tokenApprove = await post('/restore/approve', bearer(), { planHash: plan.planHash });
  t.equal(tokenApprove.status, 403, 'the bare admin token cannot approve');
  const ok = await post('/restore/approve', bob, { planHash: plan.planHash });
  t.equal(ok.status, 200, ok.text);
  t.equal(ok.json().approval.status, 'approved');
  const list = (await get('/restore/approvals', alice)).json();
  t.equal(list.approvalRequired, true);
  t.equal(list.approvals[0].status, 'approved');

  const apply = await post('/restore', alice, { ...body, confirm: true });
  t.equal(apply.status, 202, apply.text);
  const done = await poll(apply.json().applyId, alice);
  t.equal(done.status, 'succeeded');
  t.same(tree(join(roots, 'out2')), ['docs/b.bin', 'docs/deep/c.txt']);
  t.equal((await get('/restore/approvals', alice)).json().approvals[0].status, 'consumed');
  const again = await post('/restore', alice, { ...body, confirm: true });
  t.equal(again.status, 403, 'single use');

  // A request by bob, approved by... bob himself is refused (same subject).
  const body3 = { ...body, target: { namespaceId: join(roots, 'out3') } };
  await post('/restore', bob, body3);
  t.equal((await post('/restore/request', bob, body3)).status, 200);
  const selfB = await post('/restore/approve', bob, {
    planHash: (await post('/restore', bob, body3)).json().planHash,
  });
  t.equal(selfB.status, 403);
  t.equal(selfB.json().error, 'the approver must be a different person from the requester');
  const hash3 = (await post('/restore', bob, body3)).json().planHash;
  const notHers = await post('/restore/reject', alice, { planHash: hash3 });
  t.equal(notHers.status, 403, "alice (no restore.approve) cannot reject bob's request");
  t.same(notHers.json(), { error: 'forbidden', required: 'restore.approve', have: 'restore-operator' });
  const rej = await post('/restore/reject', bob, { planHash: hash3 });
  t.equal(rej.status, 200, 'bob withdraws his own');
  t.equal(rej.json().approval.status, 'rejected');
  await post('/restore/approval-policy', bearer(), { enabled: false });
});

t.test('attest, verify, drill, RTO', async (t) => {
  const alice = await as('alice');
  const at = await post('/restore/attest', alice, { runId });
  t.equal(at.status, 200);
  t.match(at.json(), {
    ok: true,
    signature: { ok: true, pinned: true },
    completeness: { ok: true },
    rollback: { ok: true, isHead: true },
  });
  const v = await post('/restore/verify', alice, { runId, target: { namespaceId: join(roots, 'v') } });
  t.match(v.json(), { ok: true, recordsVerified: 3 });
  t.match((await get('/rto', alice)).json(), { status: 'unknown' });
  const d = await post('/drill/run', alice, { job: 'docs' });
  t.equal(d.status, 202, d.text);
  let status = (await get('/attest/session/status', alice)).json();
  for (let i = 0; i < 400 && status.active; i++) {
    await new Promise((res) => setTimeout(res, 25));
    status = (await get('/attest/session/status', alice)).json();
  }
  t.equal(status.last.verdict, 'pass', JSON.stringify(status.last));
  t.equal((await get('/attest/session/status', await as('carol'))).status, 403, 'drill.run gates the status');
  const evd = (await get('/drill-evidence?job=docs', alice)).json();
  t.equal(evd.evidence.length, 1);
  t.match((await get('/drill-all', alice)).json(), {
    jobs: [{ job: 'docs', lastDrill: { verdict: 'pass' } }],
  });
  t.match((await get('/rto', alice)).json(), {
    status: 'estimated',
    jobs: [{ job: 'docs', status: 'estimated' }],
  });
});

t.test('a shard tampered between dry run and apply aborts with zero written', async (t) => {
  const alice = await as('alice');
  const out = join(roots, 'out-tamper');
  const body = { runId, target: { namespaceId: out } };
  t.equal((await post('/restore', alice, body)).json().ok, true);
  const shard = join(e.dataDir, 'destination', 'jobs', 'docs', 'runs', runId, 'shards', '000000.bin');
  const b = readFileSync(shard);
  b.writeUInt8(b.readUInt8(b.length - 20) ^ 1, b.length - 20);
  writeFileSync(shard, b);
  const r = await post('/restore', alice, { ...body, confirm: true });
  t.equal(r.status, 202);
  const done = await poll(r.json().applyId, alice);
  t.equal(done.status, 'aborted');
  t.equal(done.receipt.written, 0);
  t.equal(done.receipt.failure.phase, 'verify');
  t.notOk(existsSync(out));
  const plan = (await post('/restore', alice, body)).json();
  t.equal(plan.ok, false, 'the dry run now says it cannot read back');
});
