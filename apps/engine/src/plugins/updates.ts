/**
 * The update lifecycle as the named plugin `coffer-updates`: `app.updates` (updates/service.ts)
 * over the state store's `update_state` table. Decoding the pinned channel signer key happens here
 * at build time, so a bad ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE stops the start with a ConfigError.
 *
 * Wiring: the canary (`app.canary`, when the canary plugin is registered) decides settles; every
 * canary flight set also settles a promoted update that awaits its verdict and lines this replica
 * up with a ramp; once the engine is ready, `resumeAfterStart` picks up a promote that restarted
 * the process. An automatic settle writes an `update-settle` audit row with the engine as actor.
 */
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { ENGINE_ACTOR } from '../audit/index.ts';
import { loadInstanceId } from '../runs/instance-id.ts';
import { type CanaryPort, UpdateService, type UpdateServiceOptions } from '../updates/service.ts';

declare module 'fastify' {
  interface FastifyInstance {
    updates: UpdateService;
  }
}

/** Overrides: tests set the version and clock; main.ts (start.ts) sets the restart hook. */
export type UpdatesPluginOptions = Pick<UpdateServiceOptions, 'engineVersion' | 'now' | 'restart' | 'wait'>;

interface CanaryLike extends CanaryPort {
  onVerdict(listener: (result: { verdict: 'alive' | 'dead' | 'undecided' }) => void | Promise<void>): void;
}

async function updates(app: FastifyInstance, options: UpdatesPluginOptions): Promise<void> {
  const canary = (): CanaryLike | undefined =>
    app.hasDecorator('canary') ? (app as unknown as { canary: CanaryLike }).canary : undefined;
  const port: CanaryPort = {
    fly: async (trigger) => canary()?.fly(trigger) ?? { verdict: 'undecided' },
    selfCheck: async () => (await canary()?.selfCheck()) ?? 'alive',
  };
  const service = new UpdateService({
    state: app.state,
    config: app.config,
    log: app.log,
    canary: port,
    instanceId: loadInstanceId(app.config.dataDir),
    ...options,
  });
  service.onSettled = (verdict, result) => {
    void app.audit
      ?.append({
        action: 'update-settle',
        actor: { ...ENGINE_ACTOR },
        outcome: result.outcome === 'refused' ? 'refused' : 'applied',
        target: result.record?.to.engine ?? null,
        detail: { outcome: result.outcome, verdict, automatic: true },
      })
      .catch(() => undefined);
  };
  app.decorate('updates', service);
  app.addHook('onReady', async () => {
    canary()?.onVerdict(async (r) => {
      await service.settleByCanary(r.verdict);
      await service.reconcileReplica().catch((e: { code?: string }) => {
        app.log.warn({ update: 'ramp-follow', code: e.code }, 'replica could not follow the ramp');
      });
    });
    // After the server listens (start.ts awaits listen after ready): nothing here blocks start.
    setImmediate(() => {
      void service.resumeAfterStart();
    });
  });
  app.addHook('onClose', async () => service.close());
}

export default fp(updates, { name: 'coffer-updates', fastify: '5.x', dependencies: ['coffer-core'] });
