/**
 * The capability gate (specification "Capability gate"), as the named plugin `coffer-capability`.
 * `app.requireCapability(cap)` returns a hook that answers 403 `{ error: 'forbidden', required,
 * have }` unless the authenticated caller's role holds `cap`. Decisions come from @coffer/authz
 * (pure functions); the gate never widens a refusal into anything but 403.
 */
import { type Capability, can, forbiddenBody } from '@coffer/authz';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { sendUnauthorised } from './replies.ts';

export type GateHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

declare module 'fastify' {
  interface FastifyInstance {
    requireCapability: (capability: Capability) => GateHook;
  }
  interface FastifyContextConfig {
    /** The capability a route gates on (recorded for the route snapshot and the tests). */
    capability?: Capability;
  }
}

async function capability(app: FastifyInstance): Promise<void> {
  app.decorate('requireCapability', (cap: Capability): GateHook => {
    return async (request, reply) => {
      const caller = request.caller;
      if (!caller) {
        sendUnauthorised(reply);
        return;
      }
      if (!can(caller.authz, cap)) {
        request.log.info({ gate: 'refused', required: cap }, 'capability refused');
        reply.code(403).send(forbiddenBody(cap, caller.authz));
      }
    };
  });
}

export default fp(capability, {
  name: 'coffer-capability',
  fastify: '5.x',
  dependencies: ['coffer-auth', 'coffer-replies'],
});
