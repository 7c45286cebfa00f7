/**
 * The integrity canary as the named plugin `coffer-canary`: creates `CanaryService` (src/canary/)
 * from the core facts and the run service (the destinations as runs see them, fault-wrapped under
 * HARNESS_TEST_FAULTS, and the run holder id as the instance id), decorates `app.canary`, and
 * stops it before the state store closes. start.ts starts its schedule once the engine listens.
 *
 * `app.canary`: `fly(trigger)`, `selfCheck()`, `onVerdict(listener)`, `last()` (the route's view),
 * `start()`, `stop()`. The update lifecycle (plugins/updates.ts) listens for verdicts.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CanaryService, type CanaryServiceOptions } from '../canary/index.ts';

declare module 'fastify' {
  interface FastifyInstance {
    canary: CanaryService;
  }
}

/** Test-only overrides (a short timer, the sweep grace, a flight timeout); never from the environment. */
export type CanaryPluginOptions = Partial<
  Pick<
    CanaryServiceOptions,
    'intervalMs' | 'sweepGraceMs' | 'flightTimeoutMs' | 'engineVersion' | 'workers' | 'now'
  >
>;

async function canaryPlugin(app: FastifyInstance, options: CanaryPluginOptions): Promise<void> {
  const canary = new CanaryService({
    settings: app.state.settings,
    keys: app.keys,
    destinations: () => app.runs.stores,
    log: app.log,
    audit: app.audit,
    instanceId: app.runs.holder,
    intervalSeconds: app.config.canaryIntervalSeconds,
    ...options,
  });
  app.decorate('canary', canary);
  app.addHook('preClose', async () => canary.stop());
}

export default fp(canaryPlugin, {
  name: 'coffer-canary',
  fastify: '5.x',
  dependencies: ['coffer-core', 'coffer-runs', 'coffer-audit'],
});
