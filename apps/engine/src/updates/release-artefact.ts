/**
 * Unpacking an engine release artefact (docs/updates.md "Engine artefact") into its staging
 * directory: a gzip tarball holding `engine/main.js` (the bundled engine) and `node_modules/`
 * (the native addon). The artefact was verified against the signed channel before this runs, so
 * these limits are defence in depth against a signer's mistake, not the trust boundary: regular
 * files and directories only (no links, devices or absolute / `..` paths: tar refuses those by
 * default and the filter below refuses links), at most MAX_ENTRIES entries and MAX_UNPACKED bytes.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { UpdateError } from '@coffer/update';

export const MAX_ENTRIES = 20_000;
export const MAX_UNPACKED = 1024 * 1024 * 1024;
/** Where the launcher (launcher.ts) finds a release's program. */
export const ENGINE_ENTRY = join('engine', 'main.js');

export async function unpackEngineRelease(artefactPath: string, releaseDir: string): Promise<void> {
  let entries = 0;
  let bytes = 0;
  let refused: string | null = null;
  // Loaded here, by its static name (a bundled release carries it): an engine that never unpacks a
  // release never loads it (about 1.6 MiB of heap).
  const { extract } = await import('tar');
  try {
    await extract({
      file: artefactPath,
      cwd: releaseDir,
      strict: true,
      preserveOwner: false,
      filter: (_path, entry) => {
        const type = 'type' in entry ? entry.type : null;
        entries++;
        bytes += 'size' in entry && typeof entry.size === 'number' ? entry.size : 0;
        if (type !== 'File' && type !== 'Directory' && type !== 'OldFile' && type !== 'ContiguousFile')
          refused ??= 'the artefact holds an entry that is not a file or a directory';
        else if (entries > MAX_ENTRIES) refused ??= 'the artefact holds too many entries';
        else if (bytes > MAX_UNPACKED) refused ??= 'the artefact unpacks to more than 1 GiB';
        return refused === null;
      },
    });
  } catch (e) {
    throw new UpdateError(
      'ERR_UPDATE_UPLOAD',
      `the engine artefact is not a release tarball (${(e as { code?: string }).code ?? 'unreadable'})`,
    );
  }
  if (refused !== null) throw new UpdateError('ERR_UPDATE_UPLOAD', refused);
  const main = await stat(join(releaseDir, ENGINE_ENTRY)).catch(() => null);
  if (!main?.isFile())
    throw new UpdateError('ERR_UPDATE_UPLOAD', `the engine artefact has no ${ENGINE_ENTRY}`);
}
