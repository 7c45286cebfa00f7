/**
 * Owner-action dual control (specification "Pending changes": owner action pending, HTTP 202
 * `ownerActionQueued`; docs/identity.md "Owner-action dual control").
 * - `POST /admin/policy/owner-actions` `{ armed }` (an owner, step-up): arming applies at once (it
 *   only makes things stricter) and needs a second owner to exist (else nothing could ever be
 *   approved: 409); disarming while armed is itself an owner action (202, queued).
 * - While armed, minting a pull credential, retiring the bearer and granting `owner` (assign or
 *   invite) answer 202 `{ ownerActionQueued: true, id, status: 'pending' }` instead of acting.
 * - `GET /admin/owner-actions` (an owner): the pending and decided actions, newest first.
 * - `POST /admin/owner-actions/<id>/approve` (an owner with a subject, not the maker; step-up):
 *   carries the action out once (compare-and-set on the record) and answers its result (for a
 *   pull credential: the secret, shown once, to the approver, who hands it over).
 *   `/reject`: any owner (the maker withdraws); single use; expired after 24 hours.
 * - Update approvals (updates/approval.ts, docs/updates.md "Approval policy"): a live apply the
 *   update-approval policy holds (`update-apply`) runs on approval after the channel is checked
 *   again (another document: 409, the action consumed); lowering the policy (`update-policy`) sets
 *   it on approval. Both are queued whether or not the gate is armed; the list shows their
 *   parameters (versions, channel, policy; never a token).
 * Every queue, approval and rejection is audited. A queued action raises its notification event
 * (src/events.ts: `credential-minted`, `admin-token-retired`, `role-changed`) only when it is
 * carried out here, never when it is queued.
 */
import { isOwner } from '@coffer/authz';
import type { ApprovalRecord, PullScope } from '@coffer/state';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { roleName } from '../../plugins/auth.ts';
import { sendBadRequest, sendForbidden, sendStateUnavailable } from '../../plugins/replies.ts';
import { retireAdminToken } from '../../state/index.ts';
import {
  type OwnerAction,
  ownerGateArmed,
  queueOwnerAction,
  setOwnerGate,
} from '../../state/owner-actions.ts';
import {
  approveQueuedUpdate,
  readUpdatePolicy,
  type UpdateApproval,
  writeUpdatePolicy,
} from '../../updates/approval.ts';
import { mintCredential } from '../support/grants.ts';

/**
 * When the gate is armed: queues `action` and sends the 202; returns true. False when the gate is
 * open (the route then acts itself). Throws when the gate cannot be read (fail closed).
 */
export async function queuedIfArmed(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  action: OwnerAction,
  params: Record<string, unknown>,
): Promise<boolean> {
  if (!(await ownerGateArmed(app.state))) return false;
  const record = await queueAudited(app, request, action, params);
  void reply.code(202).send({ ownerActionQueued: true, id: record.id, status: 'pending' });
  return true;
}

/** Queues `action` by the caller of `request` and records `owner-action-queued`; throws on a store fault. */
export async function queueAudited(
  app: FastifyInstance,
  request: FastifyRequest,
  action: OwnerAction,
  params: Record<string, unknown>,
): Promise<ApprovalRecord> {
  const caller = request.caller!;
  const record = await queueOwnerAction(app.state, action, params, {
    subject: caller.subject,
    email: caller.email,
  });
  await app.audit.forRequest(request, {
    action: 'owner-action-queued',
    outcome: 'queued',
    target: record.id,
    detail: { action },
  });
  return record;
}

/** Owner actions of the update-approval policy, whose (non-secret) parameters the list shows. */
const UPDATE_ACTIONS: ReadonlySet<string> = new Set(['update-apply', 'update-policy']);

export default async function ownerActionRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });
  const ownerOnly = async (request: FastifyRequest, reply: FastifyReply) => {
    const caller = request.caller!;
    if (!isOwner(caller.authz)) sendForbidden(reply, 'owner', roleName(caller.role));
  };

  /** Carries out an approved action; returns its result (a pull credential's secret included). */
  async function carryOut(action: OwnerAction, params: Record<string, unknown>, makerEmail: string | null) {
    switch (action) {
      case 'credential-mint': {
        const minted = await mintCredential(
          app.state,
          params.scope as PullScope,
          params.lifetimeSeconds as number | undefined,
          makerEmail,
        );
        return {
          scope: params.scope,
          clientId: minted.clientId,
          secret: minted.secret,
          credential: `${minted.clientId}.${minted.secret}`,
          expiresAt: minted.expiresAt,
        };
      }
      case 'admin-token-retire':
        await retireAdminToken(app.state, null);
        return { retired: true };
      case 'owner-grant':
        await app.state.roles.assign({
          subject: String(params.subject),
          role: 'owner',
          email: typeof params.email === 'string' ? params.email : null,
          grantedBy: 'owner-action',
        });
        return { subject: params.subject, role: 'owner' };
      case 'gate-disarm':
        await setOwnerGate(app.state, false, null);
        await app.audit.append({
          action: 'owner-action-gate',
          actor: { email: null, subject: null, method: 'engine' },
          outcome: 'applied',
          detail: { armed: false },
        });
        return { armed: false };
      case 'update-policy': {
        const approval: UpdateApproval = params.approval === 'migrations' ? 'migrations' : 'all';
        const previous = (await readUpdatePolicy(app.state)).approval;
        await writeUpdatePolicy(app.state, approval, 'owner-action');
        await app.audit.append({
          action: 'owner-action-gate',
          actor: { email: null, subject: null, method: 'engine' },
          outcome: 'applied',
          target: 'update-approval',
          detail: { updateApproval: approval, previous },
        });
        return { approval };
      }
      case 'update-apply':
        // Carried out by approveQueuedUpdate (the channel is checked before the action is consumed).
        throw new Error('update-apply is carried out by approveQueuedUpdate');
    }
  }

  /** The notification event of an owner action carried out on approval (never its secret). */
  function raiseCarriedOut(
    action: OwnerAction,
    result: Awaited<ReturnType<typeof carryOut>>,
    ownerActionId: string,
    maker: string | null,
    approver: string,
  ): void {
    const via = { viaOwnerAction: true, ownerActionId, by: maker, approvedBy: approver };
    if (action === 'credential-mint' && 'clientId' in result)
      app.events.raise({
        name: 'credential-minted',
        jobId: null,
        detail: {
          scope: String(result.scope),
          clientId: String(result.clientId),
          expiresAt: String(result.expiresAt),
          ...via,
        },
      });
    else if (action === 'admin-token-retire')
      app.events.raise({ name: 'admin-token-retired', jobId: null, detail: via });
    else if (action === 'owner-grant' && 'role' in result)
      app.events.raise({
        name: 'role-changed',
        jobId: null,
        detail: { subject: String(result.subject), from: null, to: 'owner', via: 'owner-action', ...via },
      });
  }

  app.post<{ Body: { armed?: unknown } }>(
    '/policy/owner-actions',
    {
      onRequest: [ownerOnly, app.requireStepUp, app.rateLimitCaller],
      ...meta('Arm or disarm owner-action dual control', 'postPolicyOwnerActions'),
    },
    async (request, reply) => {
      const armed = request.body?.armed;
      if (typeof armed !== 'boolean') return sendBadRequest(reply, 'armed must be true or false');
      try {
        const now = await ownerGateArmed(app.state);
        if (armed === now) return { ok: true, armed };
        if (!armed) {
          if (await queuedIfArmed(app, request, reply, 'gate-disarm', {})) return reply;
          return { ok: true, armed };
        }
        const owners = (await app.state.roles.list()).filter((m) => m.role === 'owner');
        if (owners.length < 2)
          return reply
            .code(409)
            .send({ error: 'a second owner is needed to approve owner actions', owners: owners.length });
        await setOwnerGate(app.state, true, request.caller!.subject);
        await app.audit.forRequest(request, {
          action: 'owner-action-gate',
          outcome: 'applied',
          detail: { armed: true },
        });
        return { ok: true, armed: true };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.get(
    '/owner-actions',
    { onRequest: [ownerOnly], ...meta('Owner actions, newest first', 'listOwnerActions') },
    async (_request, reply) => {
      try {
        const rows = await app.state.approvals.list({ kind: 'owner-action' });
        return {
          armed: await ownerGateArmed(app.state),
          actions: rows.map((r) => ({
            id: r.id,
            action: (r.detail as { action?: string }).action,
            status:
              r.status === 'pending' && r.expiresAt !== null && Date.parse(r.expiresAt) <= Date.now()
                ? 'expired'
                : r.status,
            ...(UPDATE_ACTIONS.has(String((r.detail as { action?: string }).action))
              ? { params: (r.detail as { params?: unknown }).params ?? null }
              : {}),
            requestedBy: r.requestedBy,
            requestedByEmail: r.requestedByEmail,
            requestedAt: r.requestedAt,
            decidedBy: r.decidedBy,
            decidedAt: r.decidedAt,
            expiresAt: r.expiresAt,
          })),
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Params: { id: string } }>(
    '/owner-actions/:id/approve',
    {
      onRequest: [ownerOnly, app.requireStepUp, app.rateLimitCaller],
      ...meta('Approve and carry out a pending owner action (a second owner)', 'approveOwnerAction'),
    },
    async (request, reply) => {
      const caller = request.caller!;
      if (caller.subject === null)
        return reply.code(403).send({ error: 'forbidden', required: 'owner', have: 'admin-token' });
      try {
        const record = await app.state.approvals.get(request.params.id);
        if (record === null || record.kind !== 'owner-action')
          return reply.code(404).send({ error: 'no such owner action' });
        if (record.requestedBy === caller.subject)
          return reply.code(403).send({ error: 'maker is not checker: another owner approves' });
        if (record.expiresAt !== null && Date.parse(record.expiresAt) <= Date.now()) {
          await app.state.approvals.transition(record.id, ['pending'], 'expired');
          return reply.code(409).send({ error: 'the owner action expired', status: 'expired' });
        }
        if ((record.detail as { action?: string }).action === 'update-apply') {
          if (record.status !== 'pending')
            return reply.code(409).send({ error: 'the owner action is not pending' });
          return await approveQueuedUpdate(app, request, reply, record);
        }
        // Single use: only one approval moves it out of pending.
        const approved = await app.state.approvals.transition(record.id, ['pending'], 'consumed', {
          by: caller.subject,
          byEmail: caller.email,
        });
        if (approved === null) return reply.code(409).send({ error: 'the owner action is not pending' });
        const { action, params } = record.detail as { action: OwnerAction; params: Record<string, unknown> };
        const result = await carryOut(action, params ?? {}, record.requestedByEmail);
        await app.audit.forRequest(request, {
          action: 'owner-action-approved',
          outcome: 'applied',
          target: record.id,
          approver: { subject: caller.subject, email: caller.email },
          detail: { action, maker: record.requestedBy },
        });
        raiseCarriedOut(action, result, record.id, record.requestedBy, caller.subject);
        return { ok: true, id: record.id, status: 'carried out', action, result };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Params: { id: string } }>(
    '/owner-actions/:id/reject',
    {
      onRequest: [ownerOnly, app.rateLimitCaller],
      ...meta('Reject (or withdraw) a pending owner action', 'rejectOwnerAction'),
    },
    async (request, reply) => {
      try {
        const record = await app.state.approvals.get(request.params.id);
        if (record === null || record.kind !== 'owner-action')
          return reply.code(404).send({ error: 'no such owner action' });
        const rejected = await app.state.approvals.transition(record.id, ['pending'], 'rejected', {
          by: request.caller!.subject ?? 'admin-token',
          byEmail: request.caller!.email,
        });
        if (rejected === null) return reply.code(409).send({ error: 'the owner action is not pending' });
        await app.audit.forRequest(request, {
          action: 'owner-action-rejected',
          outcome: 'applied',
          target: record.id,
          detail: { action: (record.detail as { action?: string }).action },
        });
        return { ok: true, id: record.id, status: 'rejected' };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}
