/**
 * `GET /admin/canary` (specification "Status, setup, support and policy": any authenticated
 * caller): the canary's interval, the verdict of its latest flight set and when it finished, and
 * per configured destination its last flight and its recent flights (newest first, at most 24),
 * as the settings store keeps them (so they survive a restart). Reads only; flights are flown by
 * the schedule, the update lifecycle and the test-only `canary-tick`.
 */
import type { FastifyInstance } from 'fastify';
import { CanaryViewSchema } from '../../canary/index.ts';

export default async function canaryRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/canary',
    {
      schema: {
        summary: 'Integrity canary: verdict, interval and recent flights per destination',
        operationId: 'getCanary',
        tags: ['admin', 'canary'],
        response: { 200: CanaryViewSchema },
      },
    },
    async () => app.canary.last(),
  );
}
