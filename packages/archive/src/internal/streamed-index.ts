/**
 * A 0.2 run's index read in windows of records as its frames open (docs/archive-format.md §12.7
 * steps 1-4), for a full verify: the records of a 200,000-file run (about 670 bytes of heap each
 * once parsed) are never all held, only the window being read and the next one.
 *
 * What is checked, and when:
 * - before the first frame opens, as for a whole read: index.bin's size and SHA-384 against the
 *   signed manifest (readSignedIndex), so every byte of every frame is the signer's;
 * - each frame's tag, sequence number and run binding before its lines are parsed (frameLines);
 * - the header (format, job, run, record count) on the first line;
 * - once every frame opened, and before the last window is handed over: the final frame, the
 *   header's record and pack counts, and the manifest's byte, chunk and pack totals.
 * A window handed over before that is authenticated content (only the job's key holder could
 * have sealed it); a verify that reads it and then finds the index incomplete fails all the same.
 */
import type { ObjectStore } from '@coffer/objectstore';
import { ArchiveError } from '../errors.ts';
import { layout } from '../layout.ts';
import type { ChunkedManifestDocument, IndexEntry, VerifiedManifest } from '../types.ts';
import { type ChunkKeys, runIndexKey } from './chunk-keys.ts';
import { type PackRefLine, toChunkedEntry, toPackRef } from './chunked-index.ts';
import { INDEX_FORMAT } from './index-codec.ts';
import { runBinding, runTag } from './run-binding.ts';
import { frameLines } from './sealed-lines.ts';
import { readSignedIndex } from './signed-index.ts';

/**
 * Records per window of a streamed read (`recordWindows`, a full verify): about 2.7 MiB of parsed
 * records at the benchmark sets' 670 bytes a record; a few windows are held at once.
 */
export const RECORD_WINDOW = 4096;

/** ERR_ARCHIVE_INVALID_ARGUMENT unless `size` is a positive integer (a window size). */
export function checkWindowSize(size: number): void {
  if (!Number.isSafeInteger(size) || size < 1)
    throw new ArchiveError('ERR_ARCHIVE_INVALID_ARGUMENT', {
      detail: 'window size must be a positive integer',
    });
}

/** Whether `entries` come in windows (an async iterable of arrays) rather than as one array. */
export function isWindowed(
  entries: readonly IndexEntry[] | AsyncIterable<readonly IndexEntry[]>,
): entries is AsyncIterable<readonly IndexEntry[]> {
  return !Array.isArray(entries);
}

/** A 0.2 index header's counts, once checked against the manifest. */
export interface IndexHeader {
  records: number;
  packs: number;
}

/**
 * The header line's counts: ERR_ARCHIVE_INDEX_TAMPERED unless it is this run's 0.2 header,
 * ERR_ARCHIVE_INDEX_INCONSISTENT when its record count is not the manifest's.
 */
export function checkIndexHeader(value: unknown, doc: ChunkedManifestDocument, object: string): IndexHeader {
  const header = value as Record<string, unknown> | null;
  if (
    header === null ||
    typeof header !== 'object' ||
    header.format !== INDEX_FORMAT ||
    header.job !== doc.job ||
    header.runId !== doc.runId ||
    typeof header.records !== 'number' ||
    typeof header.packs !== 'number'
  ) {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'bad header' });
  }
  if (header.records !== doc.totals.records) {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', {
      object,
      detail: 'record count differs from the manifest',
    });
  }
  return { records: header.records, packs: header.packs };
}

/** JSON.parse, or ERR_ARCHIVE_INDEX_TAMPERED naming what the line was. */
export function parseIndexLine(line: string, what: string, object: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: `${what}: not JSON` });
  }
}

/**
 * The run's records in index order, in windows of `window` records (the last one may be
 * smaller), parsed without their lines; returns the pack references once the whole index was
 * judged (see the module comment).
 */
export async function* streamChunkedIndex(
  store: ObjectStore,
  manifest: VerifiedManifest,
  keys: ChunkKeys,
  window: number,
): AsyncGenerator<IndexEntry[], PackRefLine[]> {
  const doc = manifest.document as ChunkedManifestDocument;
  const object = layout.index(doc.job, doc.runId);
  const bytes = await readSignedIndex(store, doc);
  const inconsistent = (detail: string) =>
    new ArchiveError('ERR_ARCHIVE_INDEX_INCONSISTENT', { object, detail });
  let header: IndexHeader | null = null;
  let seq = 0;
  let prev: IndexEntry | null = null;
  let bytesTotal = 0;
  let chunkTotal = 0;
  let batch: IndexEntry[] = [];
  const packRefs: PackRefLine[] = [];
  const frames = frameLines(
    bytes,
    runIndexKey(keys, doc.runId),
    runBinding(doc.job, doc.runId),
    runTag(doc.job, doc.runId),
  );
  for (const lines of frames) {
    if (lines === null)
      throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'a frame does not open' });
    for (const line of lines) {
      if (header === null) {
        header = checkIndexHeader(parseIndexLine(line, 'header', object), doc, object);
      } else if (seq < header.records) {
        const e = toChunkedEntry(parseIndexLine(line, `record ${seq}`, object), seq, object, {
          line: null,
          prev,
        });
        seq++;
        bytesTotal += e.size;
        chunkTotal += e.chunks!.length;
        batch.push(e);
        prev = e;
        if (batch.length === window) {
          yield batch;
          batch = [];
        }
      } else {
        packRefs.push(toPackRef(parseIndexLine(line, 'pack reference', object), object));
      }
    }
  }
  if (header === null)
    throw new ArchiveError('ERR_ARCHIVE_INDEX_TAMPERED', { object, detail: 'a frame does not open' });
  if (seq !== header.records || packRefs.length !== header.packs)
    throw inconsistent('record count differs from the manifest');
  if (bytesTotal !== doc.totals.bytes || chunkTotal !== doc.totals.chunks)
    throw inconsistent('byte or chunk total differs from the manifest');
  if (packRefs.length !== doc.totals.packs) throw inconsistent('pack count differs from the manifest');
  if (batch.length > 0) yield batch;
  return packRefs;
}
