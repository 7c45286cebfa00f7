/**
 * The engine's core facts as the named plugin `coffer-core`: `app.config` (the parsed
 * configuration), `app.keys` (the loaded keys; routes report presence only), `app.state` (the
 * state store, closed when the server closes if this plugin opened it), `app.destinations`
 * (destination id -> object store; `default` is the local filesystem under
 * `<data dir>/destination`), `app.startedAt` and `app.events` (the notification event bus,
 * src/events.ts: services and routes raise into it, the notify room subscribes). Every other
 * plugin and route reaches these
 * through the instance, never through a shared grab-bag object.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createFsStore, type ObjectStore, openStore } from '@coffer/objectstore';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { EngineConfig } from '../config.ts';
import { ConfigError, EngineError } from '../errors.ts';
import { EngineEvents } from '../events.ts';
import {
  adoptBreakGlassKey,
  BREAK_GLASS_SETTING,
  type EngineKeys,
  readBreakGlassPublicKey,
} from '../keys.ts';
import { openEngineState, type State } from '../state/index.ts';

declare module 'fastify' {
  interface FastifyInstance {
    config: EngineConfig;
    keys: EngineKeys;
    state: State;
    /** Destinations by id; `default` is the local filesystem under `<data dir>/destination`. */
    destinations: ReadonlyMap<string, ObjectStore>;
    startedAt: Date;
    /** The engine's notification events (src/events.ts): raise never blocks, subscribers run later. */
    events: EngineEvents;
  }
}

export interface CorePluginOptions {
  config: EngineConfig;
  keys: EngineKeys;
  /** An already-open state store (kept open on close); by default one is opened from the config. */
  state?: State;
  /** An event bus made by the caller (tests subscribe before the engine starts); default a new one. */
  events?: EngineEvents;
}

/** The embedded default destination: the local filesystem under `<data dir>/destination`. */
function defaultDestination(config: EngineConfig): ObjectStore {
  const root = join(config.dataDir, 'destination');
  try {
    mkdirSync(root, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new EngineError(
      'ERR_ENGINE_DATA_DIR',
      'cannot create the default destination in the data directory',
      {
        cause: err,
      },
    );
  }
  return createFsStore({ root });
}

/** The default destination plus ENGINE_DESTINATIONS (no credentials in any URL). */
export function destinationsOf(config: EngineConfig): Map<string, ObjectStore> {
  const map = new Map<string, ObjectStore>([['default', defaultDestination(config)]]);
  for (const d of config.destinations) {
    try {
      map.set(d.id, openStore(d.url));
    } catch {
      throw new ConfigError('ENGINE_DESTINATIONS', `destination ${d.id} has an unusable url`);
    }
  }
  return map;
}

async function core(app: FastifyInstance, options: CorePluginOptions): Promise<void> {
  const { config } = options;
  const state = options.state ?? (await openEngineState(config.database, config.dataDir));
  if (options.state === undefined) app.addHook('onClose', async () => state.close());
  app.decorate('config', config);
  app.decorate('keys', options.keys);
  // A break-glass key sent from the console earlier (none in the environment): adopt it.
  if (options.keys.breakGlass === null) {
    const stored = await state.settings.get<string>(BREAK_GLASS_SETTING);
    if (typeof stored === 'string') {
      const holder = readBreakGlassPublicKey(stored);
      if (typeof holder === 'string')
        throw new EngineError('ERR_ENGINE_KEYS', `the stored break-glass public key is unusable (${holder})`);
      adoptBreakGlassKey(options.keys, holder);
    }
  }
  app.decorate('state', state);
  app.decorate('destinations', destinationsOf(config) as ReadonlyMap<string, ObjectStore>);
  app.decorate('startedAt', new Date());
  app.decorate('events', options.events ?? new EngineEvents({ log: app.log }));
}

export default fp(core, { name: 'coffer-core', fastify: '5.x' });
