#!/usr/bin/env node
/**
 * The engine process: `node apps/engine/dist/main.js`, configured only by environment variables
 * (docs/configuration.md). It answers `GET /ready` once it listens; SIGTERM or SIGINT stops it
 * gracefully (the server stops accepting, in-flight requests finish, the state store closes); a
 * second signal exits at once.
 *
 * It first applies the engine's Node flags (node-flags.ts: re-executes itself once with them, same
 * process id, when they were not given).
 *
 * Exit codes: 0 after a graceful stop; 2 for bad configuration (one line on stderr naming the
 * variable); 1 for any other start-up failure (one line on stderr, no secret).
 */
import { applyEngineNodeFlags } from './node-flags.ts';

// Before anything else is loaded: the engine's V8 settings (node-flags.ts; may re-execute).
applyEngineNodeFlags();
const { ConfigError, EngineError } = await import('./errors.ts');
const { startEngine } = await import('./start.ts');

function fail(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`coffer-engine: configuration error: ${err.message}\n`);
    process.exit(2);
  }
  const what = err instanceof EngineError ? `${err.code}: ${err.message}` : (err as { code?: string }).code;
  process.stderr.write(`coffer-engine: failed to start (${what ?? 'unexpected error'})\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  let started: Awaited<ReturnType<typeof startEngine>>;
  try {
    started = await startEngine();
  } catch (err) {
    fail(err);
  }
  const { app } = started;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    app.log.info({ event: 'stopping', signal }, 'coffer-engine stopping');
    app.close().then(
      () => {
        app.log.info({ event: 'stopped' }, 'coffer-engine stopped');
        process.exit(0);
      },
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

await main();
