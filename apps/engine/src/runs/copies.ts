/**
 * The copies of one run attempt: for each of the job's destinations, its state as readers see it
 * (`pending`, `writing`, `written`, `verified`, `failed`), its archive writer while it is written
 * (a lane) or its sealed copy once finished, and the failures the checkpoint must carry so a
 * resumed attempt does not try a failed destination again.
 *
 * Every stage of the executor changes destination state through this one object (never by
 * writing into shared arrays or records), so "which copies are still live" has one answer.
 */
import type { ArchiveWriter, ChunkedBase, ChunkedWriter, ResumePoint } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import type { RunDestinationState } from '@coffer/state';
import { type Classification, classifyFailure } from './reasons.ts';

export type DestinationStates = Record<string, RunDestinationState>;

/** Why a destination failed, as the checkpoint keeps it. */
export type FailedCopies = Record<string, { reason: string; causeDigest: string }>;

/** A destination whose archive writer is open. */
export interface Lane {
  id: string;
  store: ObjectStore;
  /** A 0.1 writer (checkpointed, resumable) or a 0.2 chunked writer (restarts deduplicated). */
  writer: ArchiveWriter | ChunkedWriter;
  resume: ResumePoint | null;
  /** Records this writer already holds (archive index it continues at). */
  from: number;
  /** A 0.2 writer's base: its read-back takes the records whose lines did not change from it. */
  base?: ChunkedBase | null;
  failed: boolean;
}

/** A destination whose manifest is sealed: it is read back next. */
export interface SealedCopy {
  id: string;
  store: ObjectStore;
  /** 0.2: the packs this attempt stored (read back in full; the rest are checked by listing). */
  newPacks?: readonly string[];
  /** 0.2: the base it was written on (its unchanged records are not parsed again at read-back). */
  base?: ChunkedBase;
  /** 0.2: the records it holds (a base of more than the cache could keep is not built at read-back). */
  records?: number;
}

interface CopyLog {
  error(obj: Record<string, unknown>, msg: string): void;
}

const nowIso = () => new Date().toISOString();

/** True when the error is the destination's own (store) fault rather than the source's or the run's. */
export function isDestinationFault(err: unknown): boolean {
  const e = err as { code?: unknown };
  return (
    e?.code === 'ERR_ARCHIVE_DESTINATION' ||
    (typeof e?.code === 'string' && e.code.startsWith('ERR_OBJECTSTORE_')) ||
    e?.code === 'ERR_RUN_VERIFY_FAILED'
  );
}

export class Copies {
  /** Each destination's state (the run row's `destinations`). */
  readonly states: DestinationStates = {};
  /** The failed destinations, for the checkpoint. */
  readonly failed: FailedCopies = {};
  readonly ids: readonly string[];
  #lanes: Lane[] = [];
  #live: readonly Lane[] | null = null;
  readonly #sealed: SealedCopy[] = [];
  readonly #log: CopyLog;
  readonly #job: string;
  readonly #runId: string;

  constructor(ids: readonly string[], log: CopyLog, job: string, runId: string) {
    this.ids = ids;
    this.#log = log;
    this.#job = job;
    this.#runId = runId;
    for (const id of ids) this.states[id] = { state: 'pending', updatedAt: nowIso() };
  }

  /** Replaces destination `id`'s state (`updatedAt` is set here). */
  set(id: string, state: RunDestinationState): void {
    this.states[id] = { ...state, updatedAt: nowIso() };
  }

  /** Merges `patch` into destination `id`'s state. */
  update(id: string, patch: Partial<RunDestinationState>): void {
    this.states[id] = {
      ...this.states[id],
      ...patch,
      state: patch.state ?? this.states[id]!.state,
      updatedAt: nowIso(),
    };
  }

  addLane(lane: Omit<Lane, 'failed'>): void {
    this.#lanes.push({ ...lane, failed: false });
    this.#live = null;
  }

  addSealed(copy: SealedCopy): void {
    this.#sealed.push(copy);
  }

  /**
   * The lanes whose writer has not failed: one array until a lane is added or fails (asked
   * several times per record; a fresh array each time was 12 MiB of garbage per 20,000 records).
   */
  live(): readonly Lane[] {
    this.#live ??= this.#lanes.filter((l) => !l.failed);
    return this.#live;
  }

  sealed(): readonly SealedCopy[] {
    return this.#sealed;
  }

  /** A destination failed earlier (the checkpoint says so): it stays failed, nothing is written to it. */
  failedEarlier(id: string, earlier: { reason: string; causeDigest: string }): void {
    this.set(id, { state: 'failed', reason: earlier.reason, causeDigest: earlier.causeDigest });
    this.failed[id] = earlier;
  }

  /** Records destination `id`'s failure (state, checkpoint, log line) and returns its classification. */
  fail(id: string, err: unknown): Classification {
    const c = classifyFailure(err);
    this.set(id, { state: 'failed', reason: c.reason, causeDigest: c.causeDigest });
    this.failed[id] = { reason: c.reason, causeDigest: c.causeDigest };
    this.#log.error(
      {
        event: 'run-destination-failed',
        job: this.#job,
        runId: this.#runId,
        destination: id,
        reason: c.reason,
        code: c.code,
        causeDigest: c.causeDigest,
      },
      `run ${this.#runId}: destination ${id} failed: ${c.reason} [${c.causeDigest}]`,
    );
    return c;
  }

  /**
   * A lane's writer failed: it takes no more records, its destination is recorded as failed, and
   * with `abort` its writer is stopped first (a writer whose `finish` failed has stopped itself).
   */
  async failLane(lane: Lane, err: unknown, options: { abort: boolean }): Promise<void> {
    lane.failed = true;
    this.#live = null;
    if (options.abort) await lane.writer.abort().catch(() => undefined);
    this.fail(lane.id, err);
  }

  /** Stops every open writer (park, shutdown, failure). */
  async abortAll(): Promise<void> {
    for (const l of this.#lanes) await l.writer.abort().catch(() => undefined);
  }

  /**
   * The writers are done (sealed or failed): drop them, so their index lines (about 1 KB of heap
   * per record) can be collected while the read-back holds the index it reads. A park or stop
   * from here on saves a checkpoint without writers; a resume finds the sealed manifests first.
   */
  dropLanes(): void {
    this.#lanes = [];
    this.#live = null;
  }

  /** The destinations that failed, in the job's order. */
  failedIds(): string[] {
    return this.ids.filter((id) => this.states[id]?.state === 'failed');
  }
}
