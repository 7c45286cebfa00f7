/**
 * What every route can reach through `app.engine`: the configuration, the keys' presence, the
 * state store, and the admin-token checker. Secrets stay inside; routes report presence only.
 */
import type { ObjectStore } from '@coffer/objectstore';
import type { AdminTokenChecker } from './auth/admin-token.ts';
import type { EngineConfig } from './config.ts';
import type { EngineKeys } from './keys.ts';
import type { ReadSlots } from './routes/restore/read-slots.ts';
import type { State } from './state/index.ts';

export interface EngineContext {
  config: EngineConfig;
  keys: EngineKeys;
  state: State;
  adminToken: AdminTokenChecker;
  /** Destinations by id; `default` is the local filesystem under `<data dir>/destination`. */
  destinations: ReadonlyMap<string, ObjectStore>;
  startedAt: Date;
  /**
   * The clock of restore planning (`plannedAt`, `applyDeadline`, expirations) and of the approval
   * life-cycle (request age, minimum delay, expiry): the system clock unless a test injects one.
   */
  restoreClock: () => Date;
  /** Concurrency limits of restore dry runs and verifies (ENGINE_RESTORE_READS_*). */
  restoreReads: ReadSlots;
}

declare module 'fastify' {
  interface FastifyInstance {
    engine: EngineContext;
  }
}
