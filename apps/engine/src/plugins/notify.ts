/**
 * Notifications as the named plugin `coffer-notify`: `app.notify` (notify/service.ts), subscribed
 * to `app.events` once the engine is ready (digests that fell due while it was down are sent then),
 * stopped before the state store closes (sends in flight are awaited).
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { NotifyService, type NotifyServiceOptions } from '../notify/service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    notify: NotifyService;
  }
}

export type NotifyPluginOptions = Pick<NotifyServiceOptions, 'timeoutMs' | 'backoffMs'>;

async function notify(app: FastifyInstance, options: NotifyPluginOptions): Promise<void> {
  const service = new NotifyService({
    state: app.state,
    config: app.config,
    operationalSecretKey: app.keys.operational.secretKey,
    log: app.log,
    ...options,
  });
  app.decorate('notify', service);
  app.addHook('onReady', async () => service.start(app.events));
  app.addHook('preClose', async () => service.stop());
}

export default fp(notify, { name: 'coffer-notify', fastify: '5.x', dependencies: ['coffer-core'] });
