/**
 * What a run builds on (executor.ts): the run an unchanged source is found in (`unchangedSince`,
 * jobs with `skipUnchanged`), and the base of an incremental run on one destination
 * (`chunkedBaseFor`, jobs with `incremental: true`).
 *
 * Both only read: the state's run records, the destinations' manifests and indexes, the kept bases
 * (base-cache.ts). A base that does not open is passed over and logged; a destination's own fault
 * (throttle, unreachable) is thrown to the executor, which fails or parks that destination.
 */
import {
  type ChunkedBase,
  isArchiveError,
  isChunkedBaseCurrent,
  listRuns,
  loadChunkedBase,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { RunRecord, State } from '@coffer/state';
import type { RunJob } from '../jobs/index.ts';
import type { ChunkedBaseCache } from './base-cache.ts';
import { type RunSource, selectorOf } from './source.ts';
import {
  archiveOf,
  archivePresent,
  FINGERPRINTABLE,
  fingerprintOf,
  listingFingerprint,
} from './unchanged.ts';

/** What the two need of the executor's dependencies (ExecutorDeps has them all). */
export interface BaseDeps {
  state: Pick<State, 'runs'>;
  keys: {
    signer: { publicKey: Uint8Array };
    operational: { secretKey: Uint8Array; publicKey: Uint8Array };
  };
  destinations: ReadonlyMap<string, ObjectStore>;
  log: {
    info(obj: Record<string, unknown>, msg: string): void;
    warn(obj: Record<string, unknown>, msg: string): void;
  };
  baseCache?: ChunkedBaseCache | null;
}

/**
 * The unchanged-source check: the latest `ok` run's fingerprint equals the source's listing now,
 * and the archive holding it is present (signed by this engine, every shard at its size) on every
 * destination. Null otherwise (the run then backs up in full); never throws for a store fault.
 */
export async function unchangedSince(
  deps: BaseDeps,
  job: RunJob,
  run: RunRecord,
  source: RunSource,
  destIds: string[],
  signal: AbortSignal,
): Promise<{ prev: RunRecord; base: string; fingerprint: string } | null> {
  if (!FINGERPRINTABLE.has(source.type) || run.prevRunId === null) return null;
  const prev = await deps.state.runs.get(run.prevRunId);
  if (prev?.status !== 'ok' || prev.prunedAt !== null) return null;
  const before = fingerprintOf(prev);
  if (before === null) return null;
  const now = await listingFingerprint(source, job.source, destIds, selectorOf(job.source), signal);
  if (now !== before) return null;
  const base = archiveOf(prev);
  for (const id of destIds) {
    const store = deps.destinations.get(id);
    if (!store || !(await archivePresent(store, job.id, base, deps.keys.signer.publicKey))) return null;
  }
  return { prev, base, fingerprint: now };
}

/** Base runs tried, newest first, before an incremental run gives up and stores everything. */
const BASE_CANDIDATES = 5;

/**
 * The base of an incremental run on one destination: its newest run that the state records `ok`
 * and whose manifest and index verify (signed by this engine), opened with the operational key.
 * A base that does not open is passed over (logged); none: null, and the run stores every chunk
 * under a fresh chunk key. A destination fault (throttle, unreachable) is thrown.
 */
export async function chunkedBaseFor(
  deps: BaseDeps,
  store: ObjectStore,
  job: RunJob,
  run: RunRecord,
): Promise<ChunkedBase | null> {
  const listed = (await listRuns(store, job.id)).filter((r) => r.runId !== run.id);
  listed.sort((a, b) => (b.lastModified?.getTime() ?? 0) - (a.lastModified?.getTime() ?? 0));
  let tried = 0;
  for (const r of listed) {
    if (tried >= BASE_CANDIDATES) break;
    const rec = await deps.state.runs.get(r.runId);
    if (rec?.status !== 'ok' || rec.prunedAt !== null) continue;
    tried++;
    try {
      const kept = deps.baseCache?.take(store, job.id, r.runId, deps.keys.operational.publicKey) ?? null;
      const current = kept !== null && (await isChunkedBaseCurrent(store, kept));
      if (kept !== null) {
        deps.log.info(
          { event: 'incremental-base', job: job.id, runId: run.id, base: r.runId, kept: current },
          current
            ? `run ${run.id}: builds on ${r.runId} as its read-back left it`
            : `run ${run.id}: the pack indexes changed since ${r.runId} was read back; loading it again`,
        );
      }
      if (current) return kept;
      return await loadChunkedBase(store, {
        job: job.id,
        runId: r.runId,
        secretKey: deps.keys.operational.secretKey,
        signerPublicKey: deps.keys.signer.publicKey,
      });
    } catch (err) {
      if (isArchiveError(err) && err.code === 'ERR_ARCHIVE_DESTINATION') throw err;
      deps.log.warn(
        {
          event: 'incremental-base-skipped',
          job: job.id,
          runId: run.id,
          base: r.runId,
          code: isArchiveError(err) ? err.code : 'ERR_UNKNOWN',
        },
        `run ${run.id}: base ${r.runId} does not open; trying an older one`,
      );
    }
  }
  return null;
}
