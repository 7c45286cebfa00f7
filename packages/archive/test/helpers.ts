/** Shared test helpers: keys, a filesystem store in a temporary directory, record builders. */
import { generateRecipient, generateSigner, type RecipientKeyPair, type SignerKeyPair } from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import {
  type ArchiveWriterOptions,
  type ChunkedWriterOptions,
  createArchiveWriter,
  type IndexEntry,
  type OpenedRun,
  type RecordInput,
  type RunSummary,
} from '../src/index.ts';
import { BEGIN, END, recordHasher } from '../src/internal/record-hash.ts';

export interface Keys {
  signer: SignerKeyPair;
  operational: RecipientKeyPair;
  breakGlass: RecipientKeyPair;
}

let cached: Keys | null = null;
export function keys(): Keys {
  cached ??= { signer: generateSigner(), operational: generateRecipient(), breakGlass: generateRecipient() };
  return cached;
}

export function fsStore(t: { teardown(fn: () => void): void }): { store: ObjectStore; root: string } {
  const root = tempDir(t, 'coffer-archive-');
  return { store: createFsStore({ root }), root };
}

export function writerOptions(
  store: ObjectStore,
  k: Keys,
  over: Partial<ArchiveWriterOptions> = {},
): ArchiveWriterOptions {
  return {
    store,
    job: 'job-a',
    runId: 'run-0001',
    prevRunId: null,
    signerSecretKey: k.signer.secretKey,
    recipients: { operational: k.operational.publicKey, breakGlass: k.breakGlass.publicKey },
    source: { type: 'files', binding: 'data', origin: '/srv/data' },
    ...over,
  };
}

/** Small chunks so a few hundred KiB exercise many chunks and packs. */
export const SMALL_CHUNKING = { minSize: 2048, avgSize: 8192, maxSize: 65536 };

/** A format 0.2 writer's options: those of `writerOptions`, small chunks and the smallest packs. */
export function chunkedOptions(
  store: ObjectStore,
  k: Keys,
  over: Partial<ChunkedWriterOptions> = {},
): ChunkedWriterOptions {
  return { ...writerOptions(store, k), chunking: SMALL_CHUNKING, packSize: 64 * 1024, ...over };
}

/** Seals `records` into one run and returns its summary. */
export async function sealRun(
  store: ObjectStore,
  k: Keys,
  records: RecordInput[],
  over: Partial<ArchiveWriterOptions> = {},
): Promise<RunSummary> {
  const w = await createArchiveWriter(writerOptions(store, k, over));
  for (const r of records) await w.addRecord(r);
  return w.finish();
}

export async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const p of it) parts.push(new Uint8Array(p));
  return Buffer.concat(parts);
}

/** Every record of an opened run, with its bytes. */
/** Every index entry of `run`, in index order. */
export async function runEntries(run: OpenedRun): Promise<IndexEntry[]> {
  const entries: IndexEntry[] = [];
  for await (const e of run.records()) entries.push(e);
  return entries;
}

export async function readAll(run: OpenedRun): Promise<{ entry: IndexEntry; body: Uint8Array }[]> {
  const out: { entry: IndexEntry; body: Uint8Array }[] = [];
  for await (const entry of run.records()) out.push({ entry, body: await collect(run.readRecord(entry)) });
  return out;
}

/** Deterministic pseudo-random bytes (xorshift32) so tests are reproducible. */
export function pseudoRandom(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

export function text(n: number, seed = 1): Uint8Array {
  const words = ['alpha', 'beta', 'gamma', 'delta', 'request', 'status=200', 'GET', '/api/v1/items', 'ms=12'];
  const parts: string[] = [];
  let len = 0;
  let i = seed;
  while (len < n) {
    const w = words[(i * 7919) % words.length]!;
    parts.push(w, i % 11 === 0 ? '\n' : ' ');
    len += w.length + 1;
    i++;
  }
  return new TextEncoder().encode(parts.join('')).subarray(0, n);
}

/**
 * Starts the record-hash thread, waits until it runs and warms it with a few requests. A writer
 * hands large records only to a running thread (one still booting would keep it waiting), so a
 * test about what happens on the thread starts it first; and a test counting the buffers a reader
 * holds while the thread hashes measures it warm, as a thread that has served a writer is (a cold
 * one's first requests take longer, and under load a verify then held 6-7 buffers instead of 5).
 */
export async function hashThreadUp(): Promise<void> {
  const hasher = recordHasher(true);
  hasher.warm();
  while (!hasher.ready) await new Promise((r) => setTimeout(r, 5));
  const buf = new Uint8Array(new SharedArrayBuffer(256 * 1024));
  for (let i = 0; i < 32; i++) await hasher.run(buf, [hasher.newKey(), 0, buf.length, BEGIN | END]);
}
