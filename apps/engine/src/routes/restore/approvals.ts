/**
 * Dual control: raise an approval request against a dry-run plan, approve it (another person),
 * reject or withdraw it, list approvals, and the owner's approval policy. The rules are
 * @coffer/restore's (approvals.ts); the restore service records the audit events.
 */
import { can, forbiddenBody } from '@coffer/authz';
import { isRestoreError, validateRestoreRequest } from '@coffer/restore';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PlanHashBody, PolicyBody, RestoreBody, restoreCaller, sendRestoreError } from './shared.ts';

export default async function approvalRoutes(app: FastifyInstance): Promise<void> {
  const requestCapability = app.requireCapability('restore.request');
  async function rejectCapability(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const caller = request.caller;
    if (!caller) return requestCapability(request, reply); // the gate's own 401
    if (!can(caller.authz, 'restore.approve') && !can(caller.authz, 'restore.request'))
      reply.code(403).send(forbiddenBody('restore.approve', caller.authz));
  }

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
        return { ok: true, approval: await app.restores.requestApproval(req, restoreCaller(app, request)) };
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
        return {
          ok: true,
          approval: await app.restores.approve(request.body.planHash, restoreCaller(app, request)),
        };
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
      // subject by the service). Gated, like every mutating POST, before the rate limiter.
      onRequest: [rejectCapability, app.rateLimitCaller],
      schema: {
        summary: 'Reject (or withdraw) a pending restore request',
        operationId: 'restoreReject',
        tags: ['admin', 'restore'],
        body: PlanHashBody,
      },
    },
    async (request, reply) => {
      try {
        const a = await app.restores.reject(
          request.body.planHash,
          request.body.reason,
          restoreCaller(app, request),
        );
        return { ok: true, approval: a };
      } catch (e) {
        if (isRestoreError(e, 'ERR_RESTORE_NOT_REQUESTER') && request.caller)
          return reply.code(403).send(forbiddenBody('restore.approve', request.caller.authz));
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
    async () => app.restores.approvals(),
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
    async (request) => ({
      ok: true,
      ...(await app.restores.setPolicy(request.body, restoreCaller(app, request))),
    }),
  );
}
