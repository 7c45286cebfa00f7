/**
 * Deployers: where a verified artefact goes and how it becomes live (docs/updates.md,
 * "Deployers"). One deployer per component.
 *
 * `DirectoryDeployer` keeps releases side by side under `<data dir>/releases/<version>/` (the
 * console's under `<data dir>/console-releases/<version>/`) and one `current` pointer (a symlink)
 * switched atomically: the new link is made under a temporary name and renamed over the old, so a
 * reader sees the old release or the new one, never none. A release directory is staged under a
 * temporary name and renamed into place whole; nothing runs from it until promote.
 *
 * `ContainerDeployer` changes nothing on disk: the orchestrator owns the image, so it verifies,
 * and its promote and rollback answer what the operator (or the orchestrator) must do.
 */
import { randomBytes } from 'node:crypto';
import {
  copyFile,
  mkdir,
  open,
  readFile,
  readlink,
  rename,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { basename, join } from 'node:path';
import { isVersion } from './channel.ts';
import { UpdateError } from './errors.ts';
import { hashFile } from './internal/hash-file.ts';

/** What a deployer step leaves for a person or an orchestrator to do (container mode). */
export interface DeployNote {
  action: 'none' | 'orchestrator';
  message: string;
}

export interface Deployer {
  readonly mode: 'directory' | 'container';
  /** The live version, or null when none is installed. */
  live(): Promise<string | null>;
  /** Puts the verified artefact in place, inert. */
  upload(version: string, artefactPath: string): Promise<DeployNote>;
  /** SHA-384 (`sha384:<hex>`) of the uploaded artefact bytes, read back from where they now are. */
  readBack(version: string): Promise<string>;
  /** Makes `version` live (also used for rollback); null removes the pointer (nothing installed). */
  promote(version: string | null): Promise<DeployNote>;
}

export interface DirectoryDeployerOptions {
  /** The engine's data directory. */
  dataDir: string;
  /** Default 'engine'. */
  component?: 'engine' | 'console';
  /**
   * Called with the copied artefact and the staging directory, to unpack it there (a tarball, a
   * zip). Default: none; the artefact file itself is the release.
   */
  unpack?: (artefactPath: string, releaseDir: string) => Promise<void>;
}

const RELEASE_FILE = 'release.json';

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function deployError(what: string, e: unknown): UpdateError {
  if (e instanceof UpdateError) return e;
  const code = (e as { code?: unknown } | null)?.code;
  return new UpdateError(
    'ERR_UPDATE_DEPLOY',
    `${what} failed (${typeof code === 'string' ? code : 'error'})`,
  );
}

/** Releases in `<dataDir>/releases/<version>/` and an atomic `<dataDir>/current` symlink. */
export class DirectoryDeployer implements Deployer {
  readonly mode = 'directory' as const;
  readonly releasesDir: string;
  readonly pointer: string;
  readonly #unpack: DirectoryDeployerOptions['unpack'];

  constructor(options: DirectoryDeployerOptions) {
    const engine = (options.component ?? 'engine') === 'engine';
    this.releasesDir = join(options.dataDir, engine ? 'releases' : 'console-releases');
    this.pointer = join(options.dataDir, engine ? 'current' : 'console-current');
    this.#unpack = options.unpack;
  }

  #dir(version: string): string {
    if (!isVersion(version)) throw new UpdateError('ERR_UPDATE_INVALID_ARGUMENT', 'not a semantic version');
    return join(this.releasesDir, version);
  }

  /** The live version: the release directory the pointer names, or null without a pointer. */
  async live(): Promise<string | null> {
    try {
      const target = await readlink(this.pointer);
      const v = basename(target);
      return isVersion(v) ? v : null;
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return null;
      throw deployError('reading the current pointer', e);
    }
  }

  /**
   * Stages `<releases>/.staging-<random>/` with a copy of the artefact, `release.json` and what
   * `unpack` writes, then renames it to `<releases>/<version>/`. Refuses to replace the live
   * release (ERR_UPDATE_UPLOAD); a leftover non-live directory of that version is replaced.
   */
  async upload(version: string, artefactPath: string): Promise<DeployNote> {
    const dir = this.#dir(version);
    if ((await this.live()) === version)
      throw new UpdateError('ERR_UPDATE_UPLOAD', `release ${version} is live and is not replaced`);
    const staging = join(this.releasesDir, `.staging-${randomBytes(8).toString('hex')}`);
    try {
      await mkdir(staging, { recursive: true, mode: 0o755 });
      const name = basename(artefactPath);
      await copyFile(artefactPath, join(staging, name));
      const fh = await open(join(staging, name), 'r');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
      if (this.#unpack) await this.#unpack(join(staging, name), staging);
      await writeFile(join(staging, RELEASE_FILE), `${JSON.stringify({ version, artefact: name })}\n`, {
        mode: 0o644,
      });
      await fsyncDir(staging);
      await rm(dir, { recursive: true, force: true });
      await rename(staging, dir);
      await fsyncDir(this.releasesDir);
      return { action: 'none', message: `release ${version} uploaded to ${dir}` };
    } catch (e) {
      await rm(staging, { recursive: true, force: true });
      throw e instanceof UpdateError
        ? e
        : new UpdateError('ERR_UPDATE_UPLOAD', deployError('upload', e).message);
    }
  }

  /** Hashes the artefact copy inside `<releases>/<version>/`. */
  async readBack(version: string): Promise<string> {
    const dir = this.#dir(version);
    try {
      const meta = JSON.parse(await readFile(join(dir, RELEASE_FILE), 'utf8')) as { artefact?: unknown };
      if (typeof meta.artefact !== 'string' || basename(meta.artefact) !== meta.artefact)
        throw new UpdateError('ERR_UPDATE_READ_BACK', `release ${version} has no artefact entry`);
      return (await hashFile(join(dir, meta.artefact))).sha384;
    } catch (e) {
      throw e instanceof UpdateError
        ? e
        : new UpdateError('ERR_UPDATE_READ_BACK', deployError('read-back', e).message);
    }
  }

  /**
   * Switches `current` to `releases/<version>` atomically (a symlink made under a temporary name,
   * renamed over the old one, directory fsynced). `null` removes the pointer. Refuses a version
   * that was never uploaded (ERR_UPDATE_PROMOTE); the prior pointer stays on any failure.
   */
  async promote(version: string | null): Promise<DeployNote> {
    if (version === null) {
      await rm(this.pointer, { force: true });
      return { action: 'none', message: 'no release is current' };
    }
    const dir = this.#dir(version);
    const st = await stat(join(dir, RELEASE_FILE)).catch(() => null);
    if (!st?.isFile()) throw new UpdateError('ERR_UPDATE_PROMOTE', `release ${version} was never uploaded`);
    const temp = `${this.pointer}.${randomBytes(8).toString('hex')}.tmp`;
    try {
      await symlink(join(basename(this.releasesDir), version), temp);
      await rename(temp, this.pointer);
      await fsyncDir(join(this.pointer, '..'));
    } catch (e) {
      await rm(temp, { force: true });
      throw new UpdateError('ERR_UPDATE_PROMOTE', deployError('promote', e).message);
    }
    return { action: 'none', message: `release ${version} is current` };
  }
}

export interface ContainerDeployerOptions {
  /** The image repository the orchestrator runs (`ghcr.io/acme/coffer-engine`). */
  image: string;
  /** The version this container runs (the engine's own). */
  running: string | null;
}

/**
 * Container mode: verifies and reports; the orchestrator swaps the image. `upload` only records
 * the verified artefact's digest (read back from the file), and `promote` answers what to do.
 */
export class ContainerDeployer implements Deployer {
  readonly mode = 'container' as const;
  readonly #image: string;
  readonly #running: string | null;
  readonly #uploaded = new Map<string, string>();

  constructor(options: ContainerDeployerOptions) {
    this.#image = options.image;
    this.#running = options.running;
  }

  async live(): Promise<string | null> {
    return this.#running;
  }

  async upload(version: string, artefactPath: string): Promise<DeployNote> {
    this.#uploaded.set(version, (await hashFile(artefactPath)).sha384);
    return {
      action: 'none',
      message: `artefact ${version} verified; nothing is installed in container mode`,
    };
  }

  async readBack(version: string): Promise<string> {
    const d = this.#uploaded.get(version);
    if (d === undefined)
      throw new UpdateError('ERR_UPDATE_READ_BACK', `artefact ${version} was not uploaded`);
    return d;
  }

  async promote(version: string | null): Promise<DeployNote> {
    return {
      action: 'orchestrator',
      message:
        version === null
          ? 'remove the engine deployment'
          : `set the image of the engine deployment to ${this.#image}:${version} and restart it`,
    };
  }
}
