/**
 * What the restore route groups share: the body schemas, the mapping of a service refusal onto
 * the reply, the caller as the restore service needs it, and the 429 of a read over its limits.
 */
import { can } from '@coffer/authz';
import { isRestoreError } from '@coffer/restore';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { callerKey } from '../../plugins/rate-limit.ts';
import { sendRateLimited } from '../../plugins/replies.ts';
import { isRestoreRefusal, READS_POLICY, type RestoreCaller } from '../../restores/index.ts';

export const PlanHashBody = Type.Object(
  {
    planHash: Type.String({ pattern: '^sha384:[0-9a-f]{96}$' }),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
export const ApplyIdBody = Type.Object(
  { applyId: Type.String({ pattern: '^rap_[0-9a-f]{24}$' }) },
  { additionalProperties: false },
);
export const PolicyBody = Type.Object(
  { enabled: Type.Boolean(), minDelaySeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400 })) },
  { additionalProperties: false },
);
export const DrillBody = Type.Object(
  {
    job: Type.String({ minLength: 1, maxLength: 128 }),
    runId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);
/** The RestoreRequest body is checked in code (exact 400 messages); the schema documents it only. */
export const RestoreBody = Type.Unknown({ description: 'RestoreRequest (docs/restore.md)' });

/** Maps a RestoreError or a RestoreRefusal onto the reply; anything else is the error handler's. */
export function sendRestoreError(reply: FastifyReply, e: unknown): FastifyReply {
  if (isRestoreRefusal(e)) return reply.code(e.status).send(e.body);
  if (!isRestoreError(e)) throw e;
  if (e.retryAfterSeconds !== undefined) reply.header('retry-after', String(e.retryAfterSeconds));
  return reply.code(e.status).send(e.toJSON());
}

/** The request's caller as the restore service needs it. */
export function restoreCaller(app: FastifyInstance, request: FastifyRequest): RestoreCaller {
  return {
    actor: app.audit.actorOf(request),
    person: { subject: request.caller?.subject ?? null, email: request.caller?.email ?? null },
    record: (event) => app.audit.forRequest(request, event),
    mayApprove: request.caller ? can(request.caller.authz, 'restore.approve') : false,
  };
}

/**
 * Runs a dry run or a verify in one of the caller's read slots, or answers the specification's
 * 429 (problem+json `rate limited`, `Retry-After`, the advisory RateLimit headers with the
 * per-caller quota: what a caller can do about it).
 */
export async function inReadSlot<T>(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  work: () => Promise<T>,
): Promise<T | FastifyReply> {
  const slot = await app.restores.reads.run(callerKey(request), work);
  if (!slot.busy) return slot.value;
  reply.header('retry-after', '1');
  reply.header('ratelimit-policy', `"${READS_POLICY}";q=${app.restores.reads.perCaller}`);
  reply.header('ratelimit', `"${READS_POLICY}";r=0;t=1`);
  return sendRateLimited(reply);
}
