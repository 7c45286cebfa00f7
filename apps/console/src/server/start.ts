import type { FastifyInstance } from 'fastify';
import { buildConsole } from './app.ts';
import { loadConsoleConfig } from './config.ts';

/** Starts the console from `env`; returns the listening app and its URL. */
export async function startConsole(
  env: Record<string, string | undefined> = process.env,
): Promise<{ app: FastifyInstance; url: string }> {
  const config = loadConsoleConfig(env);
  const app = await buildConsole(config);
  const url = await app.listen({ host: config.host, port: config.port });
  app.log.info(
    { event: 'listening', url, engine: config.engineUrl.origin },
    `coffer-console listening at ${url}`,
  );
  return { app, url };
}
