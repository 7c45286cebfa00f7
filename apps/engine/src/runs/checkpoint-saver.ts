/**
 * The checkpoint saver of one run attempt (runs/executor.ts): after each stored shard it refreshes
 * the run's checkpoint row with every live writer's checkpoint, the failed destinations and the
 * records that vanished, so an attempt cut short resumes where its shards end.
 */
import type { HeldLease, State } from '@coffer/state';
import { encodeCheckpoint, type VanishedMark } from './checkpoint.ts';
import type { Copies } from './copies.ts';
import { classifyFailure } from './reasons.ts';

const DEFAULT_CHECKPOINT_INTERVAL_MS = 10_000;
const DEFAULT_CHECKPOINT_COST_SHARE = 0.05;

/** What the saver needs of the executor's dependencies (see ExecutorDeps for each field). */
export interface SaverDeps {
  state: State;
  log: {
    info(obj: Record<string, unknown>, msg: string): void;
    warn(obj: Record<string, unknown>, msg: string): void;
  };
  checkpointIntervalMs?: number;
  checkpointCostShare?: number;
  lease?: HeldLease;
}

/**
 * Keeps the run's checkpoint row fresh: `request()` after each stored shard (never blocks the
 * writer), at most one save in flight, at most one per interval except the first; `flush()` saves
 * now (park, shutdown). A failed save is logged and retried at the next shard: it costs only
 * resumability, never the run.
 */
export class CheckpointSaver {
  private readonly deps: SaverDeps;
  private readonly job: string;
  private readonly runId: string;
  private readonly copies: Copies;
  private readonly vanished: () => VanishedMark[];
  private last = 0;
  /** Wall time of the last save (ms). */
  private cost = 0;
  private chain: Promise<void> = Promise.resolve();
  private pending = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly shards = new Map<string, number>();

  constructor(deps: SaverDeps, job: string, runId: string, copies: Copies, vanished: () => VanishedMark[]) {
    this.deps = deps;
    this.job = job;
    this.runId = runId;
    this.copies = copies;
    this.vanished = vanished;
  }

  request(destId: string, shardsDone: number): void {
    this.shards.set(destId, Math.max(this.shards.get(destId) ?? 0, shardsDone));
    if (this.pending) return;
    this.pending = true;
    const interval = this.deps.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
    const share = this.deps.checkpointCostShare ?? DEFAULT_CHECKPOINT_COST_SHARE;
    const gap = interval === 0 ? 0 : Math.max(interval, share > 0 ? this.cost / share : 0);
    const wait = Math.max(0, this.last + gap - Date.now());
    const go = () => {
      this.timer = null;
      this.chain = this.chain.then(() => this.save());
    };
    if (wait === 0 || this.last === 0) go();
    else this.timer = setTimeout(go, wait);
  }

  async flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.pending = true;
    this.chain = this.chain.then(() => this.save());
    await this.chain;
  }

  async idle(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.pending = false;
    }
    await this.chain;
  }

  private async save(): Promise<void> {
    this.pending = false;
    const started = Date.now();
    this.last = started;
    const shards = Object.fromEntries(this.shards);
    try {
      const writers: Record<string, Uint8Array> = {};
      for (const l of this.copies.live()) writers[l.id] = await l.writer.exportCheckpoint();
      const bytes = encodeCheckpoint({
        v: 1,
        runId: this.runId,
        job: this.job,
        writers,
        failed: this.copies.failed,
        vanished: this.vanished(),
      });
      const lease = this.deps.lease;
      await this.deps.state.checkpoints.put(this.runId, this.job, bytes, lease ? { lease } : undefined);
      this.cost = Date.now() - started;
      this.deps.log.info(
        {
          event: 'run-checkpoint',
          job: this.job,
          runId: this.runId,
          shardsDone: shards,
          bytes: bytes.length,
          ms: this.cost,
        },
        `run ${this.runId}: checkpoint saved`,
      );
    } catch (err) {
      const c = classifyFailure(err);
      this.deps.log.warn(
        {
          event: 'run-checkpoint-failed',
          job: this.job,
          runId: this.runId,
          code: c.code,
          causeDigest: c.causeDigest,
        },
        `run ${this.runId}: checkpoint not saved [${c.causeDigest}]`,
      );
    }
  }
}
