/** Test helpers: real keys, real archives written from real source connectors. */
import { createArchiveWriter, createChunkedWriter, loadChunkedBase, type RecordInput } from '@coffer/archive';
import { generateRecipient, generateSigner } from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { isSkipped, type SourceConfig, type SourceConnector } from '@coffer/sources';
import type { TargetResolver } from '../src/index.ts';

export interface Keys {
  signer: { publicKey: Uint8Array; secretKey: Uint8Array };
  operational: { publicKey: Uint8Array; secretKey: Uint8Array };
  breakGlass: { publicKey: Uint8Array; secretKey: Uint8Array };
}

let cached: Keys | null = null;
export function keys(): Keys {
  cached ??= { signer: generateSigner(), operational: generateRecipient(), breakGlass: generateRecipient() };
  return cached;
}

/** Metadata values the archive index accepts (as the engine's executor does). */
function scalar(m: Record<string, unknown>): Record<string, string | number | boolean | null> {
  const out: Record<string, string | number | boolean | null> = {};
  for (const [k, v] of Object.entries(m)) {
    if (v === undefined) continue;
    if (v === null || typeof v === 'string' || typeof v === 'boolean') out[k] = v;
    else if (typeof v === 'number') out[k] = Number.isFinite(v) ? v : String(v);
    else out[k] = JSON.stringify(v) ?? null;
  }
  return out;
}

/** Adds every record of `source` to `w` as the engine does (body, metadata); returns how many. */
async function addSource(
  w: { addRecord(r: RecordInput): Promise<unknown> },
  source: SourceConnector,
): Promise<number> {
  let n = 0;
  for await (const rec of source.enumerate()) {
    if (isSkipped(rec)) continue;
    await w.addRecord({
      name: rec.name,
      sourceType: rec.sourceType,
      binding: rec.binding,
      namespace: rec.namespace,
      metadata: scalar(rec.metadata),
      body: await source.read(rec.name),
    });
    n++;
  }
  return n;
}

/** Backs a source up into `store` as the engine does: every record, its metadata, job = binding. */
export async function backup(
  store: ObjectStore,
  source: SourceConnector,
  opts: { job: string; runId: string; prevRunId?: string | null; shardSize?: number; now?: () => Date },
): Promise<{ records: number }> {
  const k = keys();
  const w = await createArchiveWriter({
    store,
    job: opts.job,
    runId: opts.runId,
    prevRunId: opts.prevRunId ?? null,
    signerSecretKey: k.signer.secretKey,
    recipients: { operational: k.operational.publicKey, breakGlass: k.breakGlass.publicKey },
    source: { type: source.type, binding: source.binding, namespace: source.namespace },
    workers: 0,
    ...(opts.shardSize === undefined ? {} : { shardSize: opts.shardSize }),
    ...(opts.now === undefined ? {} : { now: opts.now }),
  });
  const n = await addSource(w, source);
  await w.finish();
  await source.close();
  return { records: n };
}

/**
 * Backs a source up as an incremental (format 0.2) run on top of `prevRunId` (its base), as the
 * engine does for an incremental job; small chunks and packs so a few files make several packs.
 */
export async function backupChunked(
  store: ObjectStore,
  source: SourceConnector,
  opts: { job: string; runId: string; prevRunId?: string | null },
): Promise<{ records: number; packIds: string[] }> {
  const k = keys();
  const prev = opts.prevRunId ?? null;
  const w = await createChunkedWriter({
    store,
    job: opts.job,
    runId: opts.runId,
    prevRunId: prev,
    base: await loadChunkedBase(store, { job: opts.job, runId: prev, secretKey: k.operational.secretKey }),
    signerSecretKey: k.signer.secretKey,
    recipients: { operational: k.operational.publicKey, breakGlass: k.breakGlass.publicKey },
    source: { type: source.type, binding: source.binding, namespace: source.namespace },
    chunking: { minSize: 2048, avgSize: 8192, maxSize: 65536 },
    packSize: 64 * 1024,
    writeRecovery: false,
    workers: 0,
  });
  const n = await addSource(w, source);
  const summary = await w.finish();
  await source.close();
  return { records: n, packIds: summary.packIds };
}

/** Writes an archive with arbitrary record names (path-escape tests). */
export async function sealNamed(
  store: ObjectStore,
  job: string,
  runId: string,
  type: string,
  binding: string,
  records: Array<{
    name: string;
    body: Uint8Array;
    metadata?: Record<string, string | number | boolean | null>;
  }>,
): Promise<void> {
  const k = keys();
  const w = await createArchiveWriter({
    store,
    job,
    runId,
    prevRunId: null,
    signerSecretKey: k.signer.secretKey,
    recipients: { operational: k.operational.publicKey, breakGlass: k.breakGlass.publicKey },
    source: { type, binding, namespace: binding },
    workers: 0,
  });
  for (const r of records) await w.addRecord({ name: r.name, body: r.body, metadata: r.metadata ?? {} });
  await w.finish();
}

export function resolverOf(map: Record<string, SourceConfig>): TargetResolver {
  return (binding) => map[binding] ?? null;
}

export function fsStore(root: string): ObjectStore {
  return createFsStore({ root });
}

export async function collect(it: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of it) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}
