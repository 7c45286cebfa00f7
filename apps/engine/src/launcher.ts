/**
 * Which engine program this process runs, and how it re-executes itself (docs/updates.md
 * "Promote and restart"). Loaded before anything else (main.ts), so it uses only node:fs/path.
 *
 * The installed program (the `coffer-engine` bin, `node apps/engine/dist/main.js`, the image's
 * entry point) is the **launcher**. When `<data dir>/current` names a promoted release
 * (`releases/<version>/`, a bundled engine under `engine/main.js`) whose version is not the one
 * this program is, the process re-executes itself into that release through `process.execve`:
 * same process id, standard streams and environment, so a service manager or container runtime
 * sees one engine that changed its program. Without a pointer the installed build runs.
 *
 * Why a boot counter: a promoted release that cannot even start (it crashes before listening)
 * would otherwise be re-entered on every restart. Before each entry the launcher counts an
 * attempt in `<data dir>/current.boot`; a release that listens clears it (engine start). After
 * MAX_BOOT_ATTEMPTS unanswered entries the launcher runs its own build instead, and the update
 * service then finds a promoted update whose version is not running and rolls it back.
 */
import { existsSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';

/** The environment the launcher hands to a release (and a release hands back on re-exec). */
export const LAUNCHER_ENV = {
  /** The installed program's script, which every re-exec goes back through. */
  script: 'COFFER_ENGINE_LAUNCHER',
  /** The installed program's version (a rollback to it removes the pointer). */
  baseVersion: 'COFFER_ENGINE_BASE_VERSION',
  /** The release this image was entered for (set by the launcher; never by an operator). */
  release: 'COFFER_ENGINE_RELEASE',
} as const;

export const MAX_BOOT_ATTEMPTS = 2;
const VERSION = /^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$/;

/** The data directory as config.ts resolves it (ENGINE_DATA_DIR, default `./.coffer`). */
export function dataDirOf(env: NodeJS.ProcessEnv, cwd = process.cwd()): string {
  const v = env.ENGINE_DATA_DIR?.trim();
  return resolve(cwd, v !== undefined && v !== '' ? v : './.coffer');
}

/** The version `<dataDir>/current` names, or null (no pointer, or not a release). */
export function currentRelease(dataDir: string): string | null {
  try {
    const v = basename(readlinkSync(join(dataDir, 'current')));
    return VERSION.test(v) ? v : null;
  } catch {
    return null;
  }
}

export function releaseEntry(dataDir: string, version: string): string {
  return join(dataDir, 'releases', version, 'engine', 'main.js');
}

interface BootMark {
  version: string;
  attempts: number;
}

function bootFile(dataDir: string): string {
  return join(dataDir, 'current.boot');
}

function readBoot(dataDir: string): BootMark | null {
  try {
    const v = JSON.parse(readFileSync(bootFile(dataDir), 'utf8')) as Partial<BootMark>;
    return typeof v.version === 'string' && typeof v.attempts === 'number'
      ? { version: v.version, attempts: v.attempts }
      : null;
  } catch {
    return null;
  }
}

function writeBoot(dataDir: string, mark: BootMark): void {
  const tmp = `${bootFile(dataDir)}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(mark)}\n`, { mode: 0o600 });
  renameSync(tmp, bootFile(dataDir));
}

/** A release that listens clears the boot counter (it started; the canary judges the rest). */
export function clearBootMark(dataDir: string): void {
  rmSync(bootFile(dataDir), { force: true });
}

export type LaunchDecision =
  | { run: 'self' }
  | { run: 'release'; version: string; script: string }
  | { run: 'self'; skipped: string; reason: 'missing' | 'boot-attempts' };

/**
 * What this process should run: itself, or the promoted release. Counts a boot attempt when it
 * chooses a release. `ownVersion` is this program's ENGINE_VERSION.
 */
export function decideLaunch(env: NodeJS.ProcessEnv, ownVersion: string): LaunchDecision {
  const dataDir = dataDirOf(env);
  const version = currentRelease(dataDir);
  if (version === null || version === ownVersion) return { run: 'self' };
  const script = releaseEntry(dataDir, version);
  if (!existsSync(script)) return { run: 'self', skipped: version, reason: 'missing' };
  const mark = readBoot(dataDir);
  const attempts = mark?.version === version ? mark.attempts : 0;
  if (attempts >= MAX_BOOT_ATTEMPTS) return { run: 'self', skipped: version, reason: 'boot-attempts' };
  try {
    writeBoot(dataDir, { version, attempts: attempts + 1 });
  } catch {
    // A read-only data dir: enter the release without the counter rather than not at all.
  }
  return { run: 'release', version, script };
}

/**
 * The environment for entering `script` (a release or the launcher itself): the launcher's own
 * script and version are fixed the first time and carried through every later re-exec.
 */
export function launchEnv(
  env: NodeJS.ProcessEnv,
  ownVersion: string,
  ownScript: string,
  release: string | null,
): NodeJS.ProcessEnv {
  const next: NodeJS.ProcessEnv = {
    ...env,
    [LAUNCHER_ENV.script]: env[LAUNCHER_ENV.script] ?? ownScript,
    [LAUNCHER_ENV.baseVersion]: env[LAUNCHER_ENV.baseVersion] ?? ownVersion,
  };
  if (release === null) delete next[LAUNCHER_ENV.release];
  else next[LAUNCHER_ENV.release] = release;
  return next;
}

/** The installed program's version (this build's when it is the installed one). */
export function baseVersion(ownVersion: string, env: NodeJS.ProcessEnv = process.env): string {
  return env[LAUNCHER_ENV.baseVersion] ?? ownVersion;
}
