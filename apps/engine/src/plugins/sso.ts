/**
 * Single sign-on as the named plugin `coffer-sso`: `app.sso` (sso/service.ts), the identity-provider
 * connections and what the OIDC and SAML routes need at sign-in.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { SsoService } from '../sso/service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    sso: SsoService;
  }
}

async function sso(app: FastifyInstance): Promise<void> {
  app.decorate(
    'sso',
    new SsoService({
      state: app.state,
      operationalSecretKey: app.keys.operational.secretKey,
      consoleOrigin: app.config.consoleOrigin,
    }),
  );
}

export default fp(sso, { name: 'coffer-sso', fastify: '5.x', dependencies: ['coffer-core'] });
