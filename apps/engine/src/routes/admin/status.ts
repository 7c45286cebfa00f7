/**
 * `GET /admin/status` (presence-only booleans, `ready`, `engineVersion`; never a secret) and
 * `GET /admin/setup-state` (presence and counts; `keysReady`). Both are open to any
 * authenticated caller. `missing` names the configuration variables whose absence keeps runs
 * from sealing (today: ENGINE_BREAK_GLASS_PUBLIC_KEY), so an operator sees what to set.
 * docs/posture.md lists every field. Presence only: a secret's value, a URL, a path or an address
 * never appears (tokens, SMTP credentials and connection secrets are reported as booleans).
 * A fact whose read fails is null rather than failing the whole status.
 */
import type { FastifyInstance } from 'fastify';
import { LAST_SET_SETTING } from '../../canary/history.ts';
import { acknowledgementCurrent, checkLicence, readAcknowledgement } from '../../posture/index.ts';
import { TICK_SETTING } from '../../runs/scheduler.ts';
import { adminTokenRetired, type RoleMember, roleMembers } from '../../state/index.ts';
import { ENGINE_VERSION, SERVICE_NAME } from '../../version.ts';

/** The value of `read()`, or null when it throws (one unreadable fact does not hide the rest). */
async function orNull<T>(read: () => Promise<T>): Promise<T | null> {
  try {
    return await read();
  } catch {
    return null;
  }
}

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

  /** Identity-provider connections: counts only. */
  const idps = () =>
    orNull(async () => {
      const all = await app.sso.list();
      return {
        connections: all.length,
        enabled: all.filter((c) => c.enabled).length,
        oidc: all.filter((c) => c.kind === 'oidc').length,
        saml: all.filter((c) => c.kind === 'saml').length,
      };
    });
  const acknowledgement = () =>
    orNull(async () => {
      const ack = await readAcknowledgement(app.state);
      return ack === null ? null : { at: ack.at, current: acknowledgementCurrent(ack, app.keys) };
    });

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
      const [tick, canary, licence, idp, ack, jobs] = await Promise.all([
        orNull(() => state.settings.get<{ at?: string }>(TICK_SETTING)),
        orNull(() => state.settings.get<{ verdict?: string; finishedAt?: string }>(LAST_SET_SETTING)),
        checkLicence(config.licence),
        idps(),
        acknowledgement(),
        orNull(async () => (await state.jobs.list()).length),
      ]);
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
        breakGlassKeySet: keys.breakGlass !== null,
        supportKeySet: keys.support !== null,
        setupAcknowledged: ack !== null,
        setupAcknowledgementCurrent: ack?.current ?? null,
        smtpConfigured: config.mail !== undefined,
        smtpCredentialsPresent: config.mail?.username !== undefined && config.mail?.password !== undefined,
        firstOwnerEmailConfigured: config.firstOwnerEmail !== undefined,
        updateChannelConfigured: config.update !== undefined,
        identityProviders: idp,
        licence: { tier: licence.tier, status: licence.status, expiresAt: licence.expiresAt },
        canary: {
          intervalSeconds: config.canaryIntervalSeconds,
          verdict: canary?.verdict ?? null,
          lastFlightAt: canary?.finishedAt ?? null,
        },
        scheduler: {
          tickSeconds: config.tickSeconds,
          lastTick: typeof tick?.at === 'string' ? tick.at : null,
        },
        counts: { jobs, destinations: app.destinations.size, restoreRoots: config.restoreRoots.length },
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
      const { config, keys, state } = app;
      let jobs: number;
      let members: RoleMember[];
      try {
        jobs = (await state.jobs.list()).length;
        members = await roleMembers(state);
      } catch {
        return reply.code(502).send({ error: 'state unavailable' });
      }
      const [idp, ack, channels, licence] = await Promise.all([
        idps(),
        acknowledgement(),
        orNull(async () => (await state.notifications.listChannels()).length),
        checkLicence(config.licence),
      ]);
      return {
        keysReady: keys.ready,
        missing: keys.missing,
        keys: keyPresence(),
        acknowledged: ack !== null,
        acknowledgement: ack,
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
          destinations: app.destinations.size,
          restoreRoots: config.restoreRoots.length,
          identityProviders: idp?.connections ?? null,
          notifyChannels: channels,
        },
        configured: {
          consoleOrigin: config.consoleOrigin !== undefined,
          perimeterAccess: config.perimeter !== undefined,
          smtp: config.mail !== undefined,
          firstOwnerEmail: config.firstOwnerEmail !== undefined,
          updateChannel: config.update !== undefined,
          restoreRoots: config.restoreRoots.length > 0,
          extraDestinations: config.destinations.length > 0,
          licence: config.licence.file !== undefined,
        },
        licence: { tier: licence.tier, status: licence.status },
      };
    },
  );
}
