/**
 * The update-approval policy (specification "Update lifecycle": "an update-approval policy can
 * require a second owner ... for every release or for migrations"; docs/updates.md "Approval
 * policy"). The policy is one settings key, `update.approval-policy`:
 * - `migrations` (the default): a release with `migration: true` needs a second owner; every other
 *   release applies at once (one-click);
 * - `all`: every live apply, and every live ramp, needs a second owner.
 *
 * A live request that needs a second owner is not carried out: after its deploy token was taken
 * and an approved-path dry run passed (so only a request that would run is queued), it is queued
 * as the owner action `update-apply` (docs/identity.md "Owner-action dual control"), bound to the
 * exact signed channel document it was checked against (sequence, digest and target versions).
 * When a different owner approves it (`POST /admin/owner-actions/<id>/approve`, step-up), the
 * engine fetches and verifies the channel again and refuses, consuming the approval, when the
 * channel no longer serves that same document (an approval is never redirected to another
 * release); otherwise it runs the live apply on the approved path (a migration allowed) without
 * a further deploy token. A ramp is never approved into a migration (the guard refuses it).
 *
 * Security-relevant behaviour: a policy value that cannot be read counts as `all` (fail closed);
 * lowering `all` to `migrations` is itself an owner action (routes/admin/updates.ts); the queued
 * parameters hold no token; the approval is single use (compare-and-set on the record).
 */
import type { ApprovalRecord, State } from '@coffer/state';
import { type ComponentName, isUpdateError, type UpdateRecord } from '@coffer/update';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isInputCode, type UpdateResult, type UpdateService } from './service.ts';

export const UPDATE_APPROVAL_POLICY = 'update.approval-policy';
export const UPDATE_APPROVALS = ['migrations', 'all'] as const;
export type UpdateApproval = (typeof UPDATE_APPROVALS)[number];

export interface UpdatePolicy {
  approval: UpdateApproval;
  /** Who set it (subject, `admin-token`, or `owner-action` for an approved lowering); null: default. */
  setBy: string | null;
  setAt: string | null;
}

/** The policy; absent means `migrations`, an unreadable value `all`. Throws when the store fails. */
export async function readUpdatePolicy(state: State): Promise<UpdatePolicy> {
  const v = await state.settings.get<{ approval?: unknown; by?: unknown; at?: unknown }>(
    UPDATE_APPROVAL_POLICY,
  );
  if (v === undefined || v === null) return { approval: 'migrations', setBy: null, setAt: null };
  return {
    approval: v.approval === 'migrations' ? 'migrations' : 'all',
    setBy: typeof v.by === 'string' ? v.by : null,
    setAt: typeof v.at === 'string' ? v.at : null,
  };
}

export async function writeUpdatePolicy(state: State, approval: UpdateApproval, by: string): Promise<void> {
  await state.settings.set(UPDATE_APPROVAL_POLICY, { approval, by, at: new Date().toISOString() });
}

/** The body of an apply or ramp, defaults applied. */
export interface UpdateRequest {
  dryRun: boolean;
  components?: ComponentName[];
  allowDowngrade?: boolean;
  readBack?: 'warn' | 'enforce';
  percentage?: number;
}

/** The parameters of a queued `update-apply` owner action (never a token). */
export interface QueuedUpdate {
  kind: 'apply' | 'ramp';
  components: ComponentName[] | null;
  allowDowngrade: boolean | null;
  readBack: 'warn' | 'enforce' | null;
  percentage: number | null;
  /** The engine target version (the console's when only the console was asked for). */
  version: string | null;
  /** Target version per component, as the dry run resolved them. */
  to: Partial<Record<ComponentName, string>>;
  /** The signed channel document the request was checked against. */
  channel: { sequence: number; digest: string };
}

export interface PolicyDecision {
  /** What to answer (for a queued request: the approved-path dry run that passed). */
  result: UpdateResult;
  /** The release needs a second owner under the policy (false for no-update). */
  approvalRequired: boolean;
  /** Set when a live request is to be queued instead of carried out. */
  queue: QueuedUpdate | null;
}

function queuedFrom(input: UpdateRequest, record: UpdateRecord): QueuedUpdate {
  return {
    kind: input.percentage !== undefined ? 'ramp' : 'apply',
    components: input.components ?? null,
    allowDowngrade: input.allowDowngrade ?? null,
    readBack: input.readBack ?? null,
    percentage: input.percentage ?? null,
    version: record.to.engine ?? record.to.console ?? null,
    to: { ...record.to },
    channel: { sequence: record.channel.sequence, digest: record.channel.digest },
  };
}

function fields(input: UpdateRequest) {
  return {
    ...(input.components !== undefined ? { components: input.components } : {}),
    ...(input.allowDowngrade !== undefined ? { allowDowngrade: input.allowDowngrade } : {}),
    ...(input.readBack !== undefined ? { readBack: input.readBack } : {}),
    ...(input.percentage !== undefined ? { percentage: input.percentage } : {}),
  };
}

/**
 * Runs an apply or ramp under the policy (the deploy token of a live request already taken).
 * - `migrations`: the request runs as asked (one-click). Only when the migration guard refused it
 *   (a migration release; ramp excepted, which stays refused) is an approved-path dry run made:
 *   a dry run answers it with `approvalRequired`, a live request that would pass is queued.
 * - `all`: an approved-path dry run (a ramp: a ramp dry run) first; a live request that passes is
 *   queued, anything else (no-update, a refusal) is answered as is.
 * Throws UpdateError for a malformed request (as `UpdateService.apply`).
 */
export async function applyUnderPolicy(
  updates: UpdateService,
  input: UpdateRequest,
  approval: UpdateApproval,
): Promise<PolicyDecision> {
  const ramp = input.percentage !== undefined;
  const approvedDryRun = () =>
    updates.apply({ ...fields(input), dryRun: true, ...(ramp ? {} : { path: 'approved' as const }) });
  let probe: UpdateResult;
  if (approval === 'all') probe = await approvedDryRun();
  else {
    const first = await updates.apply({ ...fields(input), dryRun: input.dryRun });
    if (ramp || first.outcome !== 'refused' || first.code !== 'ERR_UPDATE_MIGRATION_GUARD')
      return { result: first, approvalRequired: false, queue: null };
    probe = await approvedDryRun();
  }
  const approvalRequired = probe.outcome !== 'no-update';
  if (input.dryRun || probe.outcome !== 'dry-run' || probe.record === null)
    return { result: probe, approvalRequired, queue: null };
  return { result: probe, approvalRequired: true, queue: queuedFrom(input, probe.record) };
}

/** The parameters of a queued update, or null when they are not an update's. */
export function queuedUpdate(params: unknown): QueuedUpdate | null {
  const p = params as Partial<QueuedUpdate> | null;
  if (p === null || typeof p !== 'object') return null;
  if (p.kind !== 'apply' && p.kind !== 'ramp') return null;
  if (
    typeof p.channel !== 'object' ||
    p.channel === null ||
    typeof p.channel.digest !== 'string' ||
    typeof p.channel.sequence !== 'number' ||
    typeof p.to !== 'object' ||
    p.to === null
  )
    return null;
  return p as QueuedUpdate;
}

/** Where the channel stands against a queued update. */
export type ChannelCheck =
  | { ok: true }
  | { ok: false; changed: false; result: UpdateResult }
  | {
      ok: false;
      changed: true;
      result: UpdateResult;
      current: { sequence: number; digest: string; version: string };
    };

/**
 * Fetches and verifies the channel and compares it with what `q` was checked against: the same
 * signed document (digest and sequence) naming the same target versions. A fetch or verification
 * failure is `changed: false` (nothing can be said yet); another document is `changed: true`.
 */
export async function checkQueuedChannel(updates: UpdateService, q: QueuedUpdate): Promise<ChannelCheck> {
  let channel: Awaited<ReturnType<UpdateService['fetch']>>;
  try {
    channel = await updates.fetch();
  } catch (e) {
    if (!isUpdateError(e)) throw e;
    return {
      ok: false,
      changed: false,
      result: {
        outcome: 'refused',
        step: 'channel',
        code: e.code,
        message: e.message,
        passed: [],
        record: null,
      },
    };
  }
  const doc = channel.document;
  const same =
    channel.digest === q.channel.digest &&
    doc.sequence === q.channel.sequence &&
    (Object.entries(q.to) as [ComponentName, string][]).every(([c, v]) => doc.components[c]?.version === v);
  if (same) return { ok: true };
  return {
    ok: false,
    changed: true,
    current: { sequence: doc.sequence, digest: channel.digest, version: doc.recommended.version },
    result: {
      outcome: 'refused',
      step: 'channel',
      code: null,
      message: 'the channel no longer offers the release that was approved: request the update again',
      passed: [],
      record: null,
    },
  };
}

/** Runs an approved queued update live (no deploy token: it was taken when it was queued). */
export async function runQueuedUpdate(updates: UpdateService, q: QueuedUpdate): Promise<UpdateResult> {
  try {
    return await updates.apply({
      dryRun: false,
      ...(q.components !== null ? { components: q.components } : {}),
      ...(q.allowDowngrade !== null ? { allowDowngrade: q.allowDowngrade } : {}),
      ...(q.readBack !== null ? { readBack: q.readBack } : {}),
      ...(q.kind === 'ramp' ? { percentage: q.percentage ?? 100 } : { path: 'approved' as const }),
      // Closes the gap between the check above and the service's own fetch.
      expectDigest: q.channel.digest,
    });
  } catch (e) {
    if (!isUpdateError(e)) throw e;
    return { outcome: 'refused', step: null, code: e.code, message: e.message, passed: [], record: null };
  }
}

/** The reply body of an update result (routes/admin/updates.ts), without its status. */
export function resultBody(r: UpdateResult) {
  return {
    outcome: r.outcome,
    step: r.step,
    code: r.code,
    passed: r.passed,
    record: r.record,
    message: r.message,
    ...(r.orchestrator ? { orchestrator: r.orchestrator } : {}),
    ...(r.restart ? { restart: true } : {}),
  };
}

/** The status of an update result: 202 restarting, 200 done, 400 bad input, 409 refused. */
export function resultStatus(r: UpdateResult): number {
  if (r.outcome === 'restarting') return 202;
  if (r.outcome !== 'refused') return 200;
  return isInputCode(r.code) ? 400 : 409;
}

/** The `update-apply` / `update-ramp` audit detail of a result (docs/audit.md). */
export function updateAuditDetail(
  kind: 'apply' | 'ramp',
  dryRun: boolean,
  r: UpdateResult | null,
  extra: {
    components?: ComponentName[] | null;
    percentage?: number | null;
    approval?: string;
    outcome?: string;
    reason?: string | null;
  },
): Record<string, unknown> {
  const approval = extra.approval !== undefined ? { approval: extra.approval } : {};
  if (kind === 'ramp')
    return { percent: r?.record?.ramp?.percentage ?? extra.percentage ?? null, settled: false, ...approval };
  return {
    dryRun,
    components: r?.record?.components ?? extra.components ?? null,
    outcome: extra.outcome ?? r?.outcome ?? null,
    reason:
      extra.reason !== undefined
        ? extra.reason
        : r
          ? (r.code ?? (r.outcome === 'refused' ? r.step : null))
          : null,
    ...approval,
  };
}

/**
 * `POST /admin/owner-actions/<id>/approve` of an `update-apply` owner action, after the route's
 * own checks (an owner with a subject, not the maker, step-up, not expired). The channel is
 * checked first: unverifiable now, the action stays pending (409); another document, the action
 * is consumed and refused (409, audited); otherwise it is consumed (single use) and the update runs
 * on the approved path, the reply carrying its result.
 */
export async function approveQueuedUpdate(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  record: ApprovalRecord,
): Promise<FastifyReply> {
  const caller = request.caller!;
  const params = (record.detail as { params?: unknown }).params;
  const q = queuedUpdate(params);
  const approver = { subject: caller.subject, email: caller.email };
  const consume = () =>
    app.state.approvals.transition(record.id, ['pending'], 'consumed', {
      by: caller.subject,
      byEmail: caller.email,
    });
  if (q === null) {
    if ((await consume()) === null) return reply.code(409).send({ error: 'the owner action is not pending' });
    return reply
      .code(409)
      .send({ error: 'the owner action holds no update', id: record.id, status: 'consumed' });
  }
  const action = q.kind === 'ramp' ? 'update-ramp' : 'update-apply';
  const target = q.to.engine ?? null;
  const check = await checkQueuedChannel(app.updates, q);
  if (!check.ok && !check.changed)
    return reply.code(409).send({
      error: `the update channel cannot be verified now (${check.result.code ?? 'unconfigured'}); the owner action stays pending`,
      id: record.id,
      status: 'pending',
      action: 'update-apply',
      result: resultBody(check.result),
    });
  if ((await consume()) === null) return reply.code(409).send({ error: 'the owner action is not pending' });
  const ownerRow = (outcome: 'applied' | 'refused', reason: string | null) =>
    app.audit.forRequest(request, {
      action: 'owner-action-approved',
      outcome,
      target: record.id,
      approver,
      detail: { action: 'update-apply', maker: record.requestedBy, ...(reason ? { reason } : {}) },
    });
  if (!check.ok) {
    await app.audit.forRequest(request, {
      action,
      outcome: 'refused',
      target,
      approver,
      detail: updateAuditDetail(q.kind, false, null, {
        components: q.components,
        percentage: q.percentage,
        approval: record.id,
        outcome: 'refused',
        reason: 'channel-changed',
      }),
    });
    await ownerRow('refused', 'channel-changed');
    return reply.code(409).send({
      error: check.result.message,
      ok: false,
      id: record.id,
      status: 'consumed',
      action: 'update-apply',
      channelChanged: true,
      queued: { version: q.version, channel: q.channel },
      current: check.current,
      result: resultBody(check.result),
    });
  }
  const r = await runQueuedUpdate(app.updates, q);
  if (r.record !== null && r.record.channel.digest !== q.channel.digest)
    request.log.warn(
      { update: 'approval', approval: record.id },
      'the channel changed while the approved update started',
    );
  await app.audit.forRequest(request, {
    action,
    outcome: r.outcome === 'refused' ? 'refused' : 'applied',
    target: r.record?.to.engine ?? target,
    approver,
    detail: updateAuditDetail(q.kind, false, r, {
      components: q.components,
      percentage: q.percentage,
      approval: record.id,
    }),
  });
  await ownerRow(
    r.outcome === 'refused' ? 'refused' : 'applied',
    r.outcome === 'refused' ? 'update-refused' : null,
  );
  const status = resultStatus(r);
  if (r.outcome === 'refused')
    return reply.code(status).send({
      error: r.message ?? 'update refused',
      ok: false,
      id: record.id,
      status: 'consumed',
      action: 'update-apply',
      result: resultBody(r),
    });
  return reply
    .code(status)
    .send({ ok: true, id: record.id, status: 'carried out', action: 'update-apply', result: resultBody(r) });
}
