/**
 * Access policy (specification "Status, setup, support and policy", "Break-glass token and first
 * owner"; docs/identity.md "Retiring the bearer"):
 * - `POST /admin/policy/require-access` (`access.policy`): an echo that writes nothing and is not
 *   rate-limited: `{ ok, adminTokenPresent, breakGlassTokenRetired (null when the latch is
 *   unreadable), tokenPathClosed }`.
 * - `POST /admin/policy/retire-break-glass-token` (`keys.ceremony`, step-up): retires the admin
 *   token for good (a durable latch, honoured from the next request, token sessions included),
 *   only while a way back in exists: an owner with confirmed recovery codes, or a second owner.
 *   Otherwise 409 naming what is missing. Audited as `admin-token-retire`; raises
 *   `admin-token-retired` (src/events.ts) once applied (under owner-action dual control: when the
 *   second owner approves, owner-actions.ts).
 */
import type { FastifyInstance } from 'fastify';
import { sendStateUnavailable } from '../../plugins/replies.ts';
import { adminTokenRetired, retireAdminToken } from '../../state/index.ts';
import { queuedIfArmed } from './owner-actions.ts';

export default async function policyRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });

  app.post(
    '/policy/require-access',
    {
      onRequest: app.requireCapability('access.policy'),
      config: { capability: 'access.policy' },
      ...meta('Report the admin token path (writes nothing)', 'postPolicyRequireAccess'),
    },
    async () => {
      let retired: boolean | null;
      try {
        retired = await adminTokenRetired(app.state);
      } catch {
        retired = null;
      }
      const present = app.adminToken.configured;
      return {
        ok: true,
        adminTokenPresent: present,
        breakGlassTokenRetired: retired,
        // Closed when no token is configured, when it was retired, or when that is unknown (fail closed).
        tokenPathClosed: !present || retired !== false,
      };
    },
  );

  app.post(
    '/policy/retire-break-glass-token',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller],
      config: { capability: 'keys.ceremony' },
      ...meta(
        'Retire the admin token for good (a way back in must exist)',
        'postPolicyRetireBreakGlassToken',
      ),
    },
    async (request, reply) => {
      try {
        if (await adminTokenRetired(app.state)) return { ok: true, retired: true, already: true };
        const owners = (await app.state.roles.list()).filter((m) => m.role === 'owner');
        let withCodes = 0;
        for (const o of owners)
          if ((await app.state.identity.recoveryCodes(o.subject)).length > 0) withCodes++;
        if (owners.length < 2 && withCodes === 0)
          return reply.code(409).send({
            error: "no way back in: confirm an owner's recovery codes or add a second owner first",
            owners: owners.length,
            ownersWithRecoveryCodes: withCodes,
          });
        if (await queuedIfArmed(app, request, reply, 'admin-token-retire', {})) return reply;
        await retireAdminToken(app.state, request.caller!.subject);
        await app.audit.forRequest(request, {
          action: 'admin-token-retire',
          outcome: 'applied',
          target: 'admin-token',
          detail: { owners: owners.length, ownersWithRecoveryCodes: withCodes },
        });
        app.events.raise({
          name: 'admin-token-retired',
          jobId: null,
          detail: { by: request.caller!.subject ?? 'admin-token', viaOwnerAction: false },
        });
        return { ok: true, retired: true, already: false };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}
