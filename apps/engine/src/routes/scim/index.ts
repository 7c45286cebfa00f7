/**
 * The `/scim/v2/*` family: the deprovision-only SCIM facade (base hardening set, no CORS). Its
 * deprovisioning routes come with the identity issue; until then the family only enforces its
 * gate: without SCIM_BEARER_TOKEN every path answers 503 `scim not enabled` (fail closed); with
 * it, the bearer is checked in constant time (401 `unauthorised`) and no route exists yet (404).
 */
import type { FastifyInstance } from 'fastify';
import { bearerOf, createAdminTokenChecker } from '../../auth/admin-token.ts';
import { sendNotFound, sendUnauthorised } from '../../plugins/replies.ts';

export default async function scimFamily(app: FastifyInstance): Promise<void> {
  const token = app.config.scimBearerToken;
  // Same constant-time digest comparison as the admin token, with its own secret.
  const checker = createAdminTokenChecker(token, false);
  app.all('/scim/v2/*', { schema: { hide: true } }, async (request, reply) => {
    if (!checker.configured)
      return reply.code(503).type('text/plain; charset=utf-8').send('scim not enabled');
    const presented = bearerOf(request.headers.authorization);
    if (typeof presented !== 'string' || !checker.matches(presented)) return sendUnauthorised(reply);
    return sendNotFound(reply);
  });
}
