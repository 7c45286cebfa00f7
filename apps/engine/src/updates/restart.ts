/**
 * Restarting the engine into the program the `current` pointer names (docs/updates.md "Promote
 * and restart"): close the app (the server stops accepting, in-flight requests and runs reach
 * their checkpoints, the state store closes), then re-execute through the installed launcher
 * (launcher.ts), same process id, which enters the promoted release or, without a pointer, runs
 * the installed build. Where the platform cannot re-execute, the process exits with 75
 * (EX_TEMPFAIL) so a service manager or container runtime starts it again the same way.
 */
import type { FastifyInstance } from 'fastify';
import { LAUNCHER_ENV } from '../launcher.ts';
import { execveOf } from '../node-flags.ts';

export const RESTART_EXIT_CODE = 75;

export async function restartEngine(app: FastifyInstance): Promise<never> {
  try {
    await app.close();
  } catch {
    // Closing failed part-way: re-executing still releases every descriptor.
  }
  const script = process.env[LAUNCHER_ENV.script] ?? process.argv[1]!;
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env[LAUNCHER_ENV.release];
  const execve = execveOf();
  if (execve !== null) {
    try {
      execve(
        process.execPath,
        [process.execPath, ...process.execArgv, script, ...process.argv.slice(2)],
        env,
      );
    } catch {
      // Not permitted here: fall through to the exit a supervisor restarts from.
    }
  }
  process.stderr.write(
    'coffer-engine: restarting (exit 75); start the engine again to run the promoted release\n',
  );
  process.exit(RESTART_EXIT_CODE);
}
