/**
 * `buildApp(options)`: the engine's Fastify instance, kept apart from main.ts so that tests and
 * the route-snapshot script build the same server without starting a process.
 *
 * Request path (ARCHITECTURE.md "Engine request path"): TLS-version check (426) -> hardening
 * headers by family -> CORS (admin family, exact console origin) -> pre-auth routes ->
 * authentication -> capability gate -> per-caller rate limit -> validation -> handler; every
 * failure leaves through the replies plugin's error handler.
 *
 * Security-relevant settings made on purpose:
 * - Ajv: `removeAdditional: false` (Fastify's default silently strips unknown properties; ours
 *   refuse them where a schema says `additionalProperties: false`), `coerceTypes: false` (a JSON
 *   body must carry the right types), `useDefaults: false` (defaults are applied in code where
 *   they are documented);
 * - request ids are generated here (random UUIDs); an inbound request-id header is ignored;
 * - the logger redacts credentials in case a serializer ever includes headers;
 * - with TLS configured the engine accepts TLS 1.0/1.1 handshakes ONLY so that it can answer them
 *   with the specification's plaintext 426 (conventions.ts); no route ever runs over them.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import auditPlugin, { recordStartFacts } from './audit/index.ts';
import { createAdminTokenChecker } from './auth/admin-token.ts';
import { createPerimeterVerifier } from './auth/perimeter.ts';
import type { EngineConfig } from './config.ts';
import { migrateJobs } from './connections/migrate.ts';
import type { DrillSchedulerOptions } from './drills/scheduler.ts';
import { type EngineKeys, loadKeys } from './keys.ts';
import authPlugin from './plugins/auth.ts';
import canaryPlugin, { type CanaryPluginOptions } from './plugins/canary.ts';
import capabilityPlugin from './plugins/capability.ts';
import conventions from './plugins/conventions.ts';
import corePlugin from './plugins/core.ts';
import drillsPlugin from './plugins/drills.ts';
import notifyPlugin, { type NotifyPluginOptions } from './plugins/notify.ts';
import rateLimitPlugin, { type RateLimitOptions } from './plugins/rate-limit.ts';
import replies from './plugins/replies.ts';
import restoresPlugin from './plugins/restores.ts';
import runsPlugin, { type RunsPluginOptions } from './plugins/runs.ts';
import ssoPlugin from './plugins/sso.ts';
import stepUpPlugin from './plugins/step-up.ts';
import updatesPlugin, { type UpdatesPluginOptions } from './plugins/updates.ts';
import adminFamily from './routes/admin/index.ts';
import demoRoutes from './routes/demo/index.ts';
import pullRoutes from './routes/pull/index.ts';
import rootRoutes from './routes/root/index.ts';
import scimFamily from './routes/scim/index.ts';
import testFaultRoutes from './routes/test-fault/index.ts';
import type { State } from './state/index.ts';
import { EngineSessions } from './state/sessions.ts';

export interface BuildAppOptions {
  config: EngineConfig;
  /** An already-open state store; by default one is opened from `config.database`. */
  state?: State;
  /** Keys already loaded; by default loaded (and created on first start) from the config. */
  keys?: EngineKeys;
  /** Fastify logger options, or false for none (default: pino at `config.logLevel` on stdout). */
  logger?: FastifyServerOptions['logger'];
  rateLimit?: RateLimitOptions;
  /** Register @fastify/swagger so `app.swagger()` can produce the route snapshot. */
  openapi?: boolean;
  /**
   * Test-only overrides, never read from the environment: the perimeter key-set URL (so a test
   * can serve keys on loopback) and an extra CA trusted for that fetch.
   */
  testOnly?: { perimeterJwksUrl?: string; perimeterJwksCa?: string };
  /** Run service overrides (tests: poll interval, executor tuning); never read from the environment. */
  runs?: RunsPluginOptions;
  /** Restore drills and their cadence scheduler (tests: a clock, the check interval). */
  drills?: DrillSchedulerOptions;
  /** Restore planning and approvals (tests: a clock, to age a plan or an approval past its life). */
  restore?: { now?: () => Date };
  /** Notification delivery tuning (tests: a short timeout and backoff); never from the environment. */
  notify?: NotifyPluginOptions;
  /** Update lifecycle overrides (tests: the running engine version, a clock); never from the environment. */
  updates?: UpdatesPluginOptions;
  /** Integrity canary overrides (tests: a short timer, the sweep grace); never from the environment. */
  canary?: CanaryPluginOptions;
}

export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["perimeter-access-jwt-assertion"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["perimeter-access-jwt-assertion"]',
];

/** Query parameters that carry a credential in some protocol (OIDC, OAuth, SAML, one-time links). */
const SECRET_QUERY =
  /^(code|state|nonce|id_token|access_token|refresh_token|token|samlresponse|samlrequest|relaystate|session_state)$/i;

/** A URL for the log: the path, and the query with credential-bearing values replaced. */
export function loggableUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) if (SECRET_QUERY.test(key)) params.set(key, '[redacted]');
  return `${url.slice(0, q)}?${params.toString()}`;
}

/**
 * The request as logged: Fastify's default fields, with the URL through loggableUrl (an OIDC
 * callback's `code` and `state` would otherwise reach the log on every sign-in).
 */
function logRequest(request: {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}) {
  return {
    method: request.method,
    url: loggableUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}

function httpsOptions(config: EngineConfig) {
  if (!config.tls) return undefined;
  return {
    cert: readFileSync(config.tls.certFile),
    key: readFileSync(config.tls.keyFile),
    // Let old clients finish the handshake so they can be told 426 (see the module comment);
    // security level 0 because OpenSSL 3 refuses TLS 1.0/1.1 signature algorithms above it.
    minVersion: 'TLSv1' as const,
    ciphers: 'DEFAULT@SECLEVEL=0',
  };
}

/** Builds the engine (not listening). Throws ConfigError / EngineError from key loading. */
export async function buildApp(options: BuildAppOptions): Promise<FastifyInstance> {
  const { config } = options;
  const keys = options.keys ?? loadKeys(config);
  const https = httpsOptions(config);
  const base = options.logger ?? {
    level: config.logLevel,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  const logger =
    typeof base === 'object' && base !== null
      ? { ...base, serializers: { ...(base as { serializers?: object }).serializers, req: logRequest } }
      : base;
  const app = Fastify({
    logger,
    ...(https ? { https } : {}),
    // Only named proxies (the console) may say who the client is; otherwise request.ip is the peer.
    ...(config.trustProxy.length > 0 ? { trustProxy: config.trustProxy } : {}),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    ajv: {
      customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false },
    },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  }) as unknown as FastifyInstance;

  // The core facts (config, keys, state, destinations), then the services, each a named plugin
  // that owns its decoration; their stop hooks run before the state store closes.
  await app.register(corePlugin, { config, keys, ...(options.state ? { state: options.state } : {}) });
  await app.register(runsPlugin, options.runs ?? {});
  await app.register(notifyPlugin, options.notify ?? {});
  await app.register(ssoPlugin);
  await app.register(updatesPlugin, options.updates ?? {});
  for (const warning of keys.warnings) app.log.warn({ keys: 'warning' }, warning);
  if (keys.missing.length > 0) {
    app.log.warn(
      { missing: keys.missing },
      'engine not fully configured: runs will not seal until these are set',
    );
  }

  if (options.openapi) {
    const swagger = (await import('@fastify/swagger')).default;
    await app.register(swagger, {
      openapi: { info: { title: 'Coffer engine', version: '0' } },
    });
  }

  await app.register(conventions);
  await app.register(replies);
  await app.register(authPlugin, {
    perimeter: config.perimeter
      ? createPerimeterVerifier({
          teamDomain: config.perimeter.teamDomain,
          audience: config.perimeter.audience,
          jwksUrl: options.testOnly?.perimeterJwksUrl,
          jwksCa: options.testOnly?.perimeterJwksCa,
        })
      : undefined,
    adminToken: createAdminTokenChecker(config.adminToken, config.adminTokenDisabled),
    state: app.state,
    sessions: new EngineSessions(app.state, config.sessionTtl),
    consoleOrigin: config.consoleOrigin,
  });
  await app.register(capabilityPlugin);
  await app.register(stepUpPlugin);
  await app.register(rateLimitPlugin, { state: app.state, ...options.rateLimit });
  await app.register(auditPlugin, { state: app.state });
  await app.register(drillsPlugin, options.drills ?? {});
  await app.register(restoresPlugin, options.restore?.now ? { now: options.restore.now } : {});
  await app.register(canaryPlugin, options.canary ?? {});
  await recordStartFacts(app.audit, app.state, config, app.log);
  // Before any run can start: stored inline redis/s3 sources to named connections (or flagged).
  await migrateJobs(app.state, config.connections, app.log);
  await app.register(rootRoutes);
  await app.register(pullRoutes);
  if (config.harnessTestFaults) await app.register(testFaultRoutes, { prefix: '/admin/test-fault' });
  if (config.demo) await app.register(demoRoutes, { prefix: '/admin/demo' });
  await app.register(adminFamily, { prefix: '/admin' });
  await app.register(scimFamily);
  return app;
}
