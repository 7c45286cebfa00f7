/**
 * The unauthenticated root family: `GET /` (the static banner) and `GET /ready` (the readiness
 * probe: `{ status, service, version }`, reading no account state, so a probe never touches the
 * database or a secret). Base hardening set; no CORS.
 */

import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BANNER, ENGINE_VERSION, SERVICE_NAME } from '../../version.ts';

export default async function rootRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/',
    {
      schema: {
        summary: 'Static banner',
        operationId: 'getBanner',
        tags: ['probe'],
        response: { 200: Type.String() },
      },
    },
    async (_request, reply) => reply.type('text/plain; charset=utf-8').send(BANNER),
  );

  app.get(
    '/ready',
    {
      schema: {
        summary: 'Readiness probe (reads no state)',
        operationId: 'getReady',
        tags: ['probe'],
        response: {
          200: Type.Object({ status: Type.Literal('ready'), service: Type.String(), version: Type.String() }),
        },
      },
    },
    async () => ({ status: 'ready' as const, service: SERVICE_NAME, version: ENGINE_VERSION }),
  );
}
