#!/usr/bin/env node
/**
 * The engine process: `node apps/engine/dist/main.js`, configured only by environment variables
 * (docs/configuration.md). It answers `GET /ready` once it listens; SIGTERM or SIGINT stops it
 * gracefully (the server stops accepting, in-flight requests finish, the state store closes); a
 * second signal exits at once.
 *
 * It first decides which program runs (launcher.ts): when `<data dir>/current` names a promoted
 * release, it re-executes itself into that release's bundled engine (same process id); otherwise
 * it applies the engine's Node flags (node-flags.ts: re-executes itself once with them, same
 * process id, when they were not given) and runs this build.
 *
 * Exit codes: 0 after a graceful stop; 2 for bad configuration (one line on stderr naming the
 * variable); 1 for any other start-up failure (one line on stderr, no secret).
 *
 * `coffer-engine keys init ...` (keys-init.ts) is a command, not an engine: it is dispatched first,
 * before the launcher and the Node flags, so it never re-executes, never reads a data directory's
 * release pointer and never starts a server. Any other argument is ignored, as before.
 */
import { pathToFileURL } from 'node:url';
import { decideLaunch, launchEnv } from './launcher.ts';
import { applyEngineNodeFlags } from './node-flags.ts';
import { ENGINE_VERSION } from './version.ts';

if (process.argv[2] === 'keys') {
  const { keysCommand } = await import('./keys-init.ts');
  process.exitCode = keysCommand(process.argv.slice(3));
} else {
  // Before anything else is loaded: which program runs (launcher.ts), then the engine's V8
  // settings (node-flags.ts). Either may re-execute this process.
  const launch = decideLaunch(process.env, ENGINE_VERSION);
  if (launch.run === 'release') {
    const env = launchEnv(process.env, ENGINE_VERSION, process.argv[1]!, launch.version);
    applyEngineNodeFlags({ script: launch.script, env });
    // No process.execve here (Windows, an old Node): load the release in this process instead.
    Object.assign(process.env, env);
    await import(pathToFileURL(launch.script).href);
  } else {
    if ('skipped' in launch)
      process.stderr.write(
        `coffer-engine: release ${launch.skipped} not entered (${launch.reason === 'missing' ? 'its program is missing' : 'it did not start twice'}); running the installed build ${ENGINE_VERSION}\n`,
      );
    applyEngineNodeFlags();
    await runEngine();
  }
}

async function runEngine(): Promise<void> {
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
      started = await startEngine(process.env, { restartOnPromote: true });
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
}
