#!/usr/bin/env node
/**
 * The console process: `node apps/console/dist/server/main.js`, configured by environment
 * variables (config.ts). Exit codes: 0 after a graceful stop (SIGTERM/SIGINT), 2 for bad
 * configuration (one line naming the variable), 1 for any other start-up failure.
 */
import { ConsoleConfigError } from './config.ts';
import { startConsole } from './start.ts';

try {
  const { app } = await startConsole();
  let stopping = false;
  const stop = () => {
    if (stopping) process.exit(1);
    stopping = true;
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} catch (err) {
  if (err instanceof ConsoleConfigError) {
    process.stderr.write(`coffer-console: configuration error: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `coffer-console: failed to start (${(err as { code?: string }).code ?? 'unexpected error'})\n`,
  );
  process.exit(1);
}
