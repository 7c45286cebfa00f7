/**
 * `startEngine(env)`: configuration from the environment, the app, and a listening server; what
 * main.ts runs and what in-process tests can call.
 */
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import { loadConfig } from './config.ts';
import { restartEngine } from './updates/restart.ts';

/**
 * Starts the engine from `env`; returns the listening app and its URL. Throws on failure.
 * `restartOnPromote` (main.ts only): a promote re-executes this process into the promoted program
 * (updates/restart.ts); an engine started inside another program (a test) only logs that it
 * should restart.
 */
export async function startEngine(
  env: Record<string, string | undefined> = process.env,
  options: { restartOnPromote?: boolean } = {},
): Promise<{ app: FastifyInstance; url: string }> {
  const config = loadConfig(env);
  const app: FastifyInstance = await buildApp({
    config,
    ...(options.restartOnPromote ? { updates: { restart: () => restartEngine(app) } } : {}),
  });
  const url = await app.listen({ host: config.host, port: config.port });
  // The scheduler starts once the engine answers: its first tick resumes interrupted runs.
  app.runs.start();
  app.drills.startScheduler(); // scheduled restore drills (the jobs' restore-test cadence)
  app.canary.start(); // the integrity canary, first flight one interval from now
  app.log.info({ event: 'listening', url, keysReady: app.keys.ready }, `coffer-engine listening at ${url}`);
  return { app, url };
}
