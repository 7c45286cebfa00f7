/**
 * Archive writer (format 0.1; docs/archive-format.md "Write algorithm" is normative).
 *
 * Security-relevant behaviour: a fresh random 32-byte data key per run; every shard and index
 * chunk is an AEAD frame bound to job, run, position and final flag; the data key leaves the
 * writer only wrapped for the two recipients (manifest) or sealed to the operational key and
 * signed (checkpoint); the manifest is signed only after every shard was listed back from the
 * store with its exact size (ERR_ARCHIVE_TRUNCATED otherwise) and the shard list is contiguous and
 * in order (ERR_ARCHIVE_SHARD_ID_OVERFLOW otherwise). Memory is bounded by the shard size times the
 * number of frames in flight, whatever the record or run size (the index lines, about 200 bytes per
 * record, are the only state that grows with the run).
 */
import { fromBase64Url, randomBytes } from '@coffer/crypto';
import { ArchiveError } from './errors.ts';
import { openCheckpoint } from './internal/checkpoint.ts';
import { frameCodec } from './internal/codec-pool.ts';
import { dataKeyAad, isChunkedVersion, isSupportedVersion } from './internal/manifest.ts';
import { RunWriter } from './internal/run-writer.ts';
import { assertRuntime } from './internal/runtime.ts';
import { deleteObject, headObject, listObjects } from './internal/store.ts';
import {
  checkSource,
  clampShardSize,
  invalid,
  signerKeys,
  wrapForRecipients,
} from './internal/writer-input.ts';
import { assertId, layout } from './layout.ts';
import type {
  ArchiveWriter,
  ArchiveWriterOptions,
  ResumeArchiveWriterOptions,
  ResumePoint,
} from './types.ts';

/** The header's shard number is a u32. */
const MAX_SHARDS = 0xffffffff;

/**
 * Starts a run. Returns a writer; throws ERR_ARCHIVE_INVALID_ARGUMENT for a bad job / run id,
 * key or option (or when the run is already sealed in the store), ERR_ARCHIVE_DESTINATION when the
 * store cannot be read.
 */
export async function createArchiveWriter(options: ArchiveWriterOptions): Promise<ArchiveWriter> {
  assertRuntime();
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  const { store, job, runId, prevRunId } = options;
  assertId('job', job);
  assertId('runId', runId);
  if (prevRunId !== null) assertId('prevRunId', prevRunId);
  const source = checkSource(options.source);
  const signer = signerKeys(options.signerSecretKey);
  const maxShards = options.maxShards ?? MAX_SHARDS;
  if (!Number.isSafeInteger(maxShards) || maxShards < 1 || maxShards > MAX_SHARDS)
    throw invalid('maxShards out of range');
  const shardSize = clampShardSize(options.shardSize);
  if ((await headObject(store, layout.manifest(job, runId))) !== null) {
    throw invalid(`run ${job}/${runId} is already sealed in this destination`);
  }
  const dataKey = randomBytes(32);
  const recipients = await wrapForRecipients(options.recipients, dataKey, dataKeyAad(job, runId));
  const now = options.now ?? (() => new Date());
  return new RunWriter({
    store,
    job,
    runId,
    prevRunId,
    source,
    startedAt: now().toISOString(),
    shardSize,
    compress: options.compress ?? true,
    maxShards,
    dataKey,
    recipients,
    signerSecretKey: signer.secret,
    signerPublicKey: signer.public,
    operationalPublicKey: options.recipients.operational,
    onShard: options.onShard,
    beforeCommit: options.beforeCommit,
    writeRecovery: options.writeRecovery ?? true,
    now,
    codec: frameCodec(options.workers),
  });
}

/**
 * Resumes a run from a checkpoint exported by `exportCheckpoint()`. Throws
 * ERR_ARCHIVE_CHECKPOINT_UNREADABLE when the checkpoint cannot be verified with this signer or
 * opened with this operational key, ERR_ARCHIVE_INVALID_ARGUMENT for malformed keys.
 */
export async function resumeArchiveWriter(
  checkpoint: Uint8Array,
  options: ResumeArchiveWriterOptions,
): Promise<{ writer: ArchiveWriter; resume: ResumePoint }> {
  assertRuntime();
  const signer = signerKeys(options.signerSecretKey);
  if (!(options.operationalSecretKey instanceof Uint8Array))
    throw invalid('operationalSecretKey must be a Uint8Array');
  const { state, operationalPublicKey } = await openCheckpoint(
    checkpoint,
    options.operationalSecretKey,
    signer.secret,
  );
  if (!isSupportedVersion(state.formatVersion) || isChunkedVersion(state.formatVersion)) {
    throw new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', {
      detail: 'checkpoint written by another format version',
    });
  }
  let dataKey: Uint8Array;
  try {
    assertId('job', state.job);
    assertId('runId', state.runId);
    dataKey = new Uint8Array(fromBase64Url(state.dataKey));
    if (dataKey.length !== 32 || !Array.isArray(state.shards) || !Array.isArray(state.lines))
      throw new Error('bad state');
  } catch (e) {
    throw new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', { detail: 'state malformed', cause: e });
  }
  if ((await headObject(options.store, layout.manifest(state.job, state.runId))) !== null) {
    throw invalid(`run ${state.job}/${state.runId} is already sealed in this destination`);
  }
  // Shards stored after the checkpoint by the attempt that crashed are in the way of this one's
  // create-only puts of the same numbers: they go now (the checkpoint's own are never touched).
  const kept = new Set(state.shards.map((_, i) => layout.shard(state.job, state.runId, i)));
  for (const o of await listObjects(options.store, layout.shardsPrefix(state.job, state.runId)))
    if (!kept.has(o.key)) await deleteObject(options.store, o.key);
  const now = options.now ?? (() => new Date());
  const writer = new RunWriter(
    {
      store: options.store,
      job: state.job,
      runId: state.runId,
      prevRunId: state.prevRunId,
      source: state.source,
      startedAt: state.startedAt,
      shardSize: state.shardSize,
      compress: state.compress,
      maxShards: state.maxShards,
      dataKey,
      recipients: state.recipients,
      signerSecretKey: signer.secret,
      signerPublicKey: signer.public,
      operationalPublicKey,
      onShard: options.onShard,
      beforeCommit: options.beforeCommit,
      writeRecovery: options.writeRecovery ?? true,
      now,
      codec: frameCodec(options.workers),
    },
    state,
  );
  const last = state.lines.at(-1);
  const resume: ResumePoint = {
    job: state.job,
    runId: state.runId,
    recordsDone: state.lines.length,
    lastRecordName: last === undefined ? null : (JSON.parse(last) as { name: string }).name,
    shardsDone: state.shards.length,
    partial: state.partial ? { name: state.partial.name, bytesDone: state.partial.bytesDone } : null,
  };
  return { writer, resume };
}
