/**
 * The Node settings `coffer-recover` reads archives with, applied by re-executing itself once
 * (`process.execve`: same process id, same open descriptors, so a key piped on stdin is still
 * there). V8 and glibc read these only at start, so they cannot be set from inside.
 *
 * - `--max-semi-space-size=8`: V8 otherwise grows each isolate's young generation (the main
 *   thread and the archive's codec and record-hash threads) to 64 MiB per semi-space on a machine
 *   with this much memory. Measured on the 1 GiB benchmark run: extract 403 MiB peak RSS with
 *   Node's default, 313 MiB with it; verify 317 MiB and 277 MiB, at no cost in time.
 * - `MALLOC_ARENA_MAX=2`: one malloc arena per thread otherwise (verify 282 to 269 MiB).
 *
 * A flag or variable the user gave (command line or NODE_OPTIONS) is kept; nothing is re-executed
 * when nothing is missing, or where the platform cannot (then Node's defaults apply).
 */
export const RECOVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=8'];
export const RECOVER_NODE_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

/** Set in the re-executed image: never re-execute twice. */
const MARK = 'COFFER_RECOVER_NODE_FLAGS_APPLIED';

/** The flags of RECOVER_NODE_FLAGS not already given by name (either spelling) by the user. */
export function missingRecoverFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)]
    .filter((a) => a.startsWith('--'))
    .map((a) => a.split('=')[0]!.replaceAll('_', '-'));
  return RECOVER_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]!));
}

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/** Re-executes this process with the settings above when some are missing; else returns. */
export function applyRecoverNodeFlags(): void {
  if (process.env[MARK] === '1') return;
  const execve = (process as { execve?: Execve }).execve;
  const script = process.argv[1];
  if (typeof execve !== 'function' || script === undefined) return;
  const flags = missingRecoverFlags(process.execArgv, process.env.NODE_OPTIONS);
  const env = Object.fromEntries(
    Object.entries(RECOVER_NODE_ENV).filter(([k]) => process.env[k] === undefined),
  );
  if (flags.length === 0 && Object.keys(env).length === 0) return;
  try {
    execve.call(
      process,
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, script, ...process.argv.slice(2)],
      { ...process.env, ...env, [MARK]: '1' },
    );
  } catch {
    // Not permitted here (seccomp, another runtime): run with Node's defaults.
  }
}
