/**
 * Restore approval (dual control): the specification's "Restore approval" state table as pure
 * functions over small store interfaces that @coffer/state satisfies (`approvals`, `settings`,
 * `leases`). docs/restore.md "Approval" is normative. Every function takes an injectable clock.
 *
 * States: none -> pending (request) -> approved (approve) | rejected (reject) | expired (24 h after
 * plannedAt) ; approved -> consumed (after a successful apply) | void (the plan changed).
 *
 * Security-relevant behaviour: a request is bound to the server-recomputed plan hash and needs a
 * dry run of that exact plan on record at most 24 h 30 min old; an approver must have a stable
 * subject (the bare admin token has none) different from the requester's; an approve sooner than
 * the minimum delay after its request is refused (429), so one person cannot request and approve
 * in one breath with two sessions; an approval is used at most once (a compare-and-set moves it to
 * consumed, and a 30-minute lease reserves it while an apply runs).
 */
import { randomBytes } from 'node:crypto';
import { RestoreError } from './errors.ts';
import { APPLY_WINDOW_MS } from './plan.ts';
import type { ApplyReceipt, RestorePlan } from './types.ts';

export type RestoreApprovalStatus = 'pending' | 'approved' | 'rejected' | 'consumed' | 'void' | 'expired';

/** One approval as the store keeps it (the shape of @coffer/state's ApprovalRecord). */
export interface ApprovalRecordLike {
  id: string;
  kind: string;
  status: RestoreApprovalStatus;
  subjectHash: string | null;
  requestedBy: string | null;
  requestedByEmail: string | null;
  requestedAt: string;
  decidedBy: string | null;
  decidedByEmail: string | null;
  decidedAt: string | null;
  expiresAt: string | null;
  detail: Record<string, unknown>;
  updatedAt: string;
}

/** The approvals store (@coffer/state `approvals` satisfies it). */
export interface ApprovalStore {
  create(a: {
    id: string;
    kind: string;
    subjectHash?: string | null;
    requestedBy?: string | null;
    requestedByEmail?: string | null;
    requestedAt?: string;
    expiresAt?: string | null;
    detail?: Record<string, unknown>;
  }): Promise<ApprovalRecordLike>;
  get(id: string): Promise<ApprovalRecordLike | null>;
  list(filter?: {
    kind?: string;
    status?: RestoreApprovalStatus[];
    subjectHash?: string;
  }): Promise<ApprovalRecordLike[]>;
  transition(
    id: string,
    from: RestoreApprovalStatus[],
    to: RestoreApprovalStatus,
    decision?: { by?: string | null; byEmail?: string | null; detail?: Record<string, unknown> },
  ): Promise<ApprovalRecordLike | null>;
}

/** Where dry runs are recorded (@coffer/state `settings` satisfies it). */
export interface PlanRegistry {
  get<T = unknown>(key: string): Promise<T | undefined>;
  set(key: string, value: unknown): Promise<void>;
}

/** Leases (@coffer/state `leases` satisfies it): reserve an approval while its apply runs. */
export interface LeaseStore {
  acquire(name: string, holder: string, ttlMs: number): Promise<unknown | null>;
  release(name: string, holder: string): Promise<boolean>;
}

/** Who acts: the stable subject (null for the bare admin token) and the verified email. */
export interface Actor {
  subject: string | null;
  email?: string | null;
}

/** Approval kind in the shared approvals table. */
export const RESTORE_APPROVAL_KIND = 'restore';
/** Approval life: 24 hours from `plannedAt`. */
export const APPROVAL_LIFE_MS = 24 * 60 * 60 * 1000;
/** Default delay before an approve is accepted after its request (configurable per call). */
export const DEFAULT_APPROVE_MIN_DELAY_MS = 60 * 1000;
/** Apply reservation lease. */
export const APPLY_RESERVATION_MS = 30 * 60 * 1000;

interface RecordedPlan {
  plannedAt: string;
  runId: string;
  job: string | null;
}

function planKey(planHash: string): string {
  return `restore.plan.${planHash}`;
}

function clock(now?: () => Date): () => Date {
  return now ?? (() => new Date());
}

function needSubject(actor: Actor, what: string): string {
  if (typeof actor.subject !== 'string' || actor.subject.length === 0)
    throw new RestoreError(
      'ERR_RESTORE_NO_SUBJECT',
      `a ${what} needs a signed-in person: the bare admin token has no subject and can neither request nor approve a restore`,
    );
  return actor.subject;
}

function plannedAtOf(a: ApprovalRecordLike): number {
  const t = Date.parse(String(a.detail.plannedAt ?? ''));
  return Number.isFinite(t) ? t : Date.parse(a.requestedAt);
}

/** Moves a pending or approved approval past its life to `expired`; returns the current record. */
async function settleExpiry(
  store: ApprovalStore,
  a: ApprovalRecordLike,
  at: Date,
): Promise<ApprovalRecordLike> {
  if (
    (a.status === 'pending' || a.status === 'approved') &&
    at.getTime() > plannedAtOf(a) + APPROVAL_LIFE_MS
  ) {
    return (
      (await store.transition(a.id, [a.status], 'expired', { detail: { expiredAt: at.toISOString() } })) ?? a
    );
  }
  return a;
}

/**
 * Records a dry run (after `planRestore` returned `ok: true`), so a later request can prove the
 * plan it recomputes was reviewed recently. The latest dry run of a plan hash wins.
 */
export async function recordDryRun(registry: PlanRegistry, plan: RestorePlan): Promise<void> {
  if (!plan.ok || plan.planHash === null) return;
  const value: RecordedPlan = { plannedAt: plan.plannedAt, runId: plan.runId, job: plan.job };
  await registry.set(planKey(plan.planHash), value);
}

/**
 * `POST /admin/restore/request`: raises a pending approval bound to `plan.planHash` (the plan the
 * engine recomputed from the request body). Throws ERR_RESTORE_NO_SUBJECT, ERR_RESTORE_PLAN_UNAVAILABLE
 * (the plan is `ok: false`), ERR_RESTORE_PLAN_TOO_OLD (no dry run of this plan on record, or the
 * last one is older than 24 h 30 min: "run the dry run again"), ERR_RESTORE_APPROVAL_CONFLICT (a
 * pending or approved approval for this plan exists).
 */
export async function requestRestoreApproval(options: {
  approvals: ApprovalStore;
  registry: PlanRegistry;
  plan: RestorePlan;
  requester: Actor;
  now?: () => Date;
}): Promise<ApprovalRecordLike> {
  const at = clock(options.now)();
  const subject = needSubject(options.requester, 'restore request');
  const { plan } = options;
  if (!plan.ok || plan.planHash === null)
    throw new RestoreError(
      'ERR_RESTORE_PLAN_UNAVAILABLE',
      `restore cannot be requested: ${plan.reason ?? 'no plan'}`,
    );
  const recorded = await options.registry.get<RecordedPlan>(planKey(plan.planHash));
  const plannedAt = recorded ? Date.parse(recorded.plannedAt) : Number.NaN;
  if (!Number.isFinite(plannedAt) || at.getTime() - plannedAt > APPLY_WINDOW_MS)
    throw new RestoreError(
      'ERR_RESTORE_PLAN_TOO_OLD',
      'the restore plan is older than 24h30m (or was never dry-run): run the dry run again',
      { planHash: plan.planHash },
    );
  const open = await options.approvals.list({
    kind: RESTORE_APPROVAL_KIND,
    subjectHash: plan.planHash,
    status: ['pending', 'approved'],
  });
  for (const a of open) {
    if ((await settleExpiry(options.approvals, a, at)).status !== 'expired')
      throw new RestoreError(
        'ERR_RESTORE_APPROVAL_CONFLICT',
        `an approval for this plan is already ${a.status}`,
        {
          planHash: plan.planHash,
        },
      );
  }
  const plannedIso = new Date(plannedAt).toISOString();
  return options.approvals.create({
    id: `rst_${randomBytes(12).toString('hex')}`,
    kind: RESTORE_APPROVAL_KIND,
    subjectHash: plan.planHash,
    requestedBy: subject,
    requestedByEmail: options.requester.email ?? null,
    requestedAt: at.toISOString(),
    expiresAt: new Date(plannedAt + APPROVAL_LIFE_MS).toISOString(),
    detail: {
      runId: plan.runId,
      job: plan.job,
      plannedAt: plannedIso,
      applyDeadline: new Date(plannedAt + APPLY_WINDOW_MS).toISOString(),
      plannedWrites: plan.plannedWrites,
      bytes: plan.bytes,
      target: plan.target?.description ?? null,
      onExisting: plan.onExisting,
    },
  });
}

async function pendingFor(store: ApprovalStore, planHash: string, at: Date): Promise<ApprovalRecordLike> {
  const found = await store.list({ kind: RESTORE_APPROVAL_KIND, subjectHash: planHash, status: ['pending'] });
  for (const a of found) {
    const settled = await settleExpiry(store, a, at);
    if (settled.status === 'pending') return settled;
    throw new RestoreError(
      'ERR_RESTORE_APPROVAL_EXPIRED',
      'the restore approval expired (24 hours after the dry run): run the dry run again and request anew',
      { planHash },
    );
  }
  throw new RestoreError('ERR_RESTORE_APPROVAL_NOT_FOUND', 'no pending restore approval for this plan hash', {
    planHash,
  });
}

/**
 * `POST /admin/restore/approve` with `planHash`. Throws ERR_RESTORE_NO_SUBJECT,
 * ERR_RESTORE_APPROVAL_NOT_FOUND, ERR_RESTORE_APPROVAL_EXPIRED (more than 24 h after plannedAt),
 * ERR_RESTORE_SELF_APPROVAL (same stable subject as the requester), ERR_RESTORE_APPROVAL_TOO_EARLY
 * (429 with `retryAfterSeconds`, sooner than `minDelayMs` after the request),
 * ERR_RESTORE_APPROVAL_CONFLICT (decided meanwhile by someone else).
 */
export async function approveRestore(options: {
  approvals: ApprovalStore;
  planHash: string;
  approver: Actor;
  now?: () => Date;
  minDelayMs?: number;
}): Promise<ApprovalRecordLike> {
  const at = clock(options.now)();
  const subject = needSubject(options.approver, 'restore approval');
  const a = await pendingFor(options.approvals, options.planHash, at);
  if (a.requestedBy === subject)
    throw new RestoreError(
      'ERR_RESTORE_SELF_APPROVAL',
      'the approver must be a different person from the requester',
      {
        planHash: options.planHash,
      },
    );
  const delay = options.minDelayMs ?? DEFAULT_APPROVE_MIN_DELAY_MS;
  const wait = Date.parse(a.requestedAt) + delay - at.getTime();
  if (wait > 0)
    throw new RestoreError(
      'ERR_RESTORE_APPROVAL_TOO_EARLY',
      'too early to approve this restore request: try again later',
      {
        planHash: options.planHash,
        retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)),
      },
    );
  const next = await options.approvals.transition(a.id, ['pending'], 'approved', {
    by: subject,
    byEmail: options.approver.email ?? null,
  });
  if (next === null)
    throw new RestoreError('ERR_RESTORE_APPROVAL_CONFLICT', 'the restore approval was decided meanwhile', {
      planHash: options.planHash,
    });
  return next;
}

/**
 * The reject action: a pending approval for `planHash` becomes rejected (the requester may
 * withdraw their own). Throws ERR_RESTORE_NO_SUBJECT, ERR_RESTORE_APPROVAL_NOT_FOUND,
 * ERR_RESTORE_APPROVAL_EXPIRED, ERR_RESTORE_NOT_REQUESTER (`mayRejectOthers: false` and another
 * person's request), ERR_RESTORE_APPROVAL_CONFLICT.
 */
export async function rejectRestore(options: {
  approvals: ApprovalStore;
  planHash: string;
  by: Actor;
  reason?: string;
  now?: () => Date;
  /**
   * Whether the caller may reject someone else's request (an approver, `restore.approve`). False:
   * only a withdrawal of the caller's own request (same stable subject) is allowed. Default true.
   */
  mayRejectOthers?: boolean;
}): Promise<ApprovalRecordLike> {
  const at = clock(options.now)();
  const subject = needSubject(options.by, 'restore rejection');
  const a = await pendingFor(options.approvals, options.planHash, at);
  // A requester may withdraw their own request; only an approver may turn down someone else's.
  if (options.mayRejectOthers === false && a.requestedBy !== subject)
    throw new RestoreError(
      'ERR_RESTORE_NOT_REQUESTER',
      "only the requester may withdraw a restore request; rejecting another person's needs restore.approve",
      { planHash: options.planHash },
    );
  const next = await options.approvals.transition(a.id, ['pending'], 'rejected', {
    by: subject,
    byEmail: options.by.email ?? null,
    ...(options.reason === undefined ? {} : { detail: { rejectReason: options.reason.slice(0, 500) } }),
  });
  if (next === null)
    throw new RestoreError('ERR_RESTORE_APPROVAL_CONFLICT', 'the restore approval was decided meanwhile', {
      planHash: options.planHash,
    });
  return next;
}

/** `GET /admin/restore/approvals`: every restore approval, newest first, expiry applied. */
export async function listRestoreApprovals(options: {
  approvals: ApprovalStore;
  status?: RestoreApprovalStatus[];
  now?: () => Date;
}): Promise<ApprovalRecordLike[]> {
  const at = clock(options.now)();
  const all = await options.approvals.list({ kind: RESTORE_APPROVAL_KIND });
  const out: ApprovalRecordLike[] = [];
  for (const a of all) {
    const s = await settleExpiry(options.approvals, a, at);
    if (options.status === undefined || options.status.includes(s.status)) out.push(s);
  }
  return out;
}

/**
 * Gate (2) of the apply: the usable (approved, unexpired) approval for the recomputed plan hash.
 * Approved approvals of the same run and target whose plan hash differs are moved to `void` (the
 * plan changed). Throws ERR_RESTORE_NOT_APPROVED (403 `restore not approved` with `planHash`).
 */
export async function checkRestoreApproval(options: {
  approvals: ApprovalStore;
  plan: RestorePlan;
  now?: () => Date;
}): Promise<ApprovalRecordLike> {
  const at = clock(options.now)();
  const { plan } = options;
  const hash = plan.planHash;
  const notApproved = () =>
    new RestoreError('ERR_RESTORE_NOT_APPROVED', 'restore not approved', hash ? { planHash: hash } : {});
  if (hash === null) throw notApproved();
  let usable: ApprovalRecordLike | null = null;
  for (const a of await options.approvals.list({ kind: RESTORE_APPROVAL_KIND, status: ['approved'] })) {
    const s = await settleExpiry(options.approvals, a, at);
    if (s.status !== 'approved') continue;
    if (s.subjectHash === hash) usable ??= s;
    else if (
      s.detail.runId === plan.runId &&
      s.detail.job === plan.job &&
      s.detail.target === (plan.target?.description ?? null)
    ) {
      await options.approvals.transition(s.id, ['approved'], 'void', {
        detail: { voidedAt: at.toISOString(), voidedBy: 'plan changed', newPlanHash: hash },
      });
    }
  }
  if (usable === null) throw notApproved();
  return usable;
}

/**
 * Reserves an approval for one apply (a 30-minute lease named after it), so two applies cannot
 * spend it at once. Returns a release function. Throws ERR_RESTORE_APPROVAL_CONFLICT when another
 * apply holds it.
 */
export async function reserveRestoreApproval(options: {
  leases: LeaseStore;
  approval: ApprovalRecordLike;
  holder: string;
}): Promise<() => Promise<void>> {
  const name = `restore-approval:${options.approval.id}`;
  const lease = await options.leases.acquire(name, options.holder, APPLY_RESERVATION_MS);
  if (lease === null)
    throw new RestoreError(
      'ERR_RESTORE_APPROVAL_CONFLICT',
      'an apply of this approved restore is already running',
      {
        planHash: options.approval.subjectHash ?? undefined,
      } as { planHash?: string },
    );
  return async () => {
    await options.leases.release(name, options.holder).catch(() => false);
  };
}

/**
 * After an apply: consumes the approval only when the receipt says `succeeded` (single use);
 * otherwise it stays approved for another attempt. Returns whether it was consumed.
 */
export async function settleRestoreApproval(options: {
  approvals: ApprovalStore;
  approval: ApprovalRecordLike;
  receipt: ApplyReceipt;
}): Promise<boolean> {
  if (options.receipt.status !== 'succeeded') return false;
  const next = await options.approvals.transition(options.approval.id, ['approved'], 'consumed', {
    detail: {
      consumedAt: options.receipt.finishedAt,
      written: options.receipt.written,
      skippedCount: options.receipt.skippedCount,
    },
  });
  return next !== null;
}
