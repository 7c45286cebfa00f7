/**
 * Posture reads (docs/posture.md): `GET /admin/preflight` (any authenticated caller: live probes,
 * each item verified, configured, unconfigured or failed with evidence and remediation) and
 * `GET /admin/licence` (any authenticated caller: the signed licence's status and the effective
 * tier; a report, never a gate).
 *
 * The preflight writes to every destination and reaches the mail server, the identity providers
 * and the update channel, so concurrent requests share one run (a caller cannot multiply the
 * engine's outbound probes), and each caller is rate-limited like a mutation.
 */
import type { FastifyInstance } from 'fastify';
import { checkLicence, type PreflightIdp, type PreflightReport, runPreflight } from '../../posture/index.ts';

export default async function postureRoutes(app: FastifyInstance): Promise<void> {
  let running: Promise<PreflightReport> | null = null;
  const preflight = (): Promise<PreflightReport> => {
    running ??= runPreflight({
      config: app.config,
      keys: app.keys,
      state: app.state,
      destinations: app.destinations,
      startedAt: app.startedAt,
      identityProviders: async () =>
        (await app.sso.list()).map(
          (c): PreflightIdp => ({
            id: c.id,
            kind: c.kind,
            enabled: c.enabled,
            source:
              c.kind === 'oidc' ? 'discovery' : c.saml?.idpMetadataUrl ? 'metadata-url' : 'pasted-metadata',
            test: () => app.sso.test(c),
          }),
        ),
      updateChannel: async () => {
        const v = await app.updates.check();
        return {
          verified: v.verified,
          ...(v.code !== undefined ? { code: v.code } : {}),
          ...(v.channel !== undefined ? { sequence: v.channel.sequence } : {}),
        };
      },
    }).finally(() => {
      running = null;
    });
    return running;
  };

  app.get(
    '/preflight',
    {
      onRequest: [app.rateLimitCaller],
      schema: {
        summary:
          'Live probes: destinations, keys, clock, state store, scheduler, mail, identity providers, updates, canary',
        operationId: 'getPreflight',
        tags: ['admin', 'status'],
      },
    },
    async (request) => {
      const report = await preflight();
      request.log.info(
        { event: 'preflight', failed: report.summary.failed, verified: report.summary.verified },
        'preflight run',
      );
      return report;
    },
  );

  app.get(
    '/licence',
    {
      schema: {
        summary: 'The signed licence: status and effective tier (never gates a backup or a restore)',
        operationId: 'getLicence',
        tags: ['admin', 'status'],
      },
    },
    async () => checkLicence(app.config.licence),
  );
}
