/**
 * Object layout under a destination prefix (docs/archive-format.md "Object layout"). Job and run
 * ids are restricted to a path-safe alphabet so a key can never escape its run folder.
 */
import { ArchiveError } from './errors.ts';

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** True for a valid job or run id. */
export function isValidId(id: string): boolean {
  return ID.test(id);
}

export function assertId(what: string, id: unknown): asserts id is string {
  if (typeof id !== 'string' || !ID.test(id)) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: `${what} must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit`,
    });
  }
}

/** Store keys of formats 0.1 and 0.2. */
export const layout = {
  recoveryPrefix: '_RECOVERY/',
  formatPointer: '_RECOVERY/FORMAT',
  signerPublicKey: '_RECOVERY/signer.pub',
  readme: '_RECOVERY/README.txt',
  jobsPrefix: 'jobs/',
  runPrefix(job: string, runId: string): string {
    return `jobs/${job}/runs/${runId}/`;
  },
  manifest(job: string, runId: string): string {
    return `jobs/${job}/runs/${runId}/manifest.json`;
  },
  signature(job: string, runId: string): string {
    return `jobs/${job}/runs/${runId}/manifest.sig`;
  },
  index(job: string, runId: string): string {
    return `jobs/${job}/runs/${runId}/index.bin`;
  },
  shardsPrefix(job: string, runId: string): string {
    return `jobs/${job}/runs/${runId}/shards/`;
  },
  shard(job: string, runId: string, index: number): string {
    return `jobs/${job}/runs/${runId}/shards/${String(index).padStart(6, '0')}.bin`;
  },
  /** Format 0.2: every pack and pack index of a job, under every chunk key. */
  packsPrefix(job: string): string {
    return `jobs/${job}/packs/`;
  },
  /** Format 0.2: the packs of one chunk key. */
  packDataPrefix(job: string, keyId: string): string {
    return `jobs/${job}/packs/${keyId}/data/`;
  },
  /** Format 0.2: one pack (packId: 32 lower-case hex digits). */
  pack(job: string, keyId: string, packId: string): string {
    return `jobs/${job}/packs/${keyId}/data/${packId.slice(0, 2)}/${packId}.bin`;
  },
  /** Format 0.2: the pack indexes of one chunk key. */
  packIndexPrefix(job: string, keyId: string): string {
    return `jobs/${job}/packs/${keyId}/index/`;
  },
  /** Format 0.2: one pack index (indexId: 32 lower-case hex digits). */
  packIndex(job: string, keyId: string, indexId: string): string {
    return `jobs/${job}/packs/${keyId}/index/${indexId}.bin`;
  },
} as const;
