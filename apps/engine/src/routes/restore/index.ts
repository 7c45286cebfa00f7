/**
 * The restore routes (specification "Restore"; docs/restore.md is normative for bodies and
 * replies): dry run and apply, the approval routes, verify, keyless attestation, drills and the
 * recovery-time estimate. Logic lives in @coffer/restore; this plugin maps HTTP onto it.
 *
 * Apply gate order of `POST /admin/restore` with `confirm: true`, exactly:
 * (1) capability `restore.apply`, evaluated on the parsed body before the rate limiter and before
 *     anything is read: 403 plus a `restore-apply-denied` audit event;
 * (2) when an owner turned approval on: a usable approval for the server-recomputed plan hash,
 *     else 403 `{ error: 'restore not approved', planHash }` (and a denied-apply event);
 * (3) and (4) phase one (verify everything, write nothing) and phase two (re-verify each record
 *     right before its write) in the background; the reply is 202 with an apply id to poll.
 *
 * Dry runs and verifies (open to every role, and each reads every record in scope) run within the
 * engine's concurrency limits (read-slots.ts): per engine and per caller, else 429.
 *
 * Security-relevant behaviour: request bodies are checked by `validateRestoreRequest` before any
 * read (exact 400 messages); replies and audit events carry plan hashes, counts and reasons, never
 * tokens, keys or record bytes; the bare admin token (no subject) can neither request nor approve.
 */
import { randomBytes } from 'node:crypto';
import { can, forbiddenBody } from '@coffer/authz';
import {
  approveRestore,
  attestRun,
  checkRestoreApproval,
  estimateRto,
  isRestoreError,
  listRestoreApprovals,
  type PlanOptions,
  planFromIndex,
  planRestore,
  RestoreError,
  recordDryRun,
  rejectRestore,
  requestRestoreApproval,
  reserveRestoreApproval,
  validateRestoreRequest,
  verifyRestore,
} from '@coffer/restore';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { callerKey } from '../../plugins/rate-limit.ts';
import { acquirePin, pinId, releasePin } from '../../runs/pins.ts';
import { archiveRunOf } from '../../runs/unchanged.ts';
import { type ApplyRow, ApplyTracker, applyView } from './applies.ts';
import { APPROVAL_ENABLED_KEY, APPROVAL_MIN_DELAY_KEY, approvalPolicy, planOptionsFor } from './context.ts';

const PlanHashBody = Type.Object(
  {
    planHash: Type.String({ pattern: '^sha384:[0-9a-f]{96}$' }),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
const ApplyIdBody = Type.Object(
  { applyId: Type.String({ pattern: '^rap_[0-9a-f]{24}$' }) },
  { additionalProperties: false },
);
const PolicyBody = Type.Object(
  { enabled: Type.Boolean(), minDelaySeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })) },
  { additionalProperties: false },
);
const DrillBody = Type.Object(
  {
    job: Type.String({ minLength: 1, maxLength: 128 }),
    runId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);
/** The RestoreRequest body is checked in code (exact 400 messages); the schema documents it only. */
const RestoreBody = Type.Unknown({ description: 'RestoreRequest (docs/restore.md)' });

function sendRestoreError(reply: FastifyReply, e: unknown): FastifyReply {
  if (!isRestoreError(e)) throw e;
  if (e.retryAfterSeconds !== undefined) reply.header('retry-after', String(e.retryAfterSeconds));
  return reply.code(e.status).send(e.toJSON());
}

function actor(request: FastifyRequest) {
  return { subject: request.caller?.subject ?? null, email: request.caller?.email ?? null };
}

export default async function restoreRoutes(app: FastifyInstance): Promise<void> {
  const state = app.engine.state;
  // Durable applies (applies.ts): progress in the state store, interrupted ones found at start.
  const tracker = new ApplyTracker(app);
  app.addHook('onReady', async () => tracker.startSweeps());
  app.addHook('preClose', async () => tracker.stop());
  const applyCapability = app.requireCapability('restore.apply');
  const requestCapability = app.requireCapability('restore.request');
  async function rejectCapability(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const caller = request.caller;
    if (!caller) return requestCapability(request, reply); // the gate's own 401
    if (!can(caller.authz, 'restore.approve') && !can(caller.authz, 'restore.request'))
      reply.code(403).send(forbiddenBody('restore.approve', caller.authz));
  }

  // (1) then the rate limiter: the capability depends on `confirm`, so it runs on the parsed body.
  async function applyGate(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const body = request.body as { confirm?: unknown } | null | undefined;
    if (body && typeof body === 'object' && body.confirm === true) {
      await applyCapability(request, reply);
      if (reply.sent) {
        await app.audit.forRequest(request, {
          action: 'restore-apply-denied',
          outcome: 'refused',
          target: null,
          detail: { reason: 'capability', required: 'restore.apply' },
        });
        return;
      }
    }
    await app.rateLimitCaller(request, reply);
  }

  /**
   * Gate (2) and the plan checks of an apply (or a resume): the plan recomputed from the index must
   * be ok and equal the reviewed hash; with approval on, a usable approval for it. Sends the refusal
   * and returns null, or returns the plan and the approval.
   */
  async function gateApply(
    request: FastifyRequest,
    reply: FastifyReply,
    options: PlanOptions,
    reviewed: string | undefined,
  ): Promise<{
    plan: Awaited<ReturnType<typeof planFromIndex>>;
    approval: Awaited<ReturnType<typeof checkRestoreApproval>> | null;
  } | null> {
    const policy = await approvalPolicy(app);
    let plan: Awaited<ReturnType<typeof planFromIndex>>;
    try {
      plan = await planFromIndex(options);
    } catch (e) {
      // The redis/s3 allow-list (context.ts `targetChecks`) refuses where an apply would write.
      if (!isRestoreError(e) || e.code !== 'ERR_RESTORE_TARGET_NOT_ALLOWED') throw e;
      await app.audit.forRequest(request, {
        action: 'restore-apply-denied',
        outcome: 'refused',
        target: (await app.engine.state.runs.get(options.request.runId))?.jobId ?? null,
        detail: { reason: 'target-not-allowed' },
      });
      sendRestoreError(reply, e);
      return null;
    }
    if (!plan.ok) {
      reply.code(409).send({ error: `restore cannot be applied: ${plan.reason}` });
      return null;
    }
    if (reviewed !== undefined && reviewed !== plan.planHash) {
      reply.code(409).send({
        error: 'the restore plan changed since it was reviewed: run the dry run again',
        planHash: plan.planHash,
      });
      return null;
    }
    if (!policy.enabled) return { plan, approval: null };
    try {
      return {
        plan,
        approval: await checkRestoreApproval({
          approvals: state.approvals,
          plan,
          now: app.engine.restoreClock,
        }),
      };
    } catch (e) {
      await app.audit.forRequest(request, {
        action: 'restore-apply-denied',
        outcome: 'refused',
        target: plan.job,
        detail: { reason: 'not-approved', planHash: plan.planHash },
      });
      sendRestoreError(reply, e);
      return null;
    }
  }

  app.post(
    '/restore',
    {
      preValidation: [applyGate],
      config: { capability: 'restore.apply' },
      schema: {
        summary: 'Dry run (any authenticated caller) or apply (`confirm: true`, restore.apply) of a restore',
        operationId: 'restore',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        const req = validateRestoreRequest(request.body);
        if (!req.confirm)
          return await app.engine.restoreReads.run(callerKey(request), reply, async () => {
            const plan = await planRestore(await planOptionsFor(app, req));
            await recordDryRun(state.settings, plan);
            return plan;
          });
        const options = await planOptionsFor(app, req);
        // (2) approval, against the plan recomputed from the index.
        const gated = await gateApply(request, reply, options, req.planHash);
        if (!gated) return reply;
        const { plan, approval } = gated;
        const applyId = `rap_${randomBytes(12).toString('hex')}`;
        await tracker.pin({ applyId, job: plan.job, runId: plan.runId });
        await tracker.claim(applyId);
        const release = approval
          ? await reserveRestoreApproval({ leases: state.leases, approval, holder: applyId })
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
          holder: tracker.holder,
          request: { ...req, planHash: plan.planHash! },
          approvalId: approval?.id ?? null,
          actor: app.audit.actorOf(request),
        };
        // (3) and (4) in the background.
        tracker.launch({
          row,
          options: { ...options, request: row.request },
          approval,
          release,
          completed: [],
          targetType: plan.target?.type ?? 'unknown',
        });
        return reply.code(202).send({
          ok: true,
          mode: 'apply',
          applyId,
          status: 'running',
          planHash: plan.planHash,
          plannedWrites: plan.plannedWrites,
          poll: `/admin/restore/applies?id=${applyId}`,
        });
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  app.get<{ Querystring: { id?: string } }>(
    '/restore/applies',
    {
      schema: {
        summary: 'Progress and receipt of a restore apply (?id=), durable across engine restarts',
        operationId: 'restoreApplies',
        tags: ['admin', 'restore'],
        querystring: Type.Object({ id: Type.Optional(Type.String({ maxLength: 64 })) }),
      },
    },
    async (request, reply) => {
      const id = request.query.id;
      if (id === undefined) return { applies: tracker.liveRows().map(applyView) };
      const row = /^rap_[0-9a-f]{24}$/.test(id) ? await tracker.get(id) : null;
      return row ? applyView(row) : reply.code(404).send({ error: 'restore apply not found' });
    },
  );

  app.post<{ Body: { applyId: string } }>(
    '/restore/cancel',
    {
      onRequest: [app.requireCapability('restore.apply'), app.rateLimitCaller],
      config: { capability: 'restore.apply' },
      schema: {
        summary: 'Cancel a running apply (written records stay) or an interrupted one (no resume)',
        operationId: 'restoreCancel',
        tags: ['admin', 'restore'],
        body: ApplyIdBody,
      },
    },
    async (request, reply) => {
      const row = await tracker.cancel(request.body.applyId);
      if (!row) return reply.code(404).send({ error: 'restore apply not found' });
      return { ok: true, applyId: row.applyId, status: row.status };
    },
  );

  app.post<{ Body: { applyId: string } }>(
    '/restore/resume',
    {
      onRequest: [app.requireCapability('restore.apply'), app.rateLimitCaller],
      config: { capability: 'restore.apply', audit: { action: 'restore-apply-denied' } },
      schema: {
        summary: 'Resume an interrupted apply: gates again, phase one again, then only unwritten records',
        operationId: 'restoreResume',
        tags: ['admin', 'restore'],
        body: ApplyIdBody,
      },
    },
    async (request, reply) => {
      const id = request.body.applyId;
      const stored = await tracker.get(id);
      if (!stored) return reply.code(404).send({ error: 'restore apply not found' });
      if (stored.status !== 'interrupted')
        return reply.code(409).send({
          error: `only an interrupted apply can be resumed (this one is ${stored.status})`,
          applyId: id,
        });
      if (!(await tracker.claim(id)))
        return reply
          .code(409)
          .send({ error: 'the apply is being resumed by another engine process', applyId: id });
      let launched = false;
      try {
        const row = await tracker.get(id);
        if (row?.status !== 'interrupted')
          return reply.code(409).send({ error: 'only an interrupted apply can be resumed', applyId: id });
        const options = { ...(await planOptionsFor(app, row.request)), resuming: true };
        const gated = await gateApply(request, reply, options, row.planHash);
        if (!gated) return reply;
        const { approval } = gated;
        const release = approval
          ? await reserveRestoreApproval({ leases: state.leases, approval, holder: id })
          : null;
        const completed = await tracker.completed(id);
        row.status = 'running';
        row.attempts += 1;
        row.holder = tracker.holder;
        row.actor = app.audit.actorOf(request);
        row.recordedWritten = completed.length;
        delete row.interruptedAt;
        await tracker.pin(row);
        tracker.launch({
          row,
          options,
          approval,
          release,
          completed,
          targetType: gated.plan.target?.type ?? 'unknown',
        });
        launched = true;
        return reply.code(202).send({
          ok: true,
          mode: 'apply',
          applyId: id,
          status: 'running',
          resumed: true,
          alreadyWritten: completed.length,
          planHash: row.planHash,
          plannedWrites: gated.plan.plannedWrites,
          poll: `/admin/restore/applies?id=${id}`,
        });
      } catch (e) {
        return sendRestoreError(reply, e);
      } finally {
        if (!launched) await tracker.unclaim(id);
      }
    },
  );

  app.post(
    '/restore/request',
    {
      onRequest: [app.requireCapability('restore.request'), app.rateLimitCaller],
      config: { capability: 'restore.request' },
      schema: {
        summary: 'Raise a restore approval request against a dry-run plan',
        operationId: 'restoreRequest',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        const req = validateRestoreRequest(request.body);
        const plan = await planFromIndex(await planOptionsFor(app, req));
        const a = await requestRestoreApproval({
          approvals: state.approvals,
          registry: state.settings,
          plan,
          requester: actor(request),
          now: app.engine.restoreClock,
        });
        // Retention keeps the run until the approval is used, rejected or expires.
        await acquirePin(state.settings, {
          id: pinId.approval(a.id),
          purpose: 'restore-approval',
          job: plan.job,
          runId: plan.runId,
          expiresAt: a.expiresAt,
        });
        await app.audit.forRequest(request, {
          action: 'restore-request',
          outcome: 'queued',
          target: plan.job,
          detail: { planHash: plan.planHash, runId: plan.runId, records: plan.plannedWrites },
        });
        return { ok: true, approval: a };
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  app.post<{ Body: { planHash: string } }>(
    '/restore/approve',
    {
      onRequest: [app.requireCapability('restore.approve'), app.rateLimitCaller],
      config: { capability: 'restore.approve' },
      schema: {
        summary: 'Approve a pending restore request (another person)',
        operationId: 'restoreApprove',
        tags: ['admin', 'restore'],
        body: PlanHashBody,
      },
    },
    async (request, reply) => {
      try {
        const policy = await approvalPolicy(app);
        const a = await approveRestore({
          approvals: state.approvals,
          planHash: request.body.planHash,
          approver: actor(request),
          minDelayMs: policy.minDelaySeconds * 1000,
          now: app.engine.restoreClock,
        });
        await app.audit.forRequest(request, {
          action: 'restore-approve',
          outcome: 'applied',
          target: typeof a.detail.job === 'string' ? a.detail.job : null,
          detail: { planHash: a.subjectHash, requestedBy: a.requestedBy },
        });
        return { ok: true, approval: a };
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  app.post<{ Body: { planHash: string; reason?: string } }>(
    '/restore/reject',
    {
      // Either capability may reach the route: an approver rejects any request, a holder of
      // restore.request only withdraws their own (checked against the stored requester's stable
      // subject in the handler). Gated, like every mutating POST, before the rate limiter.
      onRequest: [rejectCapability, app.rateLimitCaller],
      schema: {
        summary: 'Reject (or withdraw) a pending restore request',
        operationId: 'restoreReject',
        tags: ['admin', 'restore'],
        body: PlanHashBody,
      },
    },
    async (request, reply) => {
      const approver = request.caller ? can(request.caller.authz, 'restore.approve') : false;
      try {
        const a = await rejectRestore({
          approvals: state.approvals,
          planHash: request.body.planHash,
          by: actor(request),
          now: app.engine.restoreClock,
          mayRejectOthers: approver,
          ...(request.body.reason === undefined ? {} : { reason: request.body.reason }),
        });
        await releasePin(state.settings, pinId.approval(a.id));
        await app.audit.forRequest(request, {
          action: 'restore-reject',
          outcome: 'applied',
          target: typeof a.detail.job === 'string' ? a.detail.job : null,
          detail: { planHash: a.subjectHash },
        });
        return { ok: true, approval: a };
      } catch (e) {
        if (isRestoreError(e, 'ERR_RESTORE_NOT_REQUESTER') && request.caller) {
          await app.audit.forRequest(request, {
            action: 'restore-reject',
            outcome: 'refused',
            target: null,
            detail: { reason: 'not-requester', required: 'restore.approve', planHash: request.body.planHash },
          });
          return reply.code(403).send(forbiddenBody('restore.approve', request.caller.authz));
        }
        return sendRestoreError(reply, e);
      }
    },
  );

  app.get(
    '/restore/approvals',
    {
      schema: {
        summary: 'Restore approvals, newest first',
        operationId: 'restoreApprovals',
        tags: ['admin', 'restore'],
      },
    },
    async () => {
      const policy = await approvalPolicy(app);
      return {
        approvalRequired: policy.enabled,
        minDelaySeconds: policy.minDelaySeconds,
        approvals: await listRestoreApprovals({ approvals: state.approvals, now: app.engine.restoreClock }),
      };
    },
  );

  app.post<{ Body: { enabled: boolean; minDelaySeconds?: number } }>(
    '/restore/approval-policy',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.rateLimitCaller],
      config: { capability: 'keys.ceremony', audit: { action: 'restore-approval-policy' } },
      schema: {
        summary: 'Turn restore approval (dual control) on or off (owner)',
        operationId: 'restoreApprovalPolicy',
        tags: ['admin', 'restore'],
        body: PolicyBody,
      },
    },
    async (request) => {
      const previous = await approvalPolicy(app);
      await state.settings.set(APPROVAL_ENABLED_KEY, request.body.enabled);
      if (request.body.minDelaySeconds !== undefined)
        await state.settings.set(APPROVAL_MIN_DELAY_KEY, request.body.minDelaySeconds);
      const policy = await approvalPolicy(app);
      // Dual control switched off is exactly what an attacker with an owner session wants unseen.
      await app.audit.forRequest(request, {
        action: 'restore-approval-policy',
        outcome: 'applied',
        detail: {
          enabled: policy.enabled,
          minDelaySeconds: policy.minDelaySeconds,
          previous: { enabled: previous.enabled, minDelaySeconds: previous.minDelaySeconds },
          changedFields: (['enabled', 'minDelaySeconds'] as const).filter((f) => previous[f] !== policy[f]),
        },
      });
      return { ok: true, ...policy };
    },
  );

  app.post(
    '/restore/verify',
    {
      onRequest: [app.requireCapability('restore.verify'), app.rateLimitCaller],
      config: { capability: 'restore.verify' },
      schema: {
        summary: 'Verify every in-scope record of a restore request (writes nothing)',
        operationId: 'restoreVerify',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        const req = validateRestoreRequest(request.body);
        return await app.engine.restoreReads.run(callerKey(request), reply, async () =>
          verifyRestore(await planOptionsFor(app, req)),
        );
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  app.post(
    '/restore/attest',
    {
      onRequest: [app.requireCapability('restore.verify'), app.rateLimitCaller],
      config: { capability: 'restore.verify' },
      schema: {
        summary: 'Keyless attestation: signature, completeness, anti-rollback',
        operationId: 'restoreAttest',
        tags: ['admin', 'restore'],
        body: RestoreBody,
      },
    },
    async (request, reply) => {
      try {
        const req = validateRestoreRequest(request.body);
        const opts = await planOptionsFor(app, req);
        const store = app.engine.destinations.get(req.destinationId ?? 'default');
        if (!store) return reply.code(400).send({ error: 'destinationId names no configured destination' });
        const latest = opts.job ? await state.runs.latestOk(opts.job) : null;
        // Unchanged runs have no archive of their own: attest (and compare with) the archives
        // that hold their data.
        return await attestRun(store, {
          runId: opts.runId ?? req.runId,
          ...(opts.job ? { job: opts.job } : {}),
          signerPublicKey: app.engine.keys.signer.publicKey,
          ...(latest ? { expectedLatest: { runId: await archiveRunOf(state.runs, latest) } } : {}),
        });
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );

  // Drills: one at a time across processes (src/drills/scheduler.ts holds the lease and the evidence).
  app.post<{ Body: { job: string; runId?: string } }>(
    '/drill/run',
    {
      onRequest: [app.requireCapability('drill.run'), app.rateLimitCaller],
      config: { capability: 'drill.run' },
      schema: {
        summary: 'Restore a run into a scratch target and compare (a drill)',
        operationId: 'drillRun',
        tags: ['admin', 'restore'],
        body: DrillBody,
      },
    },
    async (request, reply) => {
      const r = await app.drills.start(request.body.job, {
        ...(request.body.runId === undefined ? {} : { runId: request.body.runId }),
        trigger: 'manual',
        request,
      });
      switch (r.kind) {
        case 'busy':
          return reply
            .code(409)
            .send({ error: 'a drill session is already running', sessionId: r.sessionId });
        case 'not-found':
          return reply.code(404).send({ error: `${r.what} not found` });
        case 'started':
          return reply.code(202).send({
            ok: true,
            sessionId: r.session.sessionId,
            job: r.session.job,
            runId: r.session.runId,
            status: 'running',
          });
        default:
          return reply.code(409).send({ error: 'no operational key: this engine cannot read archives back' });
      }
    },
  );

  const evidence = () => app.drills.evidence();

  app.get(
    '/attest/session/status',
    {
      onRequest: [app.requireCapability('drill.run')],
      config: { capability: 'drill.run' },
      schema: {
        summary: 'The attended drill session: running or idle, and the last result',
        operationId: 'attestSessionStatus',
        tags: ['admin', 'restore'],
      },
    },
    async () => {
      const live = await app.drills.liveSession();
      return {
        active: live !== null,
        ...(live ? { session: live } : {}),
        last: (await evidence())[0] ?? null,
      };
    },
  );

  app.get(
    '/drill-all',
    {
      schema: {
        summary: 'Latest drill per job, with its verdict',
        operationId: 'drillAll',
        tags: ['admin', 'restore'],
      },
    },
    async () => {
      const all = await evidence();
      const jobs = (await state.jobs.list()).map((j) => {
        const last = all.find((e) => e.job === j.id) ?? null;
        return {
          job: j.id,
          lastDrill: last
            ? {
                id: last.id,
                runId: last.runId,
                verdict: last.verdict,
                startedAt: last.startedAt,
                durationMs: last.durationMs,
              }
            : null,
        };
      });
      return { jobs, running: await app.drills.liveSession() };
    },
  );

  app.get<{ Querystring: { id?: string; job?: string } }>(
    '/drill-evidence',
    {
      schema: {
        summary: 'Recorded drill evidence (?id= one, ?job= one job), newest first',
        operationId: 'drillEvidence',
        tags: ['admin', 'restore'],
        querystring: Type.Object({
          id: Type.Optional(Type.String({ maxLength: 64 })),
          job: Type.Optional(Type.String({ maxLength: 128 })),
        }),
      },
    },
    async (request, reply) => {
      const all = await evidence();
      if (request.query.id !== undefined) {
        const one = all.find((e) => e.id === request.query.id);
        return one ?? reply.code(404).send({ error: 'drill evidence not found' });
      }
      return {
        evidence: request.query.job === undefined ? all : all.filter((e) => e.job === request.query.job),
      };
    },
  );

  app.get(
    '/rto',
    {
      onRequest: [app.requireCapability('reports.read')],
      config: { capability: 'reports.read' },
      schema: {
        summary: 'Recovery-time estimate per job and fleet, from drill history',
        operationId: 'rto',
        tags: ['admin', 'restore'],
      },
    },
    async () => {
      const jobs = (await state.jobs.list()).map((j) => j.id);
      return estimateRto(await evidence(), { jobs });
    },
  );
}
