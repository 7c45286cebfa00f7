import { canonicalJsonBytes, fingerprint, toBase64Url } from '@coffer/crypto';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import {
  FORMAT_NAME,
  FORMAT_VERSION,
  type ManifestDocument,
  type ManifestShard,
  type RunSummary,
} from '../types.ts';
import { headerLine } from './index-codec.ts';
import { commitManifest } from './manifest-commit.ts';
import { type SealedIndex, sealLines } from './sealed-lines.ts';
import { deleteObject, listObjects } from './store.ts';

export type { SealedIndex };

import type { WriterConfig } from './writer-config.ts';

export interface CommitInput {
  cfg: WriterConfig;
  /** Shards sealed and stored, by number (a hole is a misordered list). */
  shards: readonly (ManifestShard | undefined)[];
  /** Number of shards sealed. */
  nextShard: number;
  /** Number of leading shards known stored. */
  durable: number;
  /** Index lines of the records, in write order. */
  lines: readonly string[];
  /** lp(job) || lp(runId). */
  binding: Uint8Array;
  runTag: Uint8Array;
  /** The record index, sealed (sealIndex). */
  index: SealedIndex;
}

/** Seals the record index (index.bin) of `lines`, on the calling thread. */
export function sealIndex(
  cfg: WriterConfig,
  lines: readonly string[],
  binding: Uint8Array,
  runTag: Uint8Array,
  salt: Uint8Array,
): SealedIndex {
  return sealLines(
    [headerLine(cfg.job, cfg.runId, lines.length), ...lines],
    cfg.dataKey,
    binding,
    runTag,
    salt,
    cfg.compress,
  );
}

/** Commits a run whose shards are all stored. Returns its summary; throws ArchiveError. */
export async function commitRun(c: CommitInput): Promise<RunSummary> {
  const { store, job, runId } = c.cfg;
  // Refuse a misordered list: exactly shards 0..n-1, each sealed once, in order.
  const n = c.nextShard;
  if (c.shards.length !== n || c.durable !== n) {
    throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', {
      detail: `shard list has ${c.shards.length} entries for ${n} shards`,
    });
  }
  const shards: ManifestShard[] = [];
  for (let i = 0; i < n; i++) {
    const s = c.shards[i];
    if (s === undefined) {
      throw new ArchiveError('ERR_ARCHIVE_SHARD_ID_OVERFLOW', { object: layout.shard(job, runId, i) });
    }
    shards.push(s);
  }

  // Refuse a truncated archive: list the shards back from the store; every one must be there with
  // its exact size. Objects beyond the list (left by an attempt before a resume) are not part of
  // the run and are removed.
  const prefix = layout.shardsPrefix(job, runId);
  const found = new Map<string, number>();
  for (const o of await listObjects(store, prefix)) found.set(o.key, o.size);
  for (let i = 0; i < n; i++) {
    const key = layout.shard(job, runId, i);
    const size = found.get(key);
    if (size !== shards[i]!.size) {
      throw new ArchiveError('ERR_ARCHIVE_TRUNCATED', {
        object: key,
        detail:
          size === undefined ? 'shard not found in the destination' : 'shard size differs in the destination',
      });
    }
    found.delete(key);
  }
  // Fencing, after the (read-only, possibly long) listing: nothing below (stray-shard removal,
  // index, signature, manifest) may run for a writer whose caller no longer owns the run, or it
  // would damage the archive its successor commits.
  await c.cfg.beforeCommit?.();
  for (const key of found.keys()) await deleteObject(store, key);

  // The record index was sealed by the caller while the last shards were stored.
  const indexSize = c.index.size;
  const indexDigest = c.index.digest;

  // The signed root manifest; manifest.json is written last and is the commit point.
  const sealedAt = c.cfg.now().toISOString();
  const signer = fingerprint(c.cfg.signerPublicKey);
  let bytes = 0;
  for (const s of shards) bytes += s.plainSize;
  const doc: ManifestDocument = {
    format: FORMAT_NAME,
    formatVersion: FORMAT_VERSION,
    job,
    runId,
    prevRunId: c.cfg.prevRunId,
    startedAt: c.cfg.startedAt,
    sealedAt,
    source: c.cfg.source,
    signer: { fingerprint: signer, publicKey: toBase64Url(c.cfg.signerPublicKey) },
    recipients: c.cfg.recipients,
    shardSize: c.cfg.shardSize,
    shards,
    index: { size: indexSize, sha384: indexDigest, chunks: c.index.chunks },
    totals: { records: c.lines.length, bytes },
  };
  const manifestBytes = canonicalJsonBytes(doc);
  const { manifestKey, manifestDigest, sigBytes } = await commitManifest({
    store,
    job,
    runId,
    formatVersion: FORMAT_VERSION,
    index: c.index,
    manifestBytes,
    signer,
    signerSecretKey: c.cfg.signerSecretKey,
    signerPublicKey: c.cfg.signerPublicKey,
    beforeCommit: c.cfg.beforeCommit,
    writeRecovery: c.cfg.writeRecovery,
  });

  let storedBytes = indexSize + manifestBytes.length + sigBytes.length;
  for (const s of shards) storedBytes += s.size;
  return {
    formatVersion: FORMAT_VERSION,
    job,
    runId,
    prevRunId: c.cfg.prevRunId,
    manifestKey,
    manifestDigest,
    signer,
    records: c.lines.length,
    bytes,
    shards: n,
    storedBytes,
    startedAt: c.cfg.startedAt,
    sealedAt,
  };
}
