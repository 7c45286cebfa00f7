/**
 * The run service as the named plugin `coffer-runs`: creates it (src/runs/) from the core facts,
 * decorates `app.runs`, and stops it before the state store closes, so in-flight runs checkpoint.
 * start.ts starts its timers once the server listens.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  createRunService,
  FaultRegistry,
  openJobSource,
  type RunService,
  type RunServiceOptions,
} from '../runs/index.ts';

declare module 'fastify' {
  interface FastifyInstance {
    runs: RunService;
  }
}

/** Run service overrides (tests: poll interval, executor tuning); never read from the environment. */
export type RunsPluginOptions = Partial<
  Omit<RunServiceOptions, 'state' | 'keys' | 'destinations' | 'log' | 'events'>
>;

async function runsPlugin(app: FastifyInstance, options: RunsPluginOptions): Promise<void> {
  const { config } = app;
  const runs = createRunService({
    state: app.state,
    keys: app.keys,
    destinations: app.destinations,
    log: app.log,
    dataDir: config.dataDir,
    tickSeconds: config.tickSeconds,
    leaseSeconds: config.runLeaseSeconds,
    baseCacheMiB: config.incrementalBaseCacheMiB,
    faults: config.harnessTestFaults ? new FaultRegistry() : null,
    // Redis and s3 sources open only through the connections of ENGINE_CONNECTIONS_FILE.
    openSource: (job) => openJobSource(job.source, job.id, config.connections),
    ...options,
    // Run outcomes and staleness raise into the engine's event bus (src/events.ts).
    events: app.events,
  });
  app.decorate('runs', runs);
  app.addHook('preClose', async () => runs.stop());
}

export default fp(runsPlugin, { name: 'coffer-runs', fastify: '5.x', dependencies: ['coffer-core'] });
