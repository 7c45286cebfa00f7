/**
 * Resuming a 0.2 run from its checkpoint (`ChunkedWriter.exportCheckpoint`): the same run id,
 * chunk key and base, and the packs the earlier attempt stored referenced rather than stored again
 * (docs/archive-format.md §12.8). Apart from chunked-writer.ts because it is a read of what an
 * earlier attempt left: the checkpoint, the base run and the job's pack indexes.
 */
import { fromBase64Url } from '@coffer/crypto';
import { loadChunkedBase } from './chunked-base.ts';
import { ChunkedRunWriter, type ChunkedWriter, type ChunkedWriterOptions } from './chunked-writer.ts';
import { ArchiveError } from './errors.ts';
import {
  CHUNKED_CHECKPOINT_FORMAT,
  type ChunkedCheckpointState,
  openCheckpoint,
} from './internal/checkpoint.ts';
import { type ChunkKeys, chunkKeys } from './internal/chunk-keys.ts';
import { loadChunkMap } from './internal/chunked-index.ts';
import { ContentChunker } from './internal/chunker.ts';
import { frameCodec } from './internal/codec-pool.ts';
import { assertRuntime } from './internal/runtime.ts';
import { headObject } from './internal/store.ts';
import { invalid, signerKeys } from './internal/writer-input.ts';
import { assertId, layout } from './layout.ts';
import type { IndexEntry, ResumeArchiveWriterOptions, ResumePoint } from './types.ts';

/**
 * Continues a 0.2 run from `exportCheckpoint()`: the same run id, chunk key and base; the caller
 * feeds every record again from the first (`resume.recordsDone` is 0), and chunks the earlier
 * attempt stored are referenced, not stored again. Throws ERR_ARCHIVE_CHECKPOINT_UNREADABLE when the
 * checkpoint does not verify with this signer or open with this operational key.
 */
export async function resumeChunkedWriter(
  checkpoint: Uint8Array,
  options: ResumeArchiveWriterOptions & { onPack?: ChunkedWriterOptions['onPack'] },
): Promise<{ writer: ChunkedWriter; resume: ResumePoint }> {
  assertRuntime();
  const signer = signerKeys(options.signerSecretKey);
  if (!(options.operationalSecretKey instanceof Uint8Array))
    throw invalid('operationalSecretKey must be a Uint8Array');
  const { state, operationalPublicKey } = await openCheckpoint<ChunkedCheckpointState>(
    checkpoint,
    options.operationalSecretKey,
    signer.secret,
    CHUNKED_CHECKPOINT_FORMAT,
  );
  let keys: ChunkKeys;
  let chunker: ContentChunker;
  try {
    assertId('job', state.job);
    assertId('runId', state.runId);
    keys = chunkKeys(new Uint8Array(fromBase64Url(state.chunkKey)));
    chunker = new ContentChunker(state.chunking);
  } catch (e) {
    throw new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', { detail: 'state malformed', cause: e });
  }
  const { store } = options;
  if ((await headObject(store, layout.manifest(state.job, state.runId))) !== null) {
    throw invalid(`run ${state.job}/${state.runId} is already sealed in this destination`);
  }
  // The base's records again (a base that no longer opens only costs reads), and the chunk map of
  // the key, which now includes the packs the earlier attempt described.
  let baseRecords: ReadonlyMap<string, IndexEntry> = new Map();
  let baseLines: ReadonlyMap<string, string> = new Map();
  if (state.baseRunId !== null) {
    const base = await loadChunkedBase(store, {
      job: state.job,
      runId: state.baseRunId,
      secretKey: options.operationalSecretKey,
      signerPublicKey: signer.public,
    }).catch(() => null);
    if (base !== null && base.keyId === keys.keyId) ({ records: baseRecords, lines: baseLines } = base);
  }
  const map = await loadChunkMap(store, state.job, keys);
  const writer = new ChunkedRunWriter({
    store,
    job: state.job,
    runId: state.runId,
    prevRunId: state.prevRunId,
    source: state.source,
    startedAt: state.startedAt,
    now: options.now ?? (() => new Date()),
    keys,
    map,
    baseRecords,
    baseLines,
    baseRunId: state.baseRunId,
    recipients: state.recipients,
    operationalPublicKey,
    signerSecretKey: signer.secret,
    signerPublicKey: signer.public,
    packSize: state.packSize,
    chunker,
    compress: state.compress,
    codec: frameCodec(options.workers),
    onPack: options.onPack,
    beforeCommit: options.beforeCommit,
    writeRecovery: options.writeRecovery ?? true,
  });
  return {
    writer,
    resume: {
      job: state.job,
      runId: state.runId,
      recordsDone: 0,
      lastRecordName: null,
      shardsDone: 0,
      partial: null,
    },
  };
}
