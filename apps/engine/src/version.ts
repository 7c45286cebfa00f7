/**
 * The engine's constant identity: the service name that `GET /ready` and `GET /admin/health`
 * report, and the engine version (kept in step with package.json by a test).
 */
export const SERVICE_NAME = 'coffer-engine';
export const ENGINE_VERSION = '0.0.0';
export const BANNER = 'coffer-engine: self-hosted backup engine\n';
