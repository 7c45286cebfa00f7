/**
 * The restore service as the named plugin `coffer-restores`: creates `RestoreService`
 * (src/restores/) from the engine's state, keys, destinations and audit log, decorates
 * `app.restores`, starts the sweep for interrupted applies when the server is ready, and stops
 * live applies (left resumable) before the state store closes.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { RestoreService } from '../restores/index.ts';

declare module 'fastify' {
  interface FastifyInstance {
    restores: RestoreService;
  }
}

export interface RestoresPluginOptions {
  /** Planning and approval clock (tests age a plan or an approval with it). */
  now?: () => Date;
}

async function restoresPlugin(app: FastifyInstance, options: RestoresPluginOptions): Promise<void> {
  // Restores read whole runs too: once the last of them (and of the runs) ended, the engine hands
  // the memory back (src/runs/idle-memory.ts).
  const idle = app.runs.idleMemory;
  const restores: RestoreService = new RestoreService({
    state: app.state,
    keys: app.keys,
    config: app.config,
    destinations: app.destinations,
    audit: app.audit,
    log: app.log,
    holder: app.runs.holder,
    events: app.events,
    onSettled: () => idle.settled(),
    bases: app.runs.baseCache,
    ...(options.now ? { now: options.now } : {}),
  });
  idle.addActivity(() => restores.applies.active > 0 || restores.reads.active > 0);
  app.decorate('restores', restores);
  app.addHook('onReady', async () => restores.start());
  app.addHook('preClose', async () => restores.stop());
}

export default fp(restoresPlugin, {
  name: 'coffer-restores',
  fastify: '5.x',
  dependencies: ['coffer-core', 'coffer-runs', 'coffer-audit'],
});
