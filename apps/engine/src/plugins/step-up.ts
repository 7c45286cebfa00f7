/**
 * Step-up re-authentication (specification "Step-up re-authentication"; docs/identity.md
 * "Step-up"), as the named plugin `coffer-step-up`. `app.requireStepUp` is an onRequest hook for
 * high-consequence writes, placed after the route's capability or owner check:
 * - the bare admin token is exempt;
 * - a perimeter caller passes only while its access sign-in is under five minutes old, else 401
 *   `{ error: 'step-up required', stepUpRequired: true, reauth: 'access' }`;
 * - a cookie session passes with a single-use step-up token in `x-engine-stepup` (minted by
 *   `POST /admin/stepup/finish` for this session, used up here), or while its last proof of
 *   presence (sign-in or step-up) is under five minutes old; else 401 `{ error: 'step-up required',
 *   stepUpRequired: true }`.
 * The check fails closed: a store that cannot be read answers the same 401.
 */
import { checkOneTimeToken, oneTimeTokenId } from '@coffer/identity';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { GateHook } from './capability.ts';
import { sendUnauthorised } from './replies.ts';

/** Seconds a sign-in or step-up counts as recent. */
export const STEP_UP_WINDOW_SECONDS = 300;
export const STEP_UP_HEADER = 'x-engine-stepup';

declare module 'fastify' {
  interface FastifyInstance {
    requireStepUp: GateHook;
  }
}

async function stepUp(app: FastifyInstance): Promise<void> {
  app.decorate('requireStepUp', async (request, reply) => {
    const caller = request.caller;
    if (!caller) {
      sendUnauthorised(reply);
      return;
    }
    if (caller.method === 'admin-token') return;
    const now = Math.floor(Date.now() / 1000);
    if (caller.method === 'perimeter-access') {
      if (caller.authenticatedAt !== null && now - caller.authenticatedAt <= STEP_UP_WINDOW_SECONDS) return;
      reply.code(401).send({ error: 'step-up required', stepUpRequired: true, reauth: 'access' });
      return;
    }
    const session = caller.session;
    const header = request.headers[STEP_UP_HEADER];
    if (session !== undefined) {
      if (typeof header === 'string') {
        try {
          const id = oneTimeTokenId(header, 'step-up');
          // Taken only when bound to this session: another session's attempt leaves it in place.
          const record =
            id === null
              ? null
              : await app.state.identity.takeToken(id, { purpose: 'step-up', boundTo: session.sid });
          checkOneTimeToken(
            header,
            record === null ? null : { ...record, purpose: record.purpose as 'step-up' },
            { purpose: 'step-up', boundTo: session.sid },
          );
          return;
        } catch {
          // A wrong, used or expired token, or an unreadable store: fall through to the refusal.
        }
      } else if (caller.authenticatedAt !== null && now - caller.authenticatedAt <= STEP_UP_WINDOW_SECONDS)
        return;
    }
    request.log.info({ gate: 'step-up' }, 'step-up required');
    reply.code(401).send({ error: 'step-up required', stepUpRequired: true });
  });
}

export default fp(stepUp, {
  name: 'coffer-step-up',
  fastify: '5.x',
  dependencies: ['coffer-auth', 'coffer-replies'],
});
