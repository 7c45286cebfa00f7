/**
 * @coffer/engine: the Fastify server of the Coffer backup engine. `buildApp` builds the server
 * (tests, scripts), `loadConfig` reads the environment, `startEngine` (main.ts) runs it.
 */
export { type BuildAppOptions, buildApp } from './app.ts';
export { CONFIG_VARIABLES, type EngineConfig, loadConfig } from './config.ts';
export { ConfigError, ENGINE_ERROR_CODES, EngineError, type EngineErrorCode } from './errors.ts';
export { type EngineKeys, loadKeys } from './keys.ts';
export { startEngine } from './start.ts';
export { BANNER, ENGINE_VERSION, SERVICE_NAME } from './version.ts';
