import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createFilesSource } from '@coffer/sources';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import {
  applyRestore,
  approveRestore,
  checkRestoreApproval,
  listRestoreApprovals,
  type PlanOptions,
  planRestore,
  type RestoreError,
  recordDryRun,
  rejectRestore,
  requestRestoreApproval,
  reserveRestoreApproval,
  settleRestoreApproval,
  validateRestoreRequest,
} from '../src/index.ts';
import { sqliteStores } from './approval-store.ts';
import { backup, fsStore, keys, resolverOf } from './helpers.ts';

const base = tempDir(t, 'restore-approvals-');
const src = join(base, 'src');
const roots = join(base, 'roots');
mkdirSync(join(src, 'a'), { recursive: true });
mkdirSync(join(src, 'b'));
mkdirSync(roots);
writeFileSync(join(src, 'a', '1.txt'), 'one');
writeFileSync(join(src, 'b', '2.txt'), 'two');
const store = fsStore(join(base, 'dest'));
await backup(store, createFilesSource({ type: 'files', root: src, binding: 'job-ap' }), {
  job: 'job-ap',
  runId: 'run-1',
});

let clock = Date.parse('2031-05-01T10:00:00.000Z');
const now = () => new Date(clock);
const H = 3_600_000;
const M = 60_000;
const stores = sqliteStores(join(base, 'state.sqlite'), now);
t.teardown(() => stores.close());
const { approvals, registry, leases } = stores;
const alice = { subject: 'https://idp.example|alice', email: 'alice@example.com' };
const bob = { subject: 'https://idp.example|bob', email: 'bob@example.com' };
const token = { subject: null };

function opts(body: Record<string, unknown> = {}): PlanOptions {
  return {
    store,
    operationalSecretKey: keys().operational.secretKey,
    request: validateRestoreRequest({ runId: 'run-1', target: { namespaceId: join(roots, 'out') }, ...body }),
    targetResolver: resolverOf({ 'job-ap': { type: 'files', root: src } }),
    restoreRoots: [roots],
    now,
  };
}

async function err(p: Promise<unknown>): Promise<RestoreError> {
  return (await p.then(
    () => {
      throw new Error('resolved');
    },
    (e: unknown) => e,
  )) as RestoreError;
}

t.test('life-cycle: request, too early, self-approval, approve, apply, consumed', async (t) => {
  const plan = await planRestore(opts());
  await recordDryRun(registry, plan);
  clock += H;
  const recomputed = await planRestore(opts());
  t.equal(recomputed.planHash, plan.planHash, 'the server recomputes the same hash');
  t.equal(
    (await err(requestRestoreApproval({ approvals, registry, plan: recomputed, requester: token, now })))
      .code,
    'ERR_RESTORE_NO_SUBJECT',
  );
  const req = await requestRestoreApproval({ approvals, registry, plan: recomputed, requester: alice, now });
  t.equal(req.status, 'pending');
  t.equal(req.subjectHash, plan.planHash);
  t.equal(req.detail.plannedAt, plan.plannedAt, 'life counts from the dry run');
  t.equal(req.expiresAt, new Date(Date.parse(plan.plannedAt) + 24 * H).toISOString());
  t.equal(
    (await err(requestRestoreApproval({ approvals, registry, plan: recomputed, requester: bob, now }))).code,
    'ERR_RESTORE_APPROVAL_CONFLICT',
  );

  const notYet = await err(checkRestoreApproval({ approvals, plan: recomputed, now }));
  t.equal(notYet.code, 'ERR_RESTORE_NOT_APPROVED');
  t.same(notYet.toJSON(), { error: 'restore not approved', planHash: plan.planHash });
  t.equal(notYet.status, 403);

  clock += 10_000;
  const early = await err(approveRestore({ approvals, planHash: plan.planHash!, approver: bob, now }));
  t.equal(early.code, 'ERR_RESTORE_APPROVAL_TOO_EARLY');
  t.equal(early.status, 429);
  t.equal(early.retryAfterSeconds, 50);
  t.equal(
    (await err(approveRestore({ approvals, planHash: plan.planHash!, approver: alice, now }))).code,
    'ERR_RESTORE_SELF_APPROVAL',
  );
  t.equal(
    (await err(approveRestore({ approvals, planHash: plan.planHash!, approver: token, now }))).code,
    'ERR_RESTORE_NO_SUBJECT',
  );
  const fast = await approveRestore({
    approvals,
    planHash: plan.planHash!,
    approver: bob,
    now,
    minDelayMs: 5_000,
  });
  t.equal(fast.status, 'approved', 'the minimum delay is configurable');
  t.equal(fast.decidedBy, bob.subject);

  const usable = await checkRestoreApproval({ approvals, plan: recomputed, now });
  t.equal(usable.id, req.id);
  const release = await reserveRestoreApproval({ leases, approval: usable, holder: 'apply-1' });
  t.equal(
    (await err(reserveRestoreApproval({ leases, approval: usable, holder: 'apply-2' }))).code,
    'ERR_RESTORE_APPROVAL_CONFLICT',
  );
  const receipt = await applyRestore({
    ...opts({ confirm: true }),
    request: { ...opts().request, confirm: true },
  });
  t.equal(receipt.status, 'succeeded');
  t.equal(await settleRestoreApproval({ approvals, approval: usable, receipt }), true);
  await release();
  t.equal((await approvals.get(req.id))?.status, 'consumed');
  t.equal(
    (await err(checkRestoreApproval({ approvals, plan: recomputed, now }))).code,
    'ERR_RESTORE_NOT_APPROVED',
    'single use',
  );
  t.equal(await settleRestoreApproval({ approvals, approval: usable, receipt }), false);
});

t.test('a plan older than 24h30m, or never dry-run, cannot be requested', async (t) => {
  const plan = await planRestore(opts({ include: ['a/'] }));
  const never = await err(requestRestoreApproval({ approvals, registry, plan, requester: alice, now }));
  t.equal(never.code, 'ERR_RESTORE_PLAN_TOO_OLD');
  t.equal(never.status, 400);
  await recordDryRun(registry, plan);
  clock += 24 * H + 31 * M;
  const old = await err(
    requestRestoreApproval({
      approvals,
      registry,
      plan: await planRestore(opts({ include: ['a/'] })),
      requester: alice,
      now,
    }),
  );
  t.equal(old.code, 'ERR_RESTORE_PLAN_TOO_OLD');
  t.match(old.message, /run the dry run again/);
});

t.test('expiry: an approve later than 24h after plannedAt fails; approved approvals expire', async (t) => {
  const plan = await planRestore(opts({ include: ['b/'] }));
  await recordDryRun(registry, plan);
  clock += 23 * H;
  const req = await requestRestoreApproval({ approvals, registry, plan, requester: alice, now });
  clock += H + M;
  const late = await err(approveRestore({ approvals, planHash: plan.planHash!, approver: bob, now }));
  t.equal(late.code, 'ERR_RESTORE_APPROVAL_EXPIRED');
  t.equal((await approvals.get(req.id))?.status, 'expired');

  const plan2 = await planRestore(opts({ include: ['b/'], maxRecords: 1 }));
  await recordDryRun(registry, plan2);
  const req2 = await requestRestoreApproval({ approvals, registry, plan: plan2, requester: alice, now });
  clock += 2 * M;
  await approveRestore({ approvals, planHash: plan2.planHash!, approver: bob, now });
  t.equal((await checkRestoreApproval({ approvals, plan: plan2, now })).id, req2.id);
  clock += 24 * H;
  t.equal(
    (await err(checkRestoreApproval({ approvals, plan: plan2, now }))).code,
    'ERR_RESTORE_NOT_APPROVED',
  );
  const listed = await listRestoreApprovals({ approvals, now });
  t.equal(listed.find((a) => a.id === req2.id)?.status, 'expired');
});

t.test('reject, and void when the plan changed', async (t) => {
  const plan = await planRestore(opts({ exclude: ['b/'] }));
  await recordDryRun(registry, plan);
  await requestRestoreApproval({ approvals, registry, plan, requester: alice, now });
  const r = await rejectRestore({ approvals, planHash: plan.planHash!, by: bob, reason: 'not today', now });
  t.equal(r.status, 'rejected');
  t.equal(
    (await err(approveRestore({ approvals, planHash: plan.planHash!, approver: bob, now }))).code,
    'ERR_RESTORE_APPROVAL_NOT_FOUND',
  );

  const p1 = await planRestore(opts({ onExisting: 'skip' }));
  await recordDryRun(registry, p1);
  const a1 = await requestRestoreApproval({ approvals, registry, plan: p1, requester: alice, now });
  clock += 2 * M;
  await approveRestore({ approvals, planHash: p1.planHash!, approver: bob, now });
  const failed = await applyRestore({
    ...opts({ onExisting: 'skip' }),
    request: { ...opts({ onExisting: 'skip' }).request, confirm: true },
    restoreRoots: [roots],
    signal: AbortSignal.abort(),
  });
  t.equal(failed.status, 'cancelled');
  t.equal(
    await settleRestoreApproval({ approvals, approval: a1, receipt: failed }),
    false,
    'not consumed by an unsuccessful apply',
  );
  const p2 = await planRestore(opts({}));
  t.not(p2.planHash, p1.planHash);
  const e = await err(checkRestoreApproval({ approvals, plan: p2, now }));
  t.same(e.toJSON(), { error: 'restore not approved', planHash: p2.planHash });
  t.equal((await approvals.get(a1.id))?.status, 'void', 'the approval of the old plan is void');
});
