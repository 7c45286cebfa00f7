/**
 * The console's configuration, from environment variables only (docs/console.md):
 *
 * - CONSOLE_ENGINE_URL (required): the engine's base URL, for example `http://127.0.0.1:8080`.
 * - CONSOLE_HOST (default 127.0.0.1) and CONSOLE_PORT (default 8788): where the console listens.
 * - CONSOLE_TLS_CERT_FILE / CONSOLE_TLS_KEY_FILE: serve HTTPS (both or neither).
 * - CONSOLE_ENGINE_CA_FILE: a PEM bundle to trust for an engine served over HTTPS with a private CA.
 * - CONSOLE_UI_DIR: the built UI (default: the `dist/ui` beside this file's build).
 * - CONSOLE_LOG_LEVEL (default info).
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export class ConsoleConfigError extends Error {
  readonly code = 'ERR_CONSOLE_CONFIG';
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable} ${message}`);
    this.variable = variable;
    this.name = 'ConsoleConfigError';
  }
}

export interface ConsoleConfig {
  engineUrl: URL;
  host: string;
  port: number;
  tls: { cert: Buffer; key: Buffer } | undefined;
  engineCa: Buffer | undefined;
  uiDir: string;
  logLevel: string;
}

const here = dirname(fileURLToPath(import.meta.url));

function readFile(env: Record<string, string | undefined>, variable: string): Buffer | undefined {
  const path = env[variable]?.trim();
  if (!path) return undefined;
  try {
    return readFileSync(path);
  } catch {
    throw new ConsoleConfigError(variable, 'names a file that cannot be read');
  }
}

export function loadConsoleConfig(env: Record<string, string | undefined> = process.env): ConsoleConfig {
  const rawEngine = env.CONSOLE_ENGINE_URL?.trim();
  if (!rawEngine) throw new ConsoleConfigError('CONSOLE_ENGINE_URL', 'is required (the engine base URL)');
  let engineUrl: URL;
  try {
    engineUrl = new URL(rawEngine);
  } catch {
    throw new ConsoleConfigError('CONSOLE_ENGINE_URL', 'must be a URL such as http://127.0.0.1:8080');
  }
  if (engineUrl.protocol !== 'http:' && engineUrl.protocol !== 'https:')
    throw new ConsoleConfigError('CONSOLE_ENGINE_URL', 'must be an http or https URL');
  if (engineUrl.username || engineUrl.password || (engineUrl.pathname !== '/' && engineUrl.pathname !== ''))
    throw new ConsoleConfigError('CONSOLE_ENGINE_URL', 'must be an origin only (no credentials or path)');
  const portText = env.CONSOLE_PORT?.trim() || '8788';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535)
    throw new ConsoleConfigError('CONSOLE_PORT', 'must be a port number (0-65535)');
  const cert = readFile(env, 'CONSOLE_TLS_CERT_FILE');
  const key = readFile(env, 'CONSOLE_TLS_KEY_FILE');
  if ((cert === undefined) !== (key === undefined))
    throw new ConsoleConfigError(
      cert ? 'CONSOLE_TLS_KEY_FILE' : 'CONSOLE_TLS_CERT_FILE',
      'must be set together with its pair',
    );
  return {
    engineUrl,
    host: env.CONSOLE_HOST?.trim() || '127.0.0.1',
    port,
    tls: cert && key ? { cert, key } : undefined,
    engineCa: readFile(env, 'CONSOLE_ENGINE_CA_FILE'),
    uiDir: resolve(env.CONSOLE_UI_DIR?.trim() || join(here, '..', 'ui')),
    logLevel: env.CONSOLE_LOG_LEVEL?.trim() || 'info',
  };
}
