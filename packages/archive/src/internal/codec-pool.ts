/**
 * Runs the frame codec (codec-core.ts) on worker threads so sealing and opening use every core:
 * the calling thread reads records and computes their plaintext SHA-384 while workers compress,
 * encrypt and hash frames. Falls back to the calling thread when workers are disabled or cannot
 * start. Workers are unref'd while idle so they never keep a process alive.
 */
import * as nodeCrypto from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import * as zlib from 'node:zlib';
import {
  type CodecCore,
  codecCore,
  type OpenFailure,
  type OpenMessage,
  type OpenResult,
  type SealMessage,
  type SealResult,
} from './codec-core.ts';

export interface FrameCodec {
  /** How many frames it processes at once (1 = on the calling thread). */
  readonly parallel: number;
  seal(m: SealMessage): Promise<SealResult>;
  open(m: OpenMessage): Promise<OpenResult>;
  /**
   * Starts its worker threads now if they are not running (each boots in ~30 ms on a thread of its
   * own), so the first seal or open does not wait for them. A writer calls it when it first has a
   * record to read, not when it is made (a run with nothing changed needs none).
   */
  warm(): void;
}

/** The codec on the calling thread. */
export const core: CodecCore = codecCore(nodeCrypto, zlib);

export const inlineCodec: FrameCodec = {
  parallel: 1,
  async seal(m) {
    return core.sealFrame(m);
  },
  async open(m) {
    return core.openFrame(m);
  },
  warm() {},
};

/**
 * The codec of the `index`-th pack of a read in which the calling thread takes a lane of its own:
 * every `lanes`-th pack opens on the calling thread, the others on `codec`'s workers (`lanes` 1:
 * `codec` only). The writer's read-back and a record stream with no record to hash do this.
 */
export function laneCodec(codec: FrameCodec, lanes: number, index: number): FrameCodec {
  return lanes > 1 && index % lanes === lanes - 1 ? inlineCodec : codec;
}

const WORKER_SOURCE = `'use strict';
const { parentPort } = require('node:worker_threads');
const core = (${codecCore.toString()})(require('node:crypto'), require('node:zlib'));
// Results written into the caller's shared buffer (\`out\`) travel back as a length only; anything
// else is transferred when it owns its whole ArrayBuffer, else copied.
function inOut(u, out) {
  return out !== null && out.buffer instanceof SharedArrayBuffer && u.buffer === out.buffer;
}
function movable(u) {
  return u.buffer instanceof ArrayBuffer && u.byteOffset === 0 && u.byteLength === u.buffer.byteLength;
}
function ship(u) {
  return movable(u) ? u : new Uint8Array(u);
}
parentPort.on('message', (msg) => {
  try {
    if (msg.op === 'seal') {
      const r = core.sealFrame(msg.m);
      const digest = new Uint8Array(r.digest);
      if (inOut(r.frame, msg.m.out)) {
        parentPort.postMessage({ id: msg.id, r: { length: r.frame.length, digest, zstd: r.zstd } });
      } else {
        const frame = ship(r.frame);
        parentPort.postMessage({ id: msg.id, r: { frame, digest, zstd: r.zstd } }, [frame.buffer]);
      }
    } else {
      const r = core.openFrame(msg.m);
      // The frame was moved here for this call: free it now rather than at this thread's next GC.
      if (msg.m.frame.buffer !== (r.ok ? r.plain.buffer : null)) core.drop(msg.m.frame);
      if (!r.ok) {
        parentPort.postMessage({ id: msg.id, r });
      } else if (inOut(r.plain, msg.m.out)) {
        parentPort.postMessage({ id: msg.id, r: { ok: true, length: r.plain.length } });
      } else {
        const plain = ship(r.plain);
        parentPort.postMessage({ id: msg.id, r: { ok: true, plain } }, [plain.buffer]);
      }
    }
  } catch (e) {
    parentPort.postMessage({ id: msg.id, error: String((e && e.code) || 'codec failure') });
  }
});
`;

/** A seal result as it crosses the thread boundary: the frame itself, or its length in `out`. */
type SealReply = { frame?: Uint8Array; length?: number; digest: Uint8Array; zstd: boolean };
type OpenReply = { ok: true; plain?: Uint8Array; length?: number } | { ok: false; failure: OpenFailure };

interface Pending {
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

interface Slot {
  worker: Worker;
  busy: number;
  pending: Map<number, Pending>;
  /** Stopped on purpose (stopIdle): its exit is not a failure. */
  stopped?: boolean;
}

/**
 * Buffers that can move to the worker without copying: large, and the view covers all of it.
 * SharedArrayBuffers (the writer's and verifier's pools) are shared, never moved; nor is a buffer
 * two of the views lie in (a frame read into the pool buffer it is opened into): that is the
 * caller's pool buffer, which must not be detached.
 */
function transferable(...views: (Uint8Array | null)[]): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const u of views) {
    if (u === null) continue;
    const b = u.buffer;
    const whole = u.byteOffset === 0 && u.byteLength === b.byteLength;
    const alone = views.every((v) => v === u || v === null || v.buffer !== b);
    if (b instanceof ArrayBuffer && whole && alone && b.byteLength >= 65536 && !out.includes(b)) out.push(b);
  }
  return out;
}

/**
 * One set of codec workers per process, grown on demand to the largest count any user asked for;
 * each user gets a view that dispatches to at most its own count of them (see frameCodec).
 */
class WorkerPool {
  private slots: Slot[] = [];
  private nextId = 1;
  private broken = false;

  private slot(limit: number): Slot | null {
    if (this.broken) return null;
    if (this.slots.length < limit) {
      try {
        const worker = new Worker(WORKER_SOURCE, { eval: true });
        const slot: Slot = { worker, busy: 0, pending: new Map() };
        worker.on('message', (msg: { id: number; r?: unknown; error?: string }) => {
          const p = slot.pending.get(msg.id);
          if (!p) return;
          slot.pending.delete(msg.id);
          slot.busy--;
          if (slot.busy === 0) worker.unref();
          if (msg.error !== undefined) p.reject(new Error(`frame codec worker: ${msg.error}`));
          else p.resolve(msg.r);
        });
        worker.on('error', () => {
          if (slot.stopped !== true) this.fail(slot);
        });
        worker.on('exit', () => {
          if (slot.stopped !== true) this.fail(slot);
        });
        worker.unref();
        this.slots.push(slot);
        return slot;
      } catch {
        this.broken = true;
        return null;
      }
    }
    let best = this.slots[0]!;
    for (let i = 1; i < limit && i < this.slots.length; i++)
      if (this.slots[i]!.busy < best.busy) best = this.slots[i]!;
    return best;
  }

  /** Stops the workers with nothing in flight; returns how many. A later call starts one again. */
  stopIdle(): number {
    const idle = this.slots.filter((s) => s.busy === 0);
    if (idle.length === 0) return 0;
    this.slots = this.slots.filter((s) => s.busy !== 0);
    for (const s of idle) {
      s.stopped = true;
      void s.worker.terminate();
    }
    return idle.length;
  }

  private fail(slot: Slot): void {
    this.slots = this.slots.filter((s) => s !== slot);
    this.broken = true;
    for (const p of slot.pending.values()) p.reject(new Error('frame codec worker stopped'));
    slot.pending.clear();
  }

  private call<T>(
    op: 'seal' | 'open',
    m: SealMessage | OpenMessage,
    transfer: ArrayBuffer[],
    limit: number,
  ): Promise<T> | null {
    const slot = this.slot(limit);
    if (!slot) return null;
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      slot.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      if (slot.busy === 0) slot.worker.ref();
      slot.busy++;
      slot.worker.postMessage({ id, op, m }, transfer);
    });
  }

  async seal(m: SealMessage, limit: number): Promise<SealResult> {
    const p = this.call<SealReply>('seal', m, transferable(m.plain, m.out), limit);
    if (p === null) return inlineCodec.seal(m);
    const r = await p;
    const frame = r.frame ?? m.out!.subarray(0, r.length);
    return { frame, digest: r.digest, zstd: r.zstd };
  }

  async open(m: OpenMessage, limit: number): Promise<OpenResult> {
    const p = this.call<OpenReply>('open', m, transferable(m.frame, m.out), limit);
    if (p === null) return inlineCodec.open(m);
    const r = await p;
    if (!r.ok) return r;
    return { ok: true, plain: r.plain ?? m.out!.subarray(0, r.length) };
  }

  view(parallel: number): FrameCodec {
    return {
      parallel,
      seal: (m) => this.seal(m, parallel),
      open: (m) => this.open(m, parallel),
      warm: () => {
        while (this.slots.length < parallel && this.slot(parallel) !== null);
      },
    };
  }
}

let pool: WorkerPool | null = null;
const views = new Map<number, FrameCodec>();

/**
 * Stops the process's codec workers that have nothing in flight and returns how many; the next
 * seal or open starts one again (tens of milliseconds). Each holds a V8 heap of its own.
 */
export function stopIdleCodecWorkers(): number {
  return pool?.stopIdle() ?? 0;
}

/**
 * Default worker count: one core fewer than the machine has (the calling thread reads, chunks or
 * hashes on the remaining one), at least 1, at most 4. Each worker is another V8 heap and malloc
 * arena, so more workers than cores only costs memory. Readers too: on 2 cores, verifying with
 * two codec workers beside the record-hash thread measured the same wall time (4.7-5.1 s per GiB
 * either way) for ~50 MiB more peak memory. COFFER_ARCHIVE_WORKERS overrides it.
 */
export function defaultWorkers(): number {
  const env = process.env.COFFER_ARCHIVE_WORKERS;
  if (env !== undefined && /^\d+$/.test(env)) return Number(env);
  return Math.min(4, Math.max(1, availableParallelism() - 1));
}

/**
 * A codec using up to `workers` threads of the process's one worker set, or the inline codec for
 * 0. Views of different counts share the workers (a caller asking for one uses the first of
 * another's two), so callers with different counts never start or stop threads for each other.
 */
export function frameCodec(workers: number | undefined): FrameCodec {
  const n = workers ?? defaultWorkers();
  if (n <= 0) return inlineCodec;
  pool ??= new WorkerPool();
  let view = views.get(n);
  if (view === undefined) {
    view = pool.view(n);
    views.set(n, view);
  }
  return view;
}
