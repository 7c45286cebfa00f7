/**
 * `GET /admin/status` (presence-only booleans, `ready`, `engineVersion`; never a secret) and
 * `GET /admin/setup-state` (presence and counts; `keysReady`). Both are open to any
 * authenticated caller. `missing` names the configuration variables whose absence keeps runs
 * from sealing (today: ENGINE_BREAK_GLASS_PUBLIC_KEY), so an operator sees what to set.
 */
import type { FastifyInstance } from 'fastify';
import { adminTokenRetired, type RoleMember, roleMembers } from '../../state/index.ts';
import { ENGINE_VERSION, SERVICE_NAME } from '../../version.ts';

export default async function statusRoutes(app: FastifyInstance): Promise<void> {
  const keyPresence = () => {
    const k = app.keys;
    return {
      signer: true,
      operational: true,
      breakGlass: k.breakGlass !== null,
      support: k.support !== null,
    };
  };

  app.get(
    '/status',
    {
      schema: {
        summary: 'Engine status (presence only)',
        operationId: 'getStatus',
        tags: ['admin', 'status'],
      },
    },
    async (request) => {
      const { config, keys, adminToken, state } = app;
      let retired: boolean | null;
      try {
        retired = await adminTokenRetired(state);
      } catch {
        retired = null;
      }
      request.log.debug('status read');
      return {
        service: SERVICE_NAME,
        engineVersion: ENGINE_VERSION,
        ready: keys.ready,
        keysReady: keys.ready,
        missing: keys.missing,
        keys: keyPresence(),
        adminTokenPresent: config.adminToken !== undefined,
        adminTokenDisabled: config.adminTokenDisabled,
        breakGlassTokenRetired: retired,
        tokenPathClosed: !adminToken.configured || retired !== false,
        perimeterAccessConfigured: config.perimeter !== undefined,
        consoleOriginConfigured: config.consoleOrigin !== undefined,
        scimEnabled: config.scimBearerToken !== undefined,
        tlsTerminatedByEngine: config.tls !== undefined,
        database: state.backend,
        restoreRootsConfigured: config.restoreRoots.length > 0,
        destinations: [...app.destinations.keys()],
        demo: config.demo,
        startedAt: app.startedAt.toISOString(),
      };
    },
  );

  app.get(
    '/setup-state',
    {
      schema: {
        summary: 'Set-up progress (presence and counts)',
        operationId: 'getSetupState',
        tags: ['admin', 'status'],
      },
    },
    async (_request, reply) => {
      const { keys, state } = app;
      let jobs: number;
      let members: RoleMember[];
      try {
        jobs = (await state.jobs.list()).length;
        members = await roleMembers(state);
      } catch {
        return reply.code(502).send({ error: 'state unavailable' });
      }
      return {
        keysReady: keys.ready,
        missing: keys.missing,
        keys: keyPresence(),
        fingerprints: {
          signer: keys.signer.fingerprint,
          operational: keys.operational.fingerprint,
          breakGlass: keys.breakGlass?.fingerprint ?? null,
          support: keys.support?.fingerprint ?? null,
        },
        counts: {
          jobs,
          members: members.length,
          owners: members.filter((m) => m.role === 'owner').length,
        },
      };
    },
  );
}
