/**
 * The update lifecycle as the named plugin `coffer-updates`: `app.updates` (updates/service.ts)
 * over the state store's `update_state` table. Decoding the pinned channel signer key happens here
 * at build time, so a bad ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE stops the start with a ConfigError.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { UpdateService, type UpdateServiceOptions } from '../updates/service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    updates: UpdateService;
  }
}

/** Test-only overrides (never read from the environment). */
export type UpdatesPluginOptions = Pick<UpdateServiceOptions, 'engineVersion' | 'now'>;

async function updates(app: FastifyInstance, options: UpdatesPluginOptions): Promise<void> {
  app.decorate(
    'updates',
    new UpdateService({ state: app.state, config: app.config, log: app.log, ...options }),
  );
}

export default fp(updates, { name: 'coffer-updates', fastify: '5.x', dependencies: ['coffer-core'] });
