/**
 * Unchanged-source runs (the job option `skipUnchanged`, default false; docs/runs.md "Unchanged
 * sources").
 *
 * A source fingerprint is SHA-384 over the job's source object, its destination list and, for
 * every listed entry in enumeration order, the name, size and the connector's per-record change
 * metadata (files: permission bits, mtime to the sub-millisecond, owner; s3: ETag and
 * last-modified), plus every skipped entry. Every full run of a job with `skipUnchanged` that ends
 * `ok` with no record vanished records the fingerprint of the listing it backed up. A run of a job with `skipUnchanged: true`
 * lists the source first (no record is read); when the fingerprint equals the latest `ok` run's
 * and that run's archive (or the archive it points to) is still on every destination with a
 * manifest signed by this engine's signer and every shard present at its sealed size, the run is
 * recorded `ok` with `unchangedFrom` naming that archive, and no new archive is written.
 * Otherwise the run backs the source up in full, as always.
 *
 * Only source types whose listing carries a change indicator qualify (`files`, `s3`); `sqlite`
 * and `redis` always run in full: a database's file size and mtime do not prove its content, and
 * redis keys carry no version.
 *
 * Security-relevant behaviour: the fingerprint is a one-way digest (no record name is stored);
 * an archive is only reused when its manifest verifies under the engine's own signer, so a planted
 * or tampered manifest is never adopted.
 */
import { createHash, type Hash } from 'node:crypto';
import { isChunkedManifest, layout, readRunManifest } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { RunRecord } from '@coffer/state';
import {
  isSkippedEntry,
  type JobSource,
  type RunSource,
  type RunSourceRecord,
  type RunSourceSkipped,
} from './source.ts';

/** Source types whose listing shows a change without reading the records. */
export const FINGERPRINTABLE = new Set(['files', 's3']);

/** Accumulates a source fingerprint over enumeration entries (in order). */
export class SourceFingerprint {
  private readonly h: Hash = createHash('sha384');

  constructor(source: JobSource, destinations: string[]) {
    this.h.update(`coffer-source-fingerprint/v1\n${JSON.stringify([source, destinations])}\n`);
  }

  add(entry: RunSourceRecord | RunSourceSkipped): void {
    this.h.update(
      isSkippedEntry(entry)
        ? `${JSON.stringify(['skipped', entry.name, entry.reason])}\n`
        : `${JSON.stringify([entry.name, entry.size, entry.metadata])}\n`,
    );
  }

  digest(): string {
    return `sha384:${this.h.digest('hex')}`;
  }
}

/** The fingerprint a finished run recorded, or null. */
export function fingerprintOf(run: RunRecord): string | null {
  const v = (run.detail as { sourceFingerprint?: unknown }).sourceFingerprint;
  return typeof v === 'string' ? v : null;
}

/** The archive that holds an `ok` run's data: its own, or the one it was found unchanged from. */
export function archiveOf(run: RunRecord): string {
  const v = (run.detail as { unchangedFrom?: unknown }).unchangedFrom;
  return typeof v === 'string' ? v : run.id;
}

/** Most `unchangedFrom` links followed (the engine records one, to a sealing run; older data may chain). */
const CHAIN_MAX = 64;

/**
 * The id of the run whose archive holds `run`'s data: `run.id` for a run that sealed its own,
 * else its `unchangedFrom`, followed while the run it names is itself recorded unchanged (a run
 * no longer in the history ring ends the walk: its archive is what the link names). A loop ends
 * the walk at the first repeated id.
 */
export async function archiveRunOf(
  runs: { get(id: string): Promise<RunRecord | null> },
  run: RunRecord,
): Promise<string> {
  let id = archiveOf(run);
  const seen = new Set([run.id]);
  for (let hops = 0; hops < CHAIN_MAX && !seen.has(id); hops++) {
    seen.add(id);
    const next = await runs.get(id);
    if (next === null || archiveOf(next) === next.id) break;
    id = archiveOf(next);
  }
  return id;
}

/** Lists the whole source (no record is read) and returns its fingerprint; null when aborted. */
export async function listingFingerprint(
  source: RunSource,
  jobSource: JobSource,
  destinations: string[],
  selected: (name: string) => boolean,
  signal: AbortSignal,
): Promise<string | null> {
  const fp = new SourceFingerprint(jobSource, destinations);
  for await (const entry of source.enumerate()) {
    if (signal.aborted) return null;
    if (!isSkippedEntry(entry) && !selected(entry.name)) continue;
    fp.add(entry);
  }
  return fp.digest();
}

/**
 * True when the run `runId` of `job` is sealed in `store` by the signer `signerPublicKey` and
 * every shard its manifest lists is present at its sealed size. Never throws (false).
 */
export async function archivePresent(
  store: ObjectStore,
  job: string,
  runId: string,
  signerPublicKey: Uint8Array,
): Promise<boolean> {
  try {
    const manifest = await readRunManifest(store, { job, runId, signerPublicKey });
    const sizes = new Map<string, number>();
    for await (const o of store.listAll(layout.shardsPrefix(job, runId))) sizes.set(o.key, o.size);
    const doc = manifest.document;
    // A 0.2 run owns only its index (its chunks are in the job's packs, checked on read-back).
    if (isChunkedManifest(doc)) return (await store.head(layout.index(job, runId)))?.size === doc.index.size;
    return doc.shards.every((s, i) => sizes.get(layout.shard(job, runId, i)) === s.size);
  } catch {
    return false;
  }
}
