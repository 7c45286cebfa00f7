/**
 * SHA-384 of record plaintexts on a thread of its own.
 *
 * Why: sealing and verifying hash every byte twice (the record's plaintext, and the stored frame),
 * and SHA-384 is most of the CPU cost. The frame hash runs in the codec workers; this service
 * takes the record hash off the calling thread too, so the calling thread only moves bytes and
 * two cores stay busy. Records are hashed in the order their ranges are submitted (one thread, a
 * FIFO queue), so a record that spans several shard buffers keeps one running hash.
 *
 * A request names a buffer (a view of a SharedArrayBuffer, read in place, never copied) and a
 * batch of operations, four numbers each: `key, start, end, flags` (flags: BEGIN starts a fresh
 * hash, PREFIX reports the digest of everything so far, END reports the digest and forgets the
 * key). The reply lists the digests asked for. Batching keeps it to one message per shard even
 * when a shard holds thousands of small records. Without workers (or when a worker cannot start)
 * the same code runs on the calling thread.
 */
import * as nodeCrypto from 'node:crypto';
import { Worker } from 'node:worker_threads';

export const BEGIN = 1;
export const END = 2;
export const PREFIX = 4;
/** Records at least this large are hashed on the record-hash thread (smaller ones inline: cheaper than a message). */
export const OFFLOAD_MIN = 512 * 1024;

export interface HashDigest {
  key: number;
  /** PREFIX or END. */
  kind: number;
  digest: Uint8Array;
}

/** The hashing core, shared by the worker (as source text) and the inline fallback. */
function hashCore(crypto: typeof nodeCrypto) {
  const open = new Map<number, nodeCrypto.Hash>();
  return function run(
    buf: Uint8Array,
    ops: number[],
  ): { keys: number[]; kinds: number[]; digests: Uint8Array } {
    const keys: number[] = [];
    const kinds: number[] = [];
    const parts: Uint8Array[] = [];
    for (let i = 0; i + 3 < ops.length; i += 4) {
      const key = ops[i]!;
      const start = ops[i + 1]!;
      const end = ops[i + 2]!;
      const flags = ops[i + 3]!;
      let h = open.get(key);
      if (h === undefined || (flags & 1) !== 0) {
        h = crypto.createHash('sha384');
        open.set(key, h);
      }
      if (end > start) h.update(buf.subarray(start, end));
      if ((flags & 4) !== 0) {
        keys.push(key);
        kinds.push(4);
        parts.push(h.copy().digest());
      }
      if ((flags & 2) !== 0) {
        keys.push(key);
        kinds.push(2);
        parts.push(h.digest());
        open.delete(key);
      }
    }
    const digests = new Uint8Array(parts.length * 48);
    for (let i = 0; i < parts.length; i++) digests.set(parts[i]!, i * 48);
    return { keys, kinds, digests };
  };
}

const WORKER_SOURCE = `'use strict';
const { parentPort } = require('node:worker_threads');
const run = (${hashCore.toString()})(require('node:crypto'));
parentPort.on('message', (msg) => {
  if (msg.forget !== undefined) return run(new Uint8Array(0), msg.forget);
  try {
    const r = run(msg.buf, msg.ops);
    parentPort.postMessage({ id: msg.id, r }, [r.digests.buffer]);
  } catch (e) {
    parentPort.postMessage({ id: msg.id, error: String((e && e.code) || 'hash failure') });
  }
});
`;

function unpack(r: { keys: number[]; kinds: number[]; digests: Uint8Array }): HashDigest[] {
  return r.keys.map((key, i) => ({
    key,
    kind: r.kinds[i]!,
    digest: r.digests.subarray(i * 48, i * 48 + 48),
  }));
}

export interface RecordHasher {
  /** Whether hashing runs on another thread (else every call completes on the calling thread). */
  readonly offThread: boolean;
  /** A key no other user of this hasher has. */
  newKey(): number;
  /**
   * Runs `ops` over `buf`. With `offThread`, `buf` must be a view of a SharedArrayBuffer and its
   * bytes in the named ranges must not change until the promise settles.
   */
  run(buf: Uint8Array, ops: number[]): Promise<HashDigest[]>;
  /** Drops the running hashes of `keys` (a record abandoned half-way). */
  forget(keys: number[]): void;
  /** Starts the thread now if it is not running, so the first request does not wait for it to boot. */
  warm(): void;
  /**
   * Whether a request would be served at once: the thread is running its code (or hashing is
   * inline). A thread that is booting (about 100 ms on the reference machine, after an idle
   * engine stopped it) would keep a writer waiting on its first ranges.
   */
  readonly ready: boolean;
}

let nextKey = 1;

class InlineHasher implements RecordHasher {
  readonly offThread: boolean = false;
  readonly ready: boolean = true;
  private readonly core = hashCore(nodeCrypto);
  warm(): void {}
  newKey(): number {
    return nextKey++;
  }
  async run(buf: Uint8Array, ops: number[]): Promise<HashDigest[]> {
    return unpack(this.core(buf, ops));
  }
  forget(keys: number[]): void {
    const ops: number[] = [];
    for (const k of keys) ops.push(k, 0, 0, BEGIN | END);
    this.core(new Uint8Array(0), ops);
  }
}

interface Pending {
  resolve(v: HashDigest[]): void;
  reject(e: unknown): void;
}

/**
 * The record-hash thread. Started on the first request rather than when a writer or reader is
 * made (a run with nothing changed never hashes off-thread, so it never starts it), and stopped by
 * `stopIdle` while no request is in flight and no record's hash is half-way; the next request
 * starts a fresh thread.
 */
class WorkerHasher implements RecordHasher {
  readonly offThread: boolean = true;
  private worker: Worker | null = null;
  /** The current thread runs its code ('online'). */
  private online = false;
  private readonly pending = new Map<number, Pending>();
  /** Keys whose running hash lives on the thread (used, not yet ended or forgotten). */
  private readonly open = new Set<number>();
  private nextId = 1;
  /** The hashing core on the calling thread, once a thread could not start. */
  private inline: ReturnType<typeof hashCore> | null = null;
  failed = false;

  private thread(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    this.online = false;
    worker.once('online', () => {
      if (this.worker === worker) this.online = true;
    });
    worker.on('message', (msg: { id: number; r?: Parameters<typeof unpack>[0]; error?: string }) => {
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (this.pending.size === 0) worker.unref();
      if (msg.r !== undefined) p.resolve(unpack(msg.r));
      else p.reject(new Error(`record hash worker: ${msg.error}`));
    });
    const stop = () => {
      // A thread stopped on purpose (stopIdle) had nothing in flight and is simply replaced.
      if (this.worker !== worker) return;
      this.failed = true;
      for (const p of this.pending.values()) p.reject(new Error('record hash worker stopped'));
      this.pending.clear();
    };
    worker.on('error', stop);
    worker.on('exit', stop);
    worker.unref();
    this.worker = worker;
    return worker;
  }

  newKey(): number {
    return nextKey++;
  }

  run(buf: Uint8Array, ops: number[]): Promise<HashDigest[]> {
    if (this.failed) return Promise.reject(new Error('record hash worker stopped'));
    if (!(buf.buffer instanceof SharedArrayBuffer))
      return Promise.reject(new TypeError('record hash worker needs a shared buffer'));
    if (this.worker === null) this.warm();
    if (this.inline !== null) {
      try {
        return Promise.resolve(unpack(this.inline(buf, ops)));
      } catch (e) {
        return Promise.reject(e);
      }
    }
    const worker = this.worker!;
    for (let i = 0; i + 3 < ops.length; i += 4) {
      if ((ops[i + 3]! & END) !== 0) this.open.delete(ops[i]!);
      else this.open.add(ops[i]!);
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ id, buf, ops });
    });
  }

  forget(keys: number[]): void {
    for (const k of keys) this.open.delete(k);
    if (this.failed || keys.length === 0) return;
    const ops: number[] = [];
    for (const k of keys) ops.push(k, 0, 0, BEGIN | END);
    if (this.inline !== null) this.inline(new Uint8Array(0), ops);
    else this.worker?.postMessage({ forget: ops });
  }

  get ready(): boolean {
    return this.inline !== null || (this.worker !== null && this.online);
  }

  warm(): void {
    if (this.worker !== null || this.inline !== null || this.failed) return;
    try {
      this.thread();
    } catch {
      // No thread can start (a resource limit): hash on this thread from now on. No hash is
      // half-way here (a thread is only replaced with none open), so nothing is lost.
      this.inline = hashCore(nodeCrypto);
    }
  }

  /** Stops the thread when it has nothing in flight and no hash half-way; true if it stopped. */
  stopIdle(): boolean {
    const worker = this.worker;
    if (worker === null || this.pending.size > 0 || this.open.size > 0) return false;
    this.worker = null;
    this.online = false;
    void worker.terminate();
    return true;
  }
}

const inline = new InlineHasher();
let shared: WorkerHasher | null = null;

/** The process's record hasher: one worker thread when `offThread`, else the inline one. */
export function recordHasher(offThread: boolean): RecordHasher {
  if (!offThread) return inline;
  if (shared === null || shared.failed) shared = new WorkerHasher();
  return shared;
}

/** Stops the record-hash thread if it is idle (see WorkerHasher); true if it stopped. */
export function stopIdleHasher(): boolean {
  return shared?.stopIdle() ?? false;
}
