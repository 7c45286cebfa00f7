/**
 * The engine process's own V8 settings, applied by the process itself so that every way of
 * starting it (`node apps/engine/dist/main.js`, the `coffer-engine` bin, `pnpm start`, the
 * container image) runs with the same memory behaviour.
 *
 * Why: a backup run allocates steadily (records, promises, index lines), and V8 grows the young
 * generation of each isolate (the main thread and the archive's worker threads) up to 64 MiB per
 * semi-space on a machine with this much memory: about 128 MiB of resident young generation in
 * the main thread alone that a run never needs. Capping the semi-space at 8 MiB costs a few more
 * (cheap) scavenges and keeps the engine's peak RSS well lower (docs/operations.md "Memory").
 *
 * How: V8 reads the semi-space limit only when an isolate's heap is set up, so it cannot be
 * changed from JavaScript once running. `applyEngineNodeFlags()` re-executes the same program
 * with the flags added through `process.execve` (Node >= 22.15 / 23.11 on POSIX): same process
 * id, same standard streams, same arguments and environment, nothing loaded yet. An operator's
 * own `--max-semi-space-size` (command line or NODE_OPTIONS) is left alone; without
 * `process.execve` (Windows) the engine runs unchanged.
 */

/** The flags the engine runs with (docs/operations.md). */
export const ENGINE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];

/** Set in the re-executed image: never re-execute twice, whatever happened to the flags. */
const MARK = 'COFFER_ENGINE_NODE_FLAGS_APPLIED';

/** The flags of ENGINE_NODE_FLAGS not already given (by name) on the command line or in NODE_OPTIONS. */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)]
    .filter((a) => a.startsWith('--'))
    .map((a) => a.split('=')[0]!.replaceAll('_', '-'));
  return ENGINE_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]!));
}

/**
 * Re-executes this process with the engine's Node flags when some are missing; returns (and the
 * caller carries on) when nothing is missing, when already re-executed, or when the platform
 * cannot (then the engine simply runs with Node's defaults).
 */
export function applyEngineNodeFlags(): void {
  if (process.env[MARK] === '1') return;
  const execve = (process as { execve?: (file: string, args: string[], env: NodeJS.ProcessEnv) => never })
    .execve;
  if (typeof execve !== 'function') return;
  const flags = missingNodeFlags(process.execArgv, process.env.NODE_OPTIONS);
  if (flags.length === 0) return;
  try {
    execve.call(
      process,
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, ...process.argv.slice(1)],
      { ...process.env, [MARK]: '1' },
    );
  } catch {
    // Not permitted here (seccomp, exotic runtime): run with Node's defaults.
  }
}
