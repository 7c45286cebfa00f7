/**
 * `startEngine(env)`: configuration from the environment, the app, and a listening server; what
 * main.ts runs and what in-process tests can call.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';

/** Starts the engine from `env`; returns the listening app and its URL. Throws on failure. */
export async function startEngine(
  env: Record<string, string | undefined> = process.env,
): Promise<{ app: FastifyInstance; url: string }> {
  const config = loadConfig(env);
  const app = await buildApp({ config });
  const url = await app.listen({ host: config.host, port: config.port });
  // The scheduler starts once the engine answers: its first tick resumes interrupted runs.
  app.runs.start();
  app.drills.startScheduler(); // scheduled restore drills (the jobs' restore-test cadence)
  app.log.info({ event: 'listening', url, keysReady: app.keys.ready }, `coffer-engine listening at ${url}`);
  return { app, url };
}
