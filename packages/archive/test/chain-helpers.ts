/**
 * Shared by the tests of a job's run chain (prune.test.ts, keep-base.test.ts, known-map.test.ts,
 * lent-map.test.ts): one job, runs each built on the one before, prune options with a clock past
 * every grace period.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ObjectStore } from '@coffer/objectstore';
import {
  type ChunkedPruneRunOptions,
  createChunkedWriter,
  loadChunkedBase,
  type RecordInput,
} from '../src/index.ts';
import { chunkedOptions, type Keys, pseudoRandom, text } from './helpers.ts';

export const JOB = 'job-a';
/** A clock a month ahead: everything the test wrote is older than the grace period. */
export const LATER = () => new Date(Date.now() + 30 * 24 * 3600_000);

/** Eight small records and a 300 KiB one; `edit` changes one small record and the big one. */
export const editedRecords = (edit: number): RecordInput[] => [
  ...Array.from({ length: 8 }, (_, i) => ({
    name: `small/${i}`,
    body: text(2000 + i, i + (i === 2 ? edit : 0)),
    change: `c${i}-${i === 2 ? edit : 0}`,
  })),
  { name: 'z-big', body: pseudoRandom(300 * 1024, 5 + edit), change: `big-${edit}` },
];

/** A job's pack index object (its key under `packs/<keyId>/index/`). */
export const isPackIndex = (key: string) => key.includes('/packs/') && key.includes('/index/');

/** Writes one run on top of `prev` (its base), returning the ids of the packs it stored. */
export async function writeRun(
  store: ObjectStore,
  k: Keys,
  runId: string,
  prev: string | null,
  records: RecordInput[],
): Promise<string[]> {
  const base = await loadChunkedBase(store, { job: JOB, runId: prev, secretKey: k.operational.secretKey });
  const w = await createChunkedWriter(
    chunkedOptions(store, k, { runId, prevRunId: prev, base, writeRecovery: false }),
  );
  for (const r of records) await w.addRecord(r);
  return (await w.finish()).packIds;
}

export function pruneOptions(k: Keys, over: Partial<ChunkedPruneRunOptions> = {}): ChunkedPruneRunOptions {
  return {
    job: JOB,
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
    now: LATER,
    ...over,
  };
}

export function deleteRun(root: string, runId: string): void {
  rmSync(join(root, 'jobs', JOB, 'runs', runId), { recursive: true });
}
