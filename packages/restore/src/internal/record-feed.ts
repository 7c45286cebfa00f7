/**
 * Phase two's supply of verified records: every record is read from the store again and handed
 * over only after it verified again, in archive order: its shards' or packs' digests and tags, and
 * its SHA-384 (a 0.2 run with `checkRecordDigest: false`: every chunk's keyed id instead, which
 * names exactly the bytes whose SHA-384 phase one checked).
 *
 * - Records up to `memoryLimit` bytes come from the archive's pipelined reader
 *   (`OpenedRun.readRecords`: shards opened ahead on the codec workers, record hashes on their own
 *   thread) as views of its shard buffers, not copies; each is given back (`release`) once its
 *   write settled, which is what lets the reader reuse the buffer.
 * - With `partBytes` (a files target only), a record over that size is handed over as soon as its
 *   first part is read: its body streams the record part by part as the reader checks each
 *   chunk against its keyed id (`recordsToWrite`), and ends only once its SHA-384 matched. The files
 *   writer puts a streamed body in place only when it ended (a 0600 temporary file beside the
 *   name, renamed or linked at the end, removed on failure), so such a record shows under its
 *   name only once it verified, while memory holds a part or two of it instead of all its packs.
 * - A bigger record is streamed through `readRecord` into a 0600 file in a private 0700 directory
 *   while it verifies (memory stays bounded whatever its size), and written from that file.
 *
 * Security-relevant: a record that fails verification throws here, and never reaches a connector
 * whole; the only bytes of it a connector sees are those of a files target's streamed body, which
 * then fails with the reader's error (the writer removes its temporary file).
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type IndexEntry, type OpenedRun, type RecordToWrite, recordsToWrite } from '@coffer/archive';
import type { RecordBody } from '@coffer/sources';

/** Bodies of several pieces up to this size are joined into one buffer (the files connector writes
 * one in-memory buffer of at most 1 MiB without a thread-pool hop). */
const JOIN_MAX = 1024 * 1024;

/**
 * Records up to this size are held in memory (the archive's pipelined reader: a record is handed
 * over whole once it verified); bigger ones are staged in a 0600 file while they verify. Not for a
 * files target of a 0.2 run, which takes big records in parts (verify-records.ts PART_BYTES).
 */
export const MEMORY_STAGE = 32 * 1024 * 1024;

/** A verified record, ready for its write. */
export interface FedRecord {
  entry: IndexEntry;
  /** A fresh body for the connector (call once per write). */
  body(): RecordBody;
  /** Gives the record's memory or staging file back. Idempotent. */
  release(): Promise<void>;
}

async function* piecesOf(parts: readonly Uint8Array[]): AsyncIterable<Uint8Array> {
  for (const p of parts) yield p;
}

/**
 * The body of a record read as `pieces`. `own`: the connector may keep references to the body
 * after its write (or cannot take shared memory), so it gets a copy of its own; the files connector
 * does not need one. `copied`: the pieces are no longer needed once the body exists.
 */
function bodyOf(
  pieces: readonly Uint8Array[],
  size: number,
  own: boolean,
): { body: () => RecordBody; copied: boolean } {
  if (pieces.length === 0) {
    const empty = new Uint8Array(0);
    return { body: () => empty, copied: true };
  }
  if (!own && pieces.length === 1) {
    const only = pieces[0]!;
    return { body: () => only, copied: false };
  }
  if (own || size <= JOIN_MAX) {
    const joined = Buffer.concat(pieces, size);
    return { body: () => joined, copied: true };
  }
  return { body: () => piecesOf(pieces) as RecordBody, copied: false };
}

/** Temporary files for records too big to hold in memory. */
export class FileStager {
  #dir: string | null = null;
  readonly #base: string;
  constructor(base: string) {
    this.#base = base;
  }

  /** Streams the record through the reader's checks into a file; resolves once its digest matched. */
  async stage(run: OpenedRun, entry: IndexEntry): Promise<FedRecord> {
    this.#dir ??= await mkdtemp(join(this.#base, 'coffer-restore-'));
    const path = join(this.#dir, randomBytes(12).toString('hex'));
    const file = await open(path, 'wx', 0o600);
    try {
      for await (const piece of run.readRecord(entry)) await file.write(piece);
      await file.close();
    } catch (e) {
      await file.close().catch(() => undefined);
      await rm(path, { force: true });
      throw e;
    }
    return {
      entry,
      body: () => createReadStream(path, { highWaterMark: 256 * 1024 }) as AsyncIterable<Uint8Array>,
      release: () => rm(path, { force: true }),
    };
  }

  async close(): Promise<void> {
    if (this.#dir !== null) await rm(this.#dir, { recursive: true, force: true });
  }
}

/**
 * Yields `entries` (archive order) as verified records (with `partBytes`, a big one as a body
 * streaming its parts, which fails instead of ending when the record does not verify). Throws the
 * archive's error for the first record that does not verify (ERR_ARCHIVE_*); every record before it
 * was yielded. `fed()` counts the records fed whole so far (the failing record is `entries[fed()]`).
 */
export function feedRecords(
  run: OpenedRun,
  entries: readonly IndexEntry[],
  options: {
    memoryLimit: number;
    stager: FileStager;
    ownBodies: boolean;
    partBytes?: number;
    /** False: a 0.2 run's records are checked by their chunks' keyed ids only (phase one hashed them). */
    checkRecordDigest?: boolean;
  },
): { records: AsyncIterable<FedRecord>; fed: () => number } {
  let fed = 0;
  // The last record yielded: one whose parts are still coming is not fed yet.
  let last: RecordToWrite | null = null;
  const interrupted = () => new Error('the record was not read to its end');
  async function* records(): AsyncGenerator<FedRecord> {
    const read = {
      maxRecordBytes: options.memoryLimit,
      ...(options.partBytes === undefined ? {} : { partBytes: options.partBytes }),
      ...(options.checkRecordDigest === false ? { checkRecordDigest: false } : {}),
    };
    for (let i = 0; i < entries.length; ) {
      if (entries[i]!.size > options.memoryLimit) {
        last = null;
        yield await options.stager.stage(run, entries[i]!);
        fed++;
        i++;
        continue;
      }
      let end = i;
      while (end < entries.length && entries[end]!.size <= options.memoryLimit) end++;
      for await (const rec of recordsToWrite(run.readRecords(entries.slice(i, end), read), { interrupted })) {
        last = rec;
        const release = async () => rec.release();
        if (rec.parts !== null) {
          const parts = rec.parts;
          yield { entry: rec.entry, body: () => parts.body(), release };
        } else {
          const { body, copied } = bodyOf(rec.pieces!, rec.entry.size, options.ownBodies);
          if (copied) rec.release();
          yield { entry: rec.entry, body, release };
        }
        fed++;
      }
      i = end;
    }
  }
  const unfinished = () => (last?.parts != null && !last.parts.complete ? 1 : 0);
  return { records: records(), fed: () => fed - unfinished() };
}
