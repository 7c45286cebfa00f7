/**
 * Writer checkpoints (docs/archive-format.md "Checkpoint"). A checkpoint carries the run's data
 * key, so it is sealed to the operational recipient (hybrid seal) and the capsule is signed by the
 * run's signer, so a party that can write the engine's state but holds no signer key cannot plant
 * a checkpoint with a data key of its choosing:
 *
 *   checkpoint = "CFCP"(4) || major(1)=0 || minor(1)=1 || reserved(2)=0 || sigLength(u32 BE)
 *                || signature(sigLength) || capsule
 *   capsule    = seal(operationalPublicKey, canonicalJson(state), "coffer/archive/v0.1/checkpoint")
 *   signature  = sign(signerSecretKey, capsule, "coffer/archive/checkpoint/v0.1")
 *
 * Any failure to verify or open gives ERR_ARCHIVE_CHECKPOINT_UNREADABLE ("checkpoint unwrap failed
 * (resume state unreadable; signer may have rotated)").
 */
import {
  canonicalJsonBytes,
  open,
  recipientPublicKeyFromSecret,
  seal,
  sign,
  signerPublicKeyFromSecret,
  verify,
} from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import type { ArchiveSource, ManifestRecipient, ManifestShard } from '../types.ts';
import { concatBytes, readU32, utf8, writeU32 } from './bytes.ts';

const MAGIC = utf8('CFCP');
const SEAL_AAD = utf8('coffer/archive/v0.1/checkpoint');
const SIGN_CONTEXT = 'coffer/archive/checkpoint/v0.1';
export const CHECKPOINT_FORMAT = 'coffer-archive-checkpoint';

export interface CheckpointPartial {
  name: string;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: Record<string, string | number | boolean | null>;
  shard: number;
  offset: number;
  bytesDone: number;
  /** SHA-384 of the record's first bytesDone bytes (hex). */
  prefixSha384: string;
}

export interface CheckpointState {
  format: typeof CHECKPOINT_FORMAT;
  formatVersion: string;
  job: string;
  runId: string;
  prevRunId: string | null;
  source: ArchiveSource;
  startedAt: string;
  shardSize: number;
  compress: boolean;
  maxShards: number;
  /** base64url. */
  dataKey: string;
  recipients: ManifestRecipient[];
  shards: ManifestShard[];
  /** Index lines of the records completed within `shards`. */
  lines: string[];
  partial: CheckpointPartial | null;
}

/** The state of a format 0.2 (chunked) writer: its chunk key and base, never record lines. */
export interface ChunkedCheckpointState {
  format: typeof CHUNKED_CHECKPOINT_FORMAT;
  formatVersion: string;
  job: string;
  runId: string;
  prevRunId: string | null;
  source: ArchiveSource;
  startedAt: string;
  /** base64url of the job's chunk key (the reason the state is sealed). */
  chunkKey: string;
  /** The run the writer was built on (its records are taken unread again on resume), or null. */
  baseRunId: string | null;
  /** The chunk key wrapped for the recipients, as the manifest will carry it. */
  recipients: ManifestRecipient[];
  packSize: number;
  chunking: { minSize: number; avgSize: number; maxSize: number };
  compress: boolean;
}

export const CHUNKED_CHECKPOINT_FORMAT = 'coffer-chunked-checkpoint';

/** True when `bytes` is a format 0.2 (chunked) writer checkpoint: header minor 2 (0.1 writes 1). */
export function isChunkedCheckpoint(bytes: Uint8Array): boolean {
  return (
    bytes instanceof Uint8Array &&
    bytes.length >= 12 &&
    MAGIC.every((b, i) => bytes[i] === b) &&
    bytes[5] === 2
  );
}

export async function sealCheckpoint(
  state: CheckpointState | ChunkedCheckpointState,
  operationalPublicKey: Uint8Array,
  signerSecretKey: Uint8Array,
): Promise<Uint8Array> {
  const capsule = await seal(operationalPublicKey, canonicalJsonBytes(state), SEAL_AAD);
  const sig = sign(signerSecretKey, capsule, SIGN_CONTEXT);
  const head = new Uint8Array(12);
  head.set(MAGIC, 0);
  head[4] = 0;
  head[5] = state.format === CHUNKED_CHECKPOINT_FORMAT ? 2 : 1;
  writeU32(head, 8, sig.length);
  return concatBytes(head, sig, capsule);
}

function unreadable(detail: string, cause?: unknown): ArchiveError {
  return new ArchiveError('ERR_ARCHIVE_CHECKPOINT_UNREADABLE', { detail, ...(cause ? { cause } : {}) });
}

export async function openCheckpoint<S extends { format: string } = CheckpointState>(
  bytes: Uint8Array,
  operationalSecretKey: Uint8Array,
  signerSecretKey: Uint8Array,
  format: S['format'] = CHECKPOINT_FORMAT,
): Promise<{ state: S; operationalPublicKey: Uint8Array }> {
  if (!(bytes instanceof Uint8Array) || bytes.length < 12) throw unreadable('too short');
  for (let i = 0; i < 4; i++) if (bytes[i] !== MAGIC[i]) throw unreadable('not a checkpoint');
  const minor = format === CHUNKED_CHECKPOINT_FORMAT ? 2 : 1;
  if (bytes[4] !== 0 || bytes[5] !== minor) throw unreadable('unsupported checkpoint version');
  const sigLength = readU32(bytes, 8);
  if (12 + sigLength >= bytes.length) throw unreadable('truncated');
  const sig = bytes.subarray(12, 12 + sigLength);
  const capsule = bytes.subarray(12 + sigLength);
  let signerPublicKey: Uint8Array;
  let operationalPublicKey: Uint8Array;
  try {
    signerPublicKey = signerPublicKeyFromSecret(signerSecretKey);
    operationalPublicKey = recipientPublicKeyFromSecret(operationalSecretKey);
  } catch (e) {
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'malformed signer or operational secret key',
      cause: e,
    });
  }
  let ok = false;
  try {
    ok = verify(signerPublicKey, capsule, sig, SIGN_CONTEXT);
  } catch (e) {
    throw unreadable('signature check failed', e);
  }
  if (!ok) throw unreadable('not signed by this signer');
  let plain: Uint8Array;
  try {
    plain = await open(operationalSecretKey, capsule, SEAL_AAD);
  } catch (e) {
    throw unreadable('cannot be opened with this operational key', e);
  }
  let state: S;
  try {
    state = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(plain)) as S;
  } catch (e) {
    throw unreadable('state malformed', e);
  }
  if (state?.format !== format) throw unreadable('state malformed');
  return { state, operationalPublicKey };
}
