/**
 * The base of an incremental (0.2) run: the previous run's chunk key and records, and the chunk map
 * of that key (docs/archive-format.md §12.8 "Writing a 0.2 run", step 1). The writer
 * (chunked-writer.ts) takes it; it lives apart because it is a read of the previous run.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { type ChunkedIndex, openChunkedIndex, unwrapChunkKey } from './chunked-reader.ts';
import { ArchiveError } from './errors.ts';
import type { ChunkKeys } from './internal/chunk-keys.ts';
import { type ChunkMap, chunkMapIsCurrent, loadChunkMap } from './internal/chunked-index.ts';
import { assertRuntime } from './internal/runtime.ts';
import { assertId } from './layout.ts';
import { readRunManifest } from './reader.ts';
import { type IndexEntry, isChunkedManifest } from './types.ts';

/**
 * What a run builds on: the job's chunk key, what its packs hold, and the previous run's records.
 * Made by `loadChunkedBase`; opaque to callers beyond these read-only facts.
 */
export interface ChunkedBase {
  /** The job the base belongs to. */
  readonly job: string;
  /** The run the records come from (null: the key and packs only). */
  readonly runId: string | null;
  /** keyId of the job's chunk key. */
  readonly keyId: string;
  /** Records of the base run by name (the last one of a name wins). */
  readonly records: ReadonlyMap<string, IndexEntry>;
  /** Chunks the job's packs hold. */
  readonly chunkCount: number;
  /** Pack indexes that did not open (reported, never trusted). */
  readonly unreadableIndexes: readonly string[];
  /**
   * @internal The base run's signed line of each record in `records` (by name): an unchanged record
   * whose fields are all equal is written with the same line instead of serializing it again.
   */
  readonly lines: ReadonlyMap<string, string>;
  /** @internal */
  readonly keys: ChunkKeys;
  /** @internal */
  readonly map: ChunkMap;
}

export interface LoadChunkedBaseOptions {
  job: string;
  /** The previous run of the job to build on; null or a 0.1 run: a fresh chunk key (a full run). */
  runId: string | null;
  /** Operational (or break-glass) secret key: the base run's chunk key is wrapped for it. */
  secretKey: Uint8Array;
  /** Trusted signer (the engine's own): the base run must be signed by it. */
  signerPublicKey?: Uint8Array;
  pinSigner?: string;
}

/**
 * Opens the base of the next run: the previous run's chunk key and records, and the chunk map of
 * its key (every pack index of the job under that key). Returns null when there is nothing to build
 * on (no previous run, or a 0.1 one). Throws the reader's errors for a base that does not verify.
 */
export async function loadChunkedBase(
  store: ObjectStore,
  options: LoadChunkedBaseOptions,
): Promise<ChunkedBase | null> {
  assertRuntime();
  assertId('job', options.job);
  if (options.runId === null) return null;
  const manifest = await readRunManifest(store, {
    job: options.job,
    runId: options.runId,
    ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
    ...(options.pinSigner === undefined ? {} : { pinSigner: options.pinSigner }),
  });
  const doc = manifest.document;
  if (!isChunkedManifest(doc)) return null;
  const keys = await unwrapChunkKey(doc, manifest.key, options.secretKey);
  const index = await openChunkedIndex(store, manifest, keys);
  return baseOf(doc.job, doc.runId, keys, index, await loadChunkMap(store, doc.job, keys));
}

/** A base from a run's opened index and its key's chunk map (loadChunkedBase, or a read-back). */
export function baseOf(
  job: string,
  runId: string,
  keys: ChunkKeys,
  index: ChunkedIndex,
  map: ChunkMap,
): ChunkedBase {
  if (index.lines === null)
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'a base needs the index opened with its lines',
    });
  const records = new Map<string, IndexEntry>();
  const lines = new Map<string, string>();
  for (let i = 0; i < index.entries.length; i++) {
    const e = index.entries[i]!;
    records.set(e.name, e);
    lines.set(e.name, index.lines[i]!);
  }
  return {
    job,
    runId,
    keyId: keys.keyId,
    records,
    lines,
    chunkCount: map.chunks.size,
    unreadableIndexes: map.unreadable,
    keys,
    map,
  };
}

/**
 * True when a base kept from earlier (`verifyRun`'s `keepBase`) still describes the store: the
 * job's pack indexes under its key are exactly those it was built from. A prune (which rewrites
 * pack indexes under new names), another run's pack index, or one deleted by hand makes it false;
 * then load the base again. One listing of the pack-index prefix; nothing is read. A base is not
 * kept across a run that used it: the run's read-back (`verifyRun` with the base as
 * `knownRecords`) extends its chunk map with the run's pack indexes, and the base it keeps shares
 * that map.
 */
export async function isChunkedBaseCurrent(store: ObjectStore, base: ChunkedBase): Promise<boolean> {
  assertRuntime();
  return chunkMapIsCurrent(store, base.job, base.map);
}
