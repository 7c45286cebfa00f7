#!/usr/bin/env node
/**
 * The `coffer-recover` executable (package bin, dist/cli.js; bundled into dist/coffer-recover.mjs).
 * Wires the process streams, SIGINT/SIGTERM and the exit code to main(). A first signal asks the
 * running command to stop between objects (temp files are removed, exit 130); a second one exits
 * at once.
 */
import { EXIT } from './exit-codes.ts';
import { applyRecoverNodeFlags } from './node-flags.ts';

// Before anything else is loaded: this may replace the process image (node-flags.ts), and the
// modules main.ts pulls in would only be loaded twice.
applyRecoverNodeFlags();
const { main } = await import('./main.ts');

const controller = new AbortController();
let signals = 0;
const onSignal = (): void => {
  signals++;
  if (signals > 1) process.exit(EXIT.INTERRUPTED);
  controller.abort();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

const code = await main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: process.env,
  signal: controller.signal,
});
process.exitCode = code;
