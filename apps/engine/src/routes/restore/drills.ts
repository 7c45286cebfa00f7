/**
 * Drills (restore a run into a scratch target and compare), their evidence, the attended session
 * status, and the recovery-time estimate. One drill at a time across processes: the drill service
 * (src/drills/scheduler.ts) holds the lease and records the evidence.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { RECLAIM_REFUSAL } from '../../runs/reclaim-marker.ts';
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
        case 'reclaiming':
          return reply.code(409).send({ error: RECLAIM_REFUSAL });
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
    async () => {
      const [summary, due] = await Promise.all([app.drills.summary(), app.drills.due()]);
      const drilled = summary.jobs.filter((j) => j.lastDrill !== null);
      return {
        ...summary,
        // Jobs whose restore-test cadence has passed since their last drill (most overdue first).
        due,
        counts: {
          jobs: summary.jobs.length,
          drilled: drilled.length,
          neverDrilled: summary.jobs.length - drilled.length,
          passing: drilled.filter((j) => j.lastDrill?.verdict === 'pass').length,
          failing: drilled.filter((j) => j.lastDrill?.verdict !== 'pass').length,
          due: due.length,
        },
      };
    },
  );

  app.get<{ Querystring: { id?: string; job?: string; verdict?: string; limit?: string } }>(
    '/drill-evidence',
    {
      schema: {
        summary: 'Recorded drill evidence (?id= one, ?job= one job, ?verdict=, ?limit=), newest first',
        operationId: 'drillEvidence',
        tags: ['admin', 'restore'],
        querystring: Type.Object({
          id: Type.Optional(Type.String({ maxLength: 64 })),
          job: Type.Optional(Type.String({ maxLength: 128 })),
          verdict: Type.Optional(
            Type.Union([Type.Literal('pass'), Type.Literal('fail'), Type.Literal('error')]),
          ),
          limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$' })),
        }),
      },
    },
    async (request, reply) => {
      const all = await app.drills.evidence();
      const q = request.query;
      if (q.id !== undefined) {
        const one = all.find((e) => e.id === q.id);
        return one ?? reply.code(404).send({ error: 'drill evidence not found' });
      }
      const matching = all.filter(
        (e) =>
          (q.job === undefined || e.job === q.job) && (q.verdict === undefined || e.verdict === q.verdict),
      );
      // Lenient clamp to 1..1000 (default 100), as the feed's limit.
      const limit = Math.min(1000, Math.max(1, q.limit === undefined ? 100 : Number(q.limit)));
      const evidence = matching.slice(0, limit);
      return { evidence, count: evidence.length, total: matching.length, truncated: matching.length > limit };
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
