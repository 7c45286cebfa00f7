/**
 * The test-only routes under `/admin/test-fault/` (specification "SCIM facade and test-only
 * routes"): `POST arm`, `POST disarm`, `POST control-plane-clear` (wipes jobs, runs, roles,
 * notifications and policies through control-plane/apply.ts; never keys, archives or the audit
 * chain), `POST canary-tick` (flies the integrity canary, its
 * verdict listeners included, then runs the reconciliation tick), `POST retention-tick`,
 * `GET status`.
 * Registered ONLY when HARNESS_TEST_FAULTS is set (otherwise the admin family's not-found handler
 * answers the whole prefix with a plain 404 before authentication), and owner-only: the caller is
 * authenticated like any admin caller, then anyone but an owner gets 403 with `required: 'owner'`.
 * With them, black-box tests inject destination faults (throttle N times, access denied, reject
 * with a store code, ...) and source faults into the real engine's run machinery.
 */
import { isOwner } from '@coffer/authz';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { clearControlPlane } from '../../control-plane/index.ts';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden, sendUnauthorised } from '../../plugins/replies.ts';
import {
  DESTINATION_FAULTS,
  DESTINATION_OPS,
  type FaultSpec,
  SOURCE_FAULTS,
  SOURCE_OPS,
} from '../../runs/faults.ts';
import { TICK_SETTING } from '../../runs/service.ts';

const ArmBody = Type.Object(
  {
    target: Type.Union([Type.Literal('destination'), Type.Literal('source')]),
    destination: Type.Optional(Type.String({ maxLength: 64 })),
    job: Type.Optional(Type.String({ maxLength: 64 })),
    fault: Type.Union([...new Set([...DESTINATION_FAULTS, ...SOURCE_FAULTS])].map((f) => Type.Literal(f))),
    code: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$' })),
    times: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    after: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
    op: Type.Optional(
      Type.Union([...new Set([...DESTINATION_OPS, ...SOURCE_OPS])].map((o) => Type.Literal(o))),
    ),
  },
  { additionalProperties: false },
);
const DisarmBody = Type.Object(
  { id: Type.Optional(Type.String({ maxLength: 32 })) },
  { additionalProperties: false },
);
const TickBody = Type.Object({ wait: Type.Optional(Type.Boolean()) }, { additionalProperties: false });

export default async function testFaultRoutes(app: FastifyInstance): Promise<void> {
  const faults = app.runs.faults;
  if (!faults) return;
  app.addHook('onRequest', app.authenticate);
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (reply.sent) return;
    const caller = request.caller;
    if (!caller) return void sendUnauthorised(reply);
    if (!isOwner(caller.authz)) return void sendForbidden(reply, 'owner', roleName(caller.role));
  });
  const tags = ['admin', 'test-fault'];

  app.post<{ Body: FaultSpec }>(
    '/arm',
    {
      schema: {
        summary: 'Arm a destination or source fault (test only)',
        operationId: 'testFaultArm',
        tags,
        body: ArmBody,
      },
    },
    async (request, reply) => {
      try {
        return { ok: true, fault: faults.arm(request.body) };
      } catch {
        return reply.code(400).send({ error: 'unknown fault or operation for this target' });
      }
    },
  );

  app.post<{ Body: { id?: string } }>(
    '/disarm',
    {
      schema: {
        summary: 'Disarm one fault or all (test only)',
        operationId: 'testFaultDisarm',
        tags,
        body: DisarmBody,
      },
    },
    async (request) => ({ ok: true, disarmed: faults.disarm(request.body?.id) }),
  );

  app.post<{ Body: { wait?: boolean } }>(
    '/canary-tick',
    {
      schema: {
        summary: 'Fly the canary and run the reconciliation tick now (test only)',
        operationId: 'testFaultCanaryTick',
        tags,
        body: Type.Optional(TickBody),
      },
    },
    async (request) => {
      // The canary first (its verdict listeners included), so destination faults armed for it
      // meet its flights before any run the tick dispatches.
      const canary = await app.canary.fly('tick');
      const tick = await app.runs.tick('canary-tick');
      if (request.body?.wait) await app.runs.idle();
      return { ok: true, tick, canary };
    },
  );

  app.post<{ Body: { wait?: boolean } }>(
    '/retention-tick',
    {
      schema: {
        summary: 'Apply retention now (test only)',
        operationId: 'testFaultRetentionTick',
        tags,
        body: Type.Optional(TickBody),
      },
    },
    async () => {
      const standDowns: string[] = [];
      const pruned = await app.runs.pruneAll(standDowns);
      return { ok: true, pruned, standDowns };
    },
  );

  app.post(
    '/control-plane-clear',
    {
      schema: {
        summary: 'Wipe the control plane, never keys, archives or the audit chain (test only)',
        operationId: 'testFaultControlPlaneClear',
        tags,
      },
    },
    async (request) => {
      await app.runs.idle();
      const cleared = await clearControlPlane(app.state);
      await app.audit.forRequest(request, {
        action: 'control-plane-clear',
        outcome: 'applied',
        target: null,
        detail: { jobs: cleared.jobs, members: cleared.members },
      });
      return { ok: true, cleared };
    },
  );

  app.get(
    '/status',
    {
      schema: {
        summary: 'Armed faults and scheduler state (test only)',
        operationId: 'testFaultStatus',
        tags,
      },
    },
    async () => ({
      faults: faults.list(),
      lastTick: (await app.state.settings.get(TICK_SETTING)) ?? null,
      holder: app.runs.holder,
    }),
  );
}
