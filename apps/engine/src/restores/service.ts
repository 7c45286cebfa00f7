/**
 * `RestoreService`: the whole life of a restore after the route has parsed the request, the
 * counterpart of the run service (src/runs/). Routes (src/routes/restore/) only map HTTP onto it.
 *
 * The walk of `POST /admin/restore` with `confirm: true`, route -> service -> package, no return trips:
 *   1. route (routes/restore/apply.ts): capability gate, rate limit, `validateRestoreRequest`;
 *   2. `RestoreService.apply`: plan options (plan-options.ts) -> `planFromIndex` once -> the plan
 *      checks and the approval gate (`gate`, audited refusals) -> pin the run against retention ->
 *      claim the apply's lease -> reserve the approval;
 *   3. `ApplyTracker.launch` (applies.ts): under the lease (src/tasks/leased-tasks.ts) hands the
 *      gated plan to @coffer/restore `applyRestore({ prepared })`: phase one verifies every
 *      record, phase two re-verifies and writes each one through the target's connector (for a
 *      files target, @coffer/sources' safe writer); progress is flushed durably as it goes;
 *   4. settle (fenced by the lease): the row, the approval (`settleRestoreApproval`), the pin, and
 *      the `restore-apply` audit event.
 *
 * Notification events (src/events.ts): an approval request, approval and rejection raise
 * `restore-approval-requested` / `restore-approved` / `restore-rejected` once recorded; a verify
 * that finds a problem raises `verify-failed`; the applies raise theirs (applies.ts).
 *
 * Security-relevant behaviour: the stored request is the validated RestoreRequest (no tokens);
 * replies and audit events carry plan hashes, counts and reasons, never tokens, keys or bytes; the
 * bare admin token (no subject) can neither request nor approve (@coffer/restore refuses it).
 */
import { randomBytes } from 'node:crypto';
import type { ObjectStore } from '@coffer/objectstore';
import {
  type Attestation,
  approveRestore,
  attestRun,
  checkRestoreApproval,
  isRestoreError,
  listRestoreApprovals,
  type PlanOptions,
  planFromIndex,
  planRestore,
  type RestorePlan,
  type RestoreRequest,
  type RestoreVerification,
  recordDryRun,
  rejectRestore,
  requestRestoreApproval,
  reserveRestoreApproval,
  verifyRestore,
} from '@coffer/restore';
import type { State } from '@coffer/state';
import type { FastifyBaseLogger } from 'fastify';
import type { EngineAudit, RequestAuditEvent } from '../audit/index.ts';
import type { EngineConfig } from '../config.ts';
import { type EngineEvents, hashPrefix } from '../events.ts';
import type { EngineKeys } from '../keys.ts';
import type { ChunkedBaseCache } from '../runs/base-cache.ts';
import { acquirePin, pinId, releasePin } from '../runs/pins.ts';
import { RECLAIM_REFUSAL, reclaimUnderWay } from '../runs/reclaim-marker.ts';
import { archiveRunOf } from '../runs/unchanged.ts';
import { type ApplyRow, ApplyTracker, applyView } from './applies.ts';
import {
  APPROVAL_ENABLED_KEY,
  APPROVAL_MIN_DELAY_KEY,
  type ApprovalPolicy,
  approvalPolicy,
  planOptionsFor,
  type RestoreDeps,
} from './plan-options.ts';
import { ReadSlots } from './read-slots.ts';
import { RestoreRefusal } from './refusal.ts';

export interface RestoreServiceOptions {
  state: State;
  keys: EngineKeys;
  config: EngineConfig;
  destinations: ReadonlyMap<string, ObjectStore>;
  audit: EngineAudit;
  log: FastifyBaseLogger;
  /** The run service's persisted instance id: the applies' lease holder is `<it>:restore`. */
  holder: string;
  /** Planning and approval clock (tests age a plan or an approval with it); default the system clock. */
  now?: () => Date;
  /** The notification event bus (app.events); absent: nothing is raised. */
  events?: EngineEvents | null;
  /** Called when an apply, dry run or verify ends (the engine hands memory back once idle). */
  onSettled?: () => void;
  /** The run service's kept bases (app.runs.baseCache): a restore of a kept base's run shares its records. */
  bases?: ChunkedBaseCache | null;
}

/** Who asks, as the service needs it (the route builds it from the request). */
export interface RestoreCaller {
  /** The audit actor fields of the request. */
  actor: ReturnType<EngineAudit['actorOf']>;
  /** The person (stable subject and email) for approvals; null fields for the bare admin token. */
  person: { subject: string | null; email: string | null };
  /** Records an event attributed to the request (the capability-refusal hook then stays quiet). */
  record(event: RequestAuditEvent): Promise<unknown>;
  /** Holds `restore.approve` (may reject other people's requests). */
  mayApprove: boolean;
}

/** The reply facts of an apply started (or resumed) in the background. */
export interface ApplyStarted {
  applyId: string;
  planHash: string;
  plannedWrites: number;
  /** Set on a resume: records an earlier attempt already wrote. */
  alreadyWritten?: number;
}

type Approval = Awaited<ReturnType<typeof checkRestoreApproval>>;

export class RestoreService {
  readonly applies: ApplyTracker;
  /** Concurrency limits of dry runs and verifies (ENGINE_RESTORE_READS_*). */
  readonly reads: ReadSlots;
  private readonly deps: RestoreDeps;
  private readonly o: RestoreServiceOptions;

  constructor(options: RestoreServiceOptions) {
    this.o = options;
    this.deps = {
      state: options.state,
      keys: options.keys,
      config: options.config,
      destinations: options.destinations,
      now: options.now ?? (() => new Date()),
      bases: options.bases ?? null,
    };
    this.reads = new ReadSlots(options.config.restoreReads, options.onSettled);
    this.applies = new ApplyTracker({
      state: options.state,
      audit: options.audit,
      log: options.log,
      holder: `${options.holder}:restore`,
      events: options.events ?? null,
      ...(options.onSettled ? { onSettled: options.onSettled } : {}),
    });
  }

  /** The planning and approval clock. */
  get now(): () => Date {
    return this.deps.now;
  }

  /** Starts the sweeps that find applies a crashed process left running. */
  start(): void {
    this.applies.startSweeps();
  }

  /** Graceful stop: live applies stop after the writes in flight and are left resumable. */
  async stop(): Promise<void> {
    await this.applies.stop();
  }

  private get state(): State {
    return this.o.state;
  }

  planOptions(request: RestoreRequest): Promise<PlanOptions> {
    return planOptionsFor(this.deps, request);
  }

  policy(): Promise<ApprovalPolicy> {
    return approvalPolicy(this.state.settings);
  }

  /** A dry run: the full plan (every record read and hashed), recorded for approval requests. */
  async dryRun(request: RestoreRequest): Promise<RestorePlan> {
    const plan = await planRestore(await this.planOptions(request));
    await recordDryRun(this.state.settings, plan);
    return plan;
  }

  /** Verifies every in-scope record of `request`; writes nothing. */
  async verify(request: RestoreRequest): Promise<RestoreVerification> {
    const result = await verifyRestore(await this.planOptions(request));
    if (!result.ok)
      this.o.events?.raise({
        name: 'verify-failed',
        jobId: result.job,
        detail: {
          runId: result.runId,
          records: result.records,
          recordsVerified: result.recordsVerified,
          reason: result.reason ?? null,
        },
      });
    return result;
  }

  /** Keyless attestation of the requested run: signature, completeness, anti-rollback. */
  async attest(request: RestoreRequest): Promise<Attestation> {
    const opts = await this.planOptions(request);
    const store = this.o.destinations.get(request.destinationId ?? 'default');
    if (!store) throw new RestoreRefusal(400, { error: 'destinationId names no configured destination' });
    const latest = opts.job ? await this.state.runs.latestOk(opts.job) : null;
    // Unchanged runs have no archive of their own: attest (and compare with) the archives that
    // hold their data.
    return attestRun(store, {
      runId: opts.runId ?? request.runId,
      ...(opts.job ? { job: opts.job } : {}),
      signerPublicKey: this.o.keys.signer.publicKey,
      ...(latest ? { expectedLatest: { runId: await archiveRunOf(this.state.runs, latest) } } : {}),
    });
  }

  /**
   * The gate of an apply (or a resume): the plan computed from the index, once, must be ok and
   * equal the reviewed hash; with approval on, a usable approval for it. Refusals are audited as
   * `restore-apply-denied` where the specification asks and thrown (RestoreError / RestoreRefusal).
   */
  private async gate(
    caller: RestoreCaller,
    options: PlanOptions,
    reviewed: string | undefined,
  ): Promise<{ plan: RestorePlan; approval: Approval | null }> {
    const policy = await this.policy();
    let plan: RestorePlan;
    try {
      plan = await planFromIndex(options);
    } catch (e) {
      // The redis/s3 allow-list (plan-options.ts `targetChecks`) refuses where an apply would write.
      if (isRestoreError(e, 'ERR_RESTORE_TARGET_NOT_ALLOWED'))
        await caller.record({
          action: 'restore-apply-denied',
          outcome: 'refused',
          target: (await this.state.runs.get(options.request.runId))?.jobId ?? null,
          detail: { reason: 'target-not-allowed' },
        });
      throw e;
    }
    if (!plan.ok) throw new RestoreRefusal(409, { error: `restore cannot be applied: ${plan.reason}` });
    if (reviewed !== undefined && reviewed !== plan.planHash)
      throw new RestoreRefusal(409, {
        error: 'the restore plan changed since it was reviewed: run the dry run again',
        planHash: plan.planHash,
      });
    if (!policy.enabled) return { plan, approval: null };
    try {
      return {
        plan,
        approval: await checkRestoreApproval({ approvals: this.state.approvals, plan, now: this.now }),
      };
    } catch (e) {
      await caller.record({
        action: 'restore-apply-denied',
        outcome: 'refused',
        target: plan.job,
        detail: { reason: 'not-approved', planHash: plan.planHash },
      });
      throw e;
    }
  }

  /** Gates, then starts phases one and two in the background (poll with `applyStatus`). */
  async apply(request: RestoreRequest, caller: RestoreCaller): Promise<ApplyStarted> {
    const options = await this.planOptions(request);
    const { plan, approval } = await this.gate(caller, options, request.planHash);
    const applyId = `rap_${randomBytes(12).toString('hex')}`;
    await this.applies.pin({ applyId, job: plan.job, runId: plan.runId });
    // Pinned first, then the reclaim marker read (runs/reclaim-marker.ts): a reclaim that started
    // before the pin could repack the packs this apply is about to read.
    let reclaiming: boolean;
    try {
      reclaiming = await reclaimUnderWay(this.state, plan.job, new Date());
    } catch (e) {
      await releasePin(this.state.settings, pinId.apply(applyId));
      throw e;
    }
    if (reclaiming) {
      await releasePin(this.state.settings, pinId.apply(applyId));
      throw new RestoreRefusal(409, { error: RECLAIM_REFUSAL });
    }
    await this.applies.claim(applyId);
    const release = approval
      ? await reserveRestoreApproval({ leases: this.state.leases, approval, holder: applyId })
      : null;
    const row: ApplyRow = {
      applyId,
      status: 'running',
      planHash: plan.planHash!,
      runId: plan.runId,
      job: plan.job,
      startedAt: new Date().toISOString(),
      progress: null,
      recordedWritten: 0,
      attempts: 1,
      holder: this.applies.holder,
      request: { ...request, planHash: plan.planHash! },
      approvalId: approval?.id ?? null,
      actor: caller.actor,
    };
    this.applies.launch({
      row,
      options: { ...options, request: row.request, prepared: plan },
      approval,
      release,
      completed: [],
      targetType: plan.target?.type ?? 'unknown',
    });
    return { applyId, planHash: plan.planHash!, plannedWrites: plan.plannedWrites };
  }

  /**
   * Resumes an interrupted apply: the gates again (approval for the same plan hash), phase one
   * again, then only the records not recorded as written.
   */
  async resume(applyId: string, caller: RestoreCaller): Promise<ApplyStarted> {
    const stored = await this.applies.get(applyId);
    if (!stored) throw new RestoreRefusal(404, { error: 'restore apply not found' });
    if (stored.status !== 'interrupted')
      throw new RestoreRefusal(409, {
        error: `only an interrupted apply can be resumed (this one is ${stored.status})`,
        applyId,
      });
    if (!(await this.applies.claim(applyId)))
      throw new RestoreRefusal(409, {
        error: 'the apply is being resumed by another engine process',
        applyId,
      });
    let launched = false;
    try {
      const row = await this.applies.get(applyId);
      if (row?.status !== 'interrupted')
        throw new RestoreRefusal(409, { error: 'only an interrupted apply can be resumed', applyId });
      const options = { ...(await this.planOptions(row.request)), resuming: true };
      const { plan, approval } = await this.gate(caller, options, row.planHash);
      const release = approval
        ? await reserveRestoreApproval({ leases: this.state.leases, approval, holder: applyId })
        : null;
      const completed = await this.applies.completed(applyId);
      row.status = 'running';
      row.attempts += 1;
      row.holder = this.applies.holder;
      row.actor = caller.actor;
      row.recordedWritten = completed.length;
      delete row.interruptedAt;
      await this.applies.pin(row);
      this.applies.launch({
        row,
        options: { ...options, prepared: plan, firstStartedAt: row.startedAt },
        approval,
        release,
        completed,
        targetType: plan.target?.type ?? 'unknown',
      });
      launched = true;
      return {
        applyId,
        planHash: row.planHash,
        plannedWrites: plan.plannedWrites,
        alreadyWritten: completed.length,
      };
    } finally {
      if (!launched) await this.applies.unclaim(applyId);
    }
  }

  /** Cancels a running apply (written records stay) or an interrupted one (no resume). */
  async cancel(applyId: string): Promise<{ applyId: string; status: string }> {
    const row = await this.applies.cancel(applyId);
    if (!row) throw new RestoreRefusal(404, { error: 'restore apply not found' });
    return { applyId: row.applyId, status: row.status };
  }

  /** One apply's view (durable across restarts), or the live applies of this process. */
  async applyStatus(applyId: string | undefined): Promise<Record<string, unknown>> {
    if (applyId === undefined) return { applies: this.applies.liveRows().map(applyView) };
    const row = /^rap_[0-9a-f]{24}$/.test(applyId) ? await this.applies.get(applyId) : null;
    if (!row) throw new RestoreRefusal(404, { error: 'restore apply not found' });
    return applyView(row);
  }

  /** Raises an approval request against the plan of `request`; pins its run until it ends. */
  async requestApproval(request: RestoreRequest, caller: RestoreCaller) {
    const plan = await planFromIndex(await this.planOptions(request));
    const a = await requestRestoreApproval({
      approvals: this.state.approvals,
      registry: this.state.settings,
      plan,
      requester: caller.person,
      now: this.now,
    });
    // Retention keeps the run until the approval is used, rejected or expires.
    await acquirePin(this.state.settings, {
      id: pinId.approval(a.id),
      purpose: 'restore-approval',
      job: plan.job,
      runId: plan.runId,
      expiresAt: a.expiresAt,
    });
    await caller.record({
      action: 'restore-request',
      outcome: 'queued',
      target: plan.job,
      detail: { planHash: plan.planHash, runId: plan.runId, records: plan.plannedWrites },
    });
    this.o.events?.raise({
      name: 'restore-approval-requested',
      jobId: plan.job,
      detail: {
        approvalId: a.id,
        planHash: hashPrefix(a.subjectHash),
        runId: plan.runId,
        records: plan.plannedWrites,
        requestedBy: a.requestedBy,
        requestedByEmail: a.requestedByEmail,
        expiresAt: a.expiresAt,
      },
    });
    return a;
  }

  /** Approves a pending request (another person, after the policy's minimum delay). */
  async approve(planHash: string, caller: RestoreCaller) {
    const policy = await this.policy();
    const a = await approveRestore({
      approvals: this.state.approvals,
      planHash,
      approver: caller.person,
      minDelayMs: policy.minDelaySeconds * 1000,
      now: this.now,
    });
    await caller.record({
      action: 'restore-approve',
      outcome: 'applied',
      target: typeof a.detail.job === 'string' ? a.detail.job : null,
      detail: { planHash: a.subjectHash, requestedBy: a.requestedBy },
    });
    this.o.events?.raise({
      name: 'restore-approved',
      jobId: typeof a.detail.job === 'string' ? a.detail.job : null,
      detail: {
        approvalId: a.id,
        planHash: hashPrefix(a.subjectHash),
        requestedBy: a.requestedBy,
        approvedBy: a.decidedBy ?? caller.person.subject,
        approvedByEmail: a.decidedByEmail ?? caller.person.email,
      },
    });
    return a;
  }

  /**
   * Rejects a pending request (an approver), or withdraws the caller's own. Someone else's request
   * without `restore.approve` is refused ERR_RESTORE_NOT_REQUESTER, audited as a refused reject.
   */
  async reject(planHash: string, reason: string | undefined, caller: RestoreCaller) {
    try {
      const a = await rejectRestore({
        approvals: this.state.approvals,
        planHash,
        by: caller.person,
        now: this.now,
        mayRejectOthers: caller.mayApprove,
        ...(reason === undefined ? {} : { reason }),
      });
      await releasePin(this.state.settings, pinId.approval(a.id));
      await caller.record({
        action: 'restore-reject',
        outcome: 'applied',
        target: typeof a.detail.job === 'string' ? a.detail.job : null,
        detail: { planHash: a.subjectHash },
      });
      const by = a.decidedBy ?? caller.person.subject;
      this.o.events?.raise({
        name: 'restore-rejected',
        jobId: typeof a.detail.job === 'string' ? a.detail.job : null,
        detail: {
          approvalId: a.id,
          planHash: hashPrefix(a.subjectHash),
          requestedBy: a.requestedBy,
          rejectedBy: by,
          rejectedByEmail: a.decidedByEmail ?? caller.person.email,
          withdrawn: by !== null && by === a.requestedBy,
        },
      });
      return a;
    } catch (e) {
      if (isRestoreError(e, 'ERR_RESTORE_NOT_REQUESTER'))
        await caller.record({
          action: 'restore-reject',
          outcome: 'refused',
          target: null,
          detail: { reason: 'not-requester', required: 'restore.approve', planHash },
        });
      throw e;
    }
  }

  /** The approval policy and every approval, newest first. */
  async approvals() {
    const policy = await this.policy();
    return {
      approvalRequired: policy.enabled,
      minDelaySeconds: policy.minDelaySeconds,
      approvals: await listRestoreApprovals({ approvals: this.state.approvals, now: this.now }),
    };
  }

  /** Turns dual control on or off (owner); audited with what changed. */
  async setPolicy(
    change: { enabled: boolean; minDelaySeconds?: number },
    caller: RestoreCaller,
  ): Promise<ApprovalPolicy> {
    const previous = await this.policy();
    await this.state.settings.set(APPROVAL_ENABLED_KEY, change.enabled);
    if (change.minDelaySeconds !== undefined)
      await this.state.settings.set(APPROVAL_MIN_DELAY_KEY, change.minDelaySeconds);
    const policy = await this.policy();
    // Dual control switched off is exactly what an attacker with an owner session wants unseen.
    await caller.record({
      action: 'restore-approval-policy',
      outcome: 'applied',
      detail: {
        enabled: policy.enabled,
        minDelaySeconds: policy.minDelaySeconds,
        previous: { enabled: previous.enabled, minDelaySeconds: previous.minDelaySeconds },
        changedFields: (['enabled', 'minDelaySeconds'] as const).filter((f) => previous[f] !== policy[f]),
      },
    });
    return policy;
  }
}
