/**
 * Drills (restore a run into a scratch target and compare), their evidence, the attended session
 * status, and the recovery-time estimate. One drill at a time across processes: the drill service
 * (src/drills/scheduler.ts) holds the lease and records the evidence.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { DrillBody } from './shared.ts';

export default async function drillRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: { job: string; runId?: string } }>(
    '/drill/run',
    {
      onRequest: [app.requireCapability('drill.run'), app.rateLimitCaller],
      config: { capability: 'drill.run' },
      schema: {
        summary: 'Restore a run into a scratch target and compare (a drill)',
        operationId: 'drillRun',
        tags: ['admin', 'restore'],
        body: DrillBody,
      },
    },
    async (request, reply) => {
      const r = await app.drills.start(request.body.job, {
        ...(request.body.runId === undefined ? {} : { runId: request.body.runId }),
        trigger: 'manual',
        request,
      });
      switch (r.kind) {
        case 'busy':
          return reply
            .code(409)
            .send({ error: 'a drill session is already running', sessionId: r.sessionId });
        case 'not-found':
          return reply.code(404).send({ error: `${r.what} not found` });
        case 'started':
          return reply.code(202).send({
            ok: true,
            sessionId: r.session.sessionId,
            job: r.session.job,
            runId: r.session.runId,
            status: 'running',
          });
        default:
          return reply.code(409).send({ error: 'no operational key: this engine cannot read archives back' });
      }
    },
  );

  app.get(
    '/attest/session/status',
    {
      onRequest: [app.requireCapability('drill.run')],
      config: { capability: 'drill.run' },
      schema: {
        summary: 'The attended drill session: running or idle, and the last result',
        operationId: 'attestSessionStatus',
        tags: ['admin', 'restore'],
      },
    },
    async () => {
      const live = await app.drills.liveSession();
      return {
        active: live !== null,
        ...(live ? { session: live } : {}),
        last: (await app.drills.evidence())[0] ?? null,
      };
    },
  );

  app.get(
    '/drill-all',
    {
      schema: {
        summary: 'Latest drill per job, with its verdict',
        operationId: 'drillAll',
        tags: ['admin', 'restore'],
      },
    },
    async () => app.drills.summary(),
  );

  app.get<{ Querystring: { id?: string; job?: string } }>(
    '/drill-evidence',
    {
      schema: {
        summary: 'Recorded drill evidence (?id= one, ?job= one job), newest first',
        operationId: 'drillEvidence',
        tags: ['admin', 'restore'],
        querystring: Type.Object({
          id: Type.Optional(Type.String({ maxLength: 64 })),
          job: Type.Optional(Type.String({ maxLength: 128 })),
        }),
      },
    },
    async (request, reply) => {
      const all = await app.drills.evidence();
      if (request.query.id !== undefined) {
        const one = all.find((e) => e.id === request.query.id);
        return one ?? reply.code(404).send({ error: 'drill evidence not found' });
      }
      return {
        evidence: request.query.job === undefined ? all : all.filter((e) => e.job === request.query.job),
      };
    },
  );

  app.get(
    '/rto',
    {
      onRequest: [app.requireCapability('reports.read')],
      config: { capability: 'reports.read' },
      schema: {
        summary: 'Recovery-time estimate per job and fleet, from drill history',
        operationId: 'rto',
        tags: ['admin', 'restore'],
      },
    },
    async () => app.drills.rto(),
  );
}
