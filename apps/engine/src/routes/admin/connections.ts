/**
 * `GET /admin/connections` (`job.read`): the named connections of ENGINE_CONNECTIONS_FILE that a job
 * may reference, so a job writer can pick one. Read-only: connections are changed only in the
 * deployment's file (docs/configuration.md "Connections file").
 *
 * Security-relevant behaviour: a row holds the id, type, host (redis `host:port`, s3 endpoint host
 * or `aws`), buckets and the restore flag; never a credential, a credential variable name or a
 * URL's path or query.
 */
import type { FastifyInstance } from 'fastify';
import type { Connection } from '../../connections/config.ts';

function hostOf(c: Connection): string {
  try {
    if (c.type === 'redis') {
      const u = new URL(c.url);
      return `${u.hostname}:${u.port || '6379'}`;
    }
    return c.endpoint === undefined ? 'aws' : new URL(c.endpoint).host;
  } catch {
    return 'unknown';
  }
}

export default async function connectionsRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/connections',
    {
      onRequest: [app.requireCapability('job.read')],
      config: { capability: 'job.read' },
      schema: {
        summary: 'Named redis/s3 connections jobs may reference (read-only; never secrets)',
        operationId: 'listConnections',
        tags: ['admin', 'jobs'],
      },
    },
    async () => {
      const { connections, scratch } = app.config.connections;
      return {
        connections: [...connections.values()].map((c) => ({
          id: c.id,
          type: c.type,
          host: hostOf(c),
          ...(c.type === 's3' && c.buckets ? { buckets: c.buckets } : {}),
          restore: c.restore,
        })),
        scratch: { redis: scratch.redis?.connection ?? null, s3: scratch.s3?.connection ?? null },
      };
    },
  );
}
