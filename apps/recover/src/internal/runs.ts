/**
 * Helpers shared by inspect, verify and extract: a key-free summary of a run's manifest (what a
 * bucket reader may see: sizes, counts, times, versions, signer), and small formatting helpers.
 *
 * Security: the raw manifest is parsed only to DISPLAY fields (as sanitised strings and numbers);
 * nothing is trusted from it until @coffer/archive has checked its version and signature.
 */
import type { ManifestDocument } from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import { oneLine } from './output.ts';

/** What inspect shows for one run, read straight from manifest.json (not yet verified). */
export interface RunSummaryView {
  job: string;
  runId: string;
  formatVersion: string | null;
  prevRunId: string | null;
  startedAt: string | null;
  sealedAt: string | null;
  signer: string | null;
  source: { type: string | null; binding: string | null; namespace: string | null; origin: string | null };
  /** 0.1: the run's shard count. 0.2: null (its data is in the job's packs). */
  shards: number | null;
  /** 0.1: bytes of the run's shards and index. 0.2: null (packs are shared with other runs). */
  storedBytes: number | null;
  records: number | null;
  bytes: number | null;
  /** 0.2 only (null for 0.1), from the signed `totals`: packs the run's chunks are in. */
  packs: number | null;
  /** 0.2 only: chunk references over all records. */
  chunks: number | null;
  /** 0.2 only: chunks this run stored (the rest were stored by earlier runs of the job). */
  newChunks: number | null;
  /** 0.2 only: plaintext bytes of those new chunks. */
  newBytes: number | null;
  /** 0.2 only: the job's chunk key id (names `jobs/<job>/packs/<keyId>/`; not secret). */
  chunkKey: string | null;
  recipients: { role: string; recipient: string }[];
}

function str(v: unknown): string | null {
  return typeof v === 'string' ? oneLine(v, 300) : null;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function obj(v: unknown): Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/** Summarises a parsed manifest document (any shape; missing fields become null). */
export function summarise(job: string, runId: string, doc: unknown): RunSummaryView {
  const d = obj(doc);
  // As isChunkedManifest: a 0.2 manifest names its chunk key and has no shards.
  const chunked = d.chunkKey !== undefined;
  const shards = Array.isArray(d.shards) ? d.shards : null;
  let stored: number | null = null;
  if (shards) {
    stored = 0;
    for (const s of shards) stored += num(obj(s).size) ?? 0;
    stored += num(obj(d.index).size) ?? 0;
  }
  const source = obj(d.source);
  const totals = obj(d.totals);
  const recipients = Array.isArray(d.recipients)
    ? d.recipients.map((r) => ({ role: str(obj(r).role) ?? '?', recipient: str(obj(r).recipient) ?? '?' }))
    : [];
  return {
    job,
    runId,
    formatVersion: str(d.formatVersion),
    prevRunId: str(d.prevRunId),
    startedAt: str(d.startedAt),
    sealedAt: str(d.sealedAt),
    signer: str(obj(d.signer).fingerprint),
    source: {
      type: str(source.type),
      binding: str(source.binding),
      namespace: str(source.namespace),
      origin: str(source.origin),
    },
    shards: shards ? shards.length : null,
    storedBytes: stored,
    records: num(totals.records),
    bytes: num(totals.bytes),
    packs: chunked ? num(totals.packs) : null,
    chunks: chunked ? num(totals.chunks) : null,
    newChunks: chunked ? num(totals.newChunks) : null,
    newBytes: chunked ? num(totals.newBytes) : null,
    chunkKey: chunked ? str(d.chunkKey) : null,
    recipients,
  };
}

/** Whether a summary is of a 0.2 (chunked) run: its data lives in packs shared by the job's runs. */
export function isChunkedView(view: RunSummaryView): boolean {
  return view.packs !== null || view.formatVersion?.startsWith('0.2.') === true;
}

/**
 * Where a run's data is, for people: "3 shards, 1.2 MiB stored" (0.1), or "2 packs referenced,
 * 5 new chunks (40.0 KiB stored by this run)" (0.2).
 */
export function storageText(view: RunSummaryView): string {
  if (isChunkedView(view)) {
    const p = view.packs;
    return `${p ?? '?'} pack${p === 1 ? '' : 's'} referenced, ${view.newChunks ?? '?'} new chunk${view.newChunks === 1 ? '' : 's'} (${size(view.newBytes)} stored by this run)`;
  }
  const s = view.shards;
  return `${s ?? '?'} shard${s === 1 ? '' : 's'}, ${size(view.storedBytes)} stored`;
}

/** Reads and parses manifest.json at `key` for display; null when unreadable or not JSON. */
export async function readRawManifest(store: ObjectStore, key: string): Promise<unknown> {
  try {
    // The archive reader's manifest ceiling: a larger object is refused before its body is read.
    const bytes = await store.get(key, undefined, { maxBytes: 64 * 1024 * 1024 });
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown;
  } catch {
    return null;
  }
}

/** Summary of a verified manifest document. */
export function summariseVerified(doc: ManifestDocument): RunSummaryView {
  return summarise(doc.job, doc.runId, doc);
}

/** "12.3 MiB" style sizes for people (exact bytes are in --json). */
export function size(n: number | null): string {
  if (n === null) return '?';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(1)} ${units[i]}`;
}

/** A record name quoted for messages: JSON string syntax, one line, bounded length. */
export function quoteName(name: string): string {
  return oneLine(JSON.stringify(name), 300);
}
