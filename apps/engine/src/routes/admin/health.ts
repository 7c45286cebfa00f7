/**
 * `GET /admin/health`, answered before authentication (specification "Global conventions" 4):
 * `{ ok: true, service }`, reading no request state, with a wildcard allow-origin and no
 * credentials header, so a browser can tell a dead engine from a CORS misconfiguration.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { SERVICE_NAME } from '../../version.ts';

export default async function healthRoute(app: FastifyInstance): Promise<void> {
  app.get(
    '/health',
    {
      config: { cors: false },
      schema: {
        summary: 'Liveness for browsers (before authentication)',
        operationId: 'getAdminHealth',
        tags: ['admin', 'pre-auth'],
        response: { 200: Type.Object({ ok: Type.Literal(true), service: Type.String() }) },
      },
    },
    async (_request, reply) => {
      reply.header('access-control-allow-origin', '*');
      reply.removeHeader('access-control-allow-credentials');
      return { ok: true as const, service: SERVICE_NAME };
    },
  );
}
