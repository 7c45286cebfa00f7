/**
 * Dry run and apply (`POST /admin/restore`), the apply's progress, cancel and resume.
 *
 * Apply gate order of `POST /admin/restore` with `confirm: true`, exactly:
 * (1) capability `restore.apply`, evaluated on the parsed body before the rate limiter and before
 *     anything is read: 403 plus a `restore-apply-denied` audit event;
 * (2) when an owner turned approval on: a usable approval for the server-recomputed plan hash,
 *     else 403 `{ error: 'restore not approved', planHash }` (and a denied-apply event);
 * (3) and (4) phase one (verify everything, write nothing) and phase two (re-verify each record
 *     right before its write) in the background; the reply is 202 with an apply id to poll.
 * (2) to (4) are the restore service's (src/restores/service.ts); this file maps HTTP onto it.
 *
 * Dry runs (open to every role, and each reads every record in scope) run within the engine's
 * concurrency limits (src/restores/read-slots.ts): per engine and per caller, else 429.
 */
import { validateRestoreRequest } from '@coffer/restore';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ApplyIdBody, inReadSlot, RestoreBody, restoreCaller, sendRestoreError } from './shared.ts';

export default async function applyRoutes(app: FastifyInstance): Promise<void> {
  const applyCapability = app.requireCapability('restore.apply');

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
        if (!req.confirm) return await inReadSlot(app, request, reply, () => app.restores.dryRun(req));
        const started = await app.restores.apply(req, restoreCaller(app, request));
        return reply.code(202).send({
          ok: true,
          mode: 'apply',
          applyId: started.applyId,
          status: 'running',
          planHash: started.planHash,
          plannedWrites: started.plannedWrites,
          poll: `/admin/restore/applies?id=${started.applyId}`,
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
      try {
        return await app.restores.applyStatus(request.query.id);
      } catch (e) {
        return sendRestoreError(reply, e);
      }
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
      try {
        return { ok: true, ...(await app.restores.cancel(request.body.applyId)) };
      } catch (e) {
        return sendRestoreError(reply, e);
      }
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
      try {
        const r = await app.restores.resume(request.body.applyId, restoreCaller(app, request));
        return reply.code(202).send({
          ok: true,
          mode: 'apply',
          applyId: r.applyId,
          status: 'running',
          resumed: true,
          alreadyWritten: r.alreadyWritten,
          planHash: r.planHash,
          plannedWrites: r.plannedWrites,
          poll: `/admin/restore/applies?id=${r.applyId}`,
        });
      } catch (e) {
        return sendRestoreError(reply, e);
      }
    },
  );
}
