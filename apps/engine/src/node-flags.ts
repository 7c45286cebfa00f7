/**
 * The engine process's own memory settings, applied by the process itself so that every way of
 * starting it (`node apps/engine/dist/main.js`, the `coffer-engine` bin, `pnpm start`, the
 * container image) runs with the same memory behaviour (docs/operations.md "Memory").
 *
 * Why, each measured on a 1 GiB backup (bench/backup.mjs):
 * - `--max-semi-space-size=8`: V8 grows the young generation of each isolate (the main thread and
 *   the archive's worker threads) up to 64 MiB per semi-space on a machine with this much memory,
 *   about 128 MiB resident in the main thread alone that a run never needs; capped at 8 MiB it
 *   costs a few more (cheap) scavenges.
 * - `--heap-growing-percent=30`: a run promotes index lines, listing pages and read-back state to
 *   the old generation; with V8's default growing factor (up to 4x the live size) the old space
 *   grew by ~100 MiB over a few runs before a full collection. 30 % keeps it near the live size.
 * - `MALLOC_ARENA_MAX=2` (glibc): each thread that frees memory (workers, the libuv pool) gets its
 *   own malloc arena, whose freed space is kept per arena; two arenas saved ~40 MiB of peak RSS
 *   with no measurable CPU cost (the bulk buffers are pooled, malloc is not hot).
 * - `MALLOC_MMAP_THRESHOLD_=524288` (glibc): glibc otherwise raises its threshold for serving an
 *   allocation with its own mapping each time such a block is freed, up to 32 MiB, after which the
 *   pack and read-back buffers (8-16 MiB) and the index's frames came from the main heap and stayed
 *   there, fragmented, once freed: 100-110 MiB of `[heap]` after a 1 GiB run, 267 MiB after a
 *   10 GiB one. Fixed at 512 KiB, a freed block that size or larger is unmapped; the cipher's
 *   256 KiB pieces keep coming from the heap (at 128 KiB each piece was mapped and unmapped: ~5 %
 *   more CPU; 512 KiB and 1 MiB measured the same CPU). After a 1 GiB run the engine held
 *   300-330 MiB, with this and runs/idle-memory.ts 240-265 MiB; after a 10 GiB run with nothing
 *   changed 817 MiB at 1 MiB, 620 MiB at 512 KiB.
 * - `--expose-gc`: lets runs/idle-memory.ts run one full collection once no run is in flight, so
 *   a finished run's buffers are returned then rather than whenever V8 next needs to collect.
 *
 * How: V8 reads the semi-space limit and glibc its arena limit only at start, so they cannot be
 * changed from JavaScript once running. `applyEngineNodeFlags()` re-executes the same program
 * with the settings added through `process.execve` (Node >= 22.15 / 23.11 on POSIX): same
 * process id, same standard streams, same arguments and environment, nothing loaded yet. A flag
 * the operator gave (command line or NODE_OPTIONS) or an allocator variable already set is left
 * alone; without `process.execve` (Windows) the engine runs with Node's defaults.
 */

/** The Node flags the engine runs with (docs/operations.md). */
export const ENGINE_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=8',
  '--heap-growing-percent=30',
  '--expose-gc',
];

/** The environment the engine runs with, unless already set. */
export const ENGINE_NODE_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '524288',
};

/** Set in the re-executed image: never re-execute twice, whatever happened to the flags. */
const MARK = 'COFFER_ENGINE_NODE_FLAGS_APPLIED';

/** The flags of ENGINE_NODE_FLAGS not already given (by name) on the command line or in NODE_OPTIONS. */
export function missingNodeFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)]
    .filter((a) => a.startsWith('--'))
    .map((a) => a.split('=')[0]!.replaceAll('_', '-'));
  return ENGINE_NODE_FLAGS.filter((f) => !given.includes(f.split('=')[0]!));
}

/** The variables of ENGINE_NODE_ENV not set in `env`. */
export function missingNodeEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(ENGINE_NODE_ENV).filter(([k]) => env[k] === undefined));
}

type Execve = (file: string, args: string[], env: NodeJS.ProcessEnv) => never;

/** `process.execve` where the platform has it (Node >= 22.15 / 23.11 on POSIX), else null. */
export function execveOf(): Execve | null {
  const execve = (process as { execve?: Execve }).execve;
  return typeof execve === 'function' ? execve.bind(process) : null;
}

/**
 * Re-executes this process with the engine's Node flags when some are missing; returns (and the
 * caller carries on) when nothing is missing, when already re-executed, or when the platform
 * cannot (then the engine simply runs with Node's defaults).
 *
 * With `into`, the process is re-executed into that script (a promoted release, launcher.ts)
 * whether or not flags are missing; it returns only when the platform cannot re-execute (the
 * caller then loads the release in this process).
 */
export function applyEngineNodeFlags(into?: { script: string; env: NodeJS.ProcessEnv }): void {
  if (into === undefined && process.env[MARK] === '1') return;
  const execve = execveOf();
  if (execve === null) return;
  const flags = missingNodeFlags(process.execArgv, process.env.NODE_OPTIONS);
  const env = missingNodeEnv(process.env);
  if (into === undefined && flags.length === 0 && Object.keys(env).length === 0) return;
  const script = into?.script ?? process.argv[1]!;
  try {
    execve(
      process.execPath,
      [process.execPath, ...flags, ...process.execArgv, script, ...process.argv.slice(2)],
      { ...(into?.env ?? process.env), ...env, [MARK]: '1' },
    );
  } catch {
    // Not permitted here (seccomp, exotic runtime): run with Node's defaults.
  }
}
