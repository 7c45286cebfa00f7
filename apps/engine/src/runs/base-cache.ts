/**
 * Bases of incremental runs kept in memory from one run of a job to its next (docs/operations.md
 * "Memory"). The read-back of a 0.2 run has just read and verified the run's index and the job's
 * chunk map (every pack index), which is exactly what the job's next run opens as its base; keeping
 * them saves the next run that work (on the 1 GiB benchmark set, about a fifth of an unchanged run).
 *
 * A kept base is used once: the writer adds its run's packs to the chunk map as it commits, so the
 * base is taken out of the cache for the run and the run's own read-back puts the next one in.
 * Before use it must still describe the store: the job's pack indexes under its key are exactly
 * those it was built from (`isChunkedBaseCurrent`, one listing); a prune, a run by another engine,
 * or a pack index removed by hand makes the run load its base from the store again.
 *
 * Bounded by weight (records plus a quarter of the chunks, roughly proportional to the memory a
 * base holds: ~1 KiB per record with its index line, ~200 bytes per chunk of the map); the least
 * recently kept base goes first, and a base heavier than the whole budget is not kept (so a base
 * of a job deleted or no longer incremental stays only until newer ones push it out).
 */
import type { ChunkedBase, KnownRecords } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';

/**
 * Default budget: about 100 MiB of bases. Measured: a base of 20,000 small files (20,000 chunks,
 * weight 25,000) holds 24.6 MiB of heap, about 1 KiB per unit of weight; the 1 GiB benchmark set
 * weighs about 25,000, so four such jobs stay kept.
 */
export const BASE_CACHE_DEFAULT_WEIGHT = 100_000;

/**
 * The weight budget for `mib` MiB of bases (ENGINE_INCREMENTAL_BASE_CACHE_MIB): 1,000 units per
 * MiB, from the measured ~1 KiB per unit; undefined: the default.
 */
export function baseCacheWeightOf(mib: number | undefined): number {
  return mib === undefined ? BASE_CACHE_DEFAULT_WEIGHT : mib * 1000;
}

interface Kept {
  base: ChunkedBase;
  weight: number;
  /** The operational public key the base was opened for: a key change drops it. */
  operational: Uint8Array;
}

export class ChunkedBaseCache {
  readonly #maxWeight: number;
  readonly #kept = new Map<string, Kept>();
  readonly #storeIds = new WeakMap<ObjectStore, number>();
  #nextStore = 0;
  #weight = 0;

  constructor(maxWeight: number = BASE_CACHE_DEFAULT_WEIGHT) {
    if (!Number.isSafeInteger(maxWeight) || maxWeight < 0)
      throw new TypeError('maxWeight must be a non-negative integer');
    this.#maxWeight = maxWeight;
  }

  /** Total weight kept (records plus a quarter of the chunks). */
  get weight(): number {
    return this.#weight;
  }

  /** Bases kept. */
  get size(): number {
    return this.#kept.size;
  }

  /**
   * False when a base of `records` records could not be kept whatever its chunks (its weight is at
   * least its record count): the read-back then does not build one (for 200,000 records, two maps
   * of that many entries and the time to fill them, only to be dropped).
   */
  mayKeep(records: number): boolean {
    return records <= this.#maxWeight;
  }

  /** Keeps `base` (a verified read-back of its job's newest run) for the job's next run on `store`. */
  put(store: ObjectStore, base: ChunkedBase, operational: Uint8Array): void {
    const key = this.#key(store, base.job);
    this.#drop(key);
    const weight = base.records.size + Math.ceil(base.chunkCount / 4);
    if (weight > this.#maxWeight) return;
    while (this.#weight + weight > this.#maxWeight) this.#drop(this.#kept.keys().next().value!);
    this.#kept.set(key, { base, weight, operational: Uint8Array.from(operational) });
    this.#weight += weight;
  }

  /**
   * Takes the kept base of `job` on `store` out of the cache when it is of run `runId` and was
   * opened for the same operational key; null otherwise (anything kept for the job is dropped: the
   * job has moved on). The caller checks it with `isChunkedBaseCurrent` before use.
   */
  take(store: ObjectStore, job: string, runId: string, operational: Uint8Array): ChunkedBase | null {
    const key = this.#key(store, job);
    const kept = this.#kept.get(key);
    this.#drop(key);
    if (kept === undefined || kept.base.runId !== runId) return null;
    if (!Buffer.from(kept.operational).equals(Buffer.from(operational))) return null;
    return kept.base;
  }

  /**
   * The kept base of `job` on `store`, when it is of run `runId` and was opened for the same
   * operational key, without taking it: a restore of that run (usually "the latest") opens its
   * index with it (@coffer/restore `PlanOptions.knownRecords`), so its reader shares the records,
   * their text and (read-only, while it is current) the chunk map instead of holding a second copy
   * of each (@coffer/archive `OpenRunOptions.knownRecords`). Nothing of the base is changed: it
   * stays as it was kept for the job's next run. Null otherwise.
   */
  peek(store: ObjectStore, job: string, runId: string, operational: Uint8Array): KnownRecords | null {
    const kept = this.#kept.get(this.#key(store, job));
    if (kept === undefined || kept.base.runId !== runId) return null;
    if (!Buffer.from(kept.operational).equals(Buffer.from(operational))) return null;
    return kept.base;
  }

  #drop(key: string): void {
    const kept = this.#kept.get(key);
    if (kept === undefined) return;
    this.#kept.delete(key);
    this.#weight -= kept.weight;
  }

  #key(store: ObjectStore, job: string): string {
    let id = this.#storeIds.get(store);
    if (id === undefined) {
      id = this.#nextStore++;
      this.#storeIds.set(store, id);
    }
    return `${id}\u0000${job}`;
  }
}
