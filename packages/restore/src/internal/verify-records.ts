/**
 * Reading planned records through every check without writing them: phase one of an apply of part
 * of a run (apply.ts), and the dry run's and the verify route's read of every planned record
 * (plan.ts). Through the archive's pipelined reader (`readRecords`: packs opened ahead on the codec
 * workers, record hashes on their own thread), not record by record: on the 1 GiB set a dry run's
 * read of every record took 8.1-10.8 s one record at a time, 3.8-5.2 s through it.
 */
import { type IndexEntry, isChunkedManifest, type OpenedRun } from '@coffer/archive';

/**
 * A files target takes a record over this size in parts as the reader checks its chunks (a body
 * that ends only once the record's SHA-384 matched, written to a temporary file put in place at
 * its end): memory holds a part or two instead of every pack the record spans. A verify-only read
 * takes them in parts too, releasing each at once.
 */
export const PART_BYTES = 4 * 1024 * 1024;
/**
 * A verify-only read takes a 0.1 run's records up to this size through the pipelined reader (a 0.2
 * run's of any size, in parts); a bigger 0.1 record is read on its own through `readRecord`.
 */
const PIPELINE_MAX = 64 * 1024 * 1024;

/**
 * Verifies `records` (in index order) from index `from` on through the archive's pipelined reader
 * (a 0.1 run's record over PIPELINE_MAX on its own through `readRecord`; a 0.2 run's of any size,
 * in parts released at once, counted once its last part came). Stops after the record being
 * verified when `cancelled()`. Returns how many records of `records` are verified
 * (the failing one, if any, is `records[verified]`) and the reader's error instead of throwing it.
 */
export async function verifyRecords(
  run: OpenedRun,
  records: readonly IndexEntry[],
  from: number,
  hooks: { cancelled: () => boolean; onVerified: (verified: number) => void },
): Promise<{ verified: number; stopped: boolean; error?: unknown }> {
  let at = from;
  const inParts = isChunkedManifest(run.manifest.document);
  const pipelineMax = inParts ? Number.POSITIVE_INFINITY : PIPELINE_MAX;
  try {
    while (at < records.length) {
      if (records[at]!.size > pipelineMax) {
        for await (const _ of run.readRecord(records[at]!)) void _;
        at++;
        if (hooks.cancelled()) return { verified: at, stopped: true };
        continue;
      }
      let end = at;
      while (end < records.length && records[end]!.size <= pipelineMax) end++;
      const read = inParts ? { partBytes: PART_BYTES } : { maxRecordBytes: PIPELINE_MAX };
      for await (const r of run.readRecords(records.slice(at, end), read)) {
        r.release();
        if (r.part?.last === false) continue; // verified once its last part came
        at++;
        hooks.onVerified(at);
        if (hooks.cancelled()) return { verified: at, stopped: true };
      }
    }
  } catch (error) {
    return { verified: at, stopped: false, error };
  }
  return { verified: at, stopped: false };
}
