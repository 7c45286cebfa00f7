/**
 * Restore drills as the named plugin `coffer-drills`: creates the drill service
 * (src/drills/scheduler.ts), decorates `app.drills`, sweeps the scratch copies a crashed drill left
 * (in the background once the server is ready, so a slow scratch server does not hold the start;
 * stop() waits for it), and stops it before the state store closes. start.ts starts its cadence.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { type DrillSchedulerOptions, DrillService } from '../drills/scheduler.ts';

declare module 'fastify' {
  interface FastifyInstance {
    drills: DrillService;
  }
}

async function drillsPlugin(app: FastifyInstance, options: DrillSchedulerOptions): Promise<void> {
  const drills = new DrillService(app, { events: app.events, ...options });
  // A drill in flight holds back the engine's idle memory release (src/runs/idle-memory.ts).
  app.runs.idleMemory.addActivity(() => drills.active !== null);
  app.decorate('drills', drills);
  app.addHook('onReady', async () => {
    drills.startSweep();
  });
  app.addHook('preClose', async () => drills.stop());
}

export default fp(drillsPlugin, {
  name: 'coffer-drills',
  fastify: '5.x',
  dependencies: ['coffer-core', 'coffer-runs', 'coffer-audit'],
});
