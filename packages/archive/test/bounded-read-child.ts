/**
 * Child process of bounded-reads.test.ts: reads one run of a store that holds a hostile object
 * and prints, as one JSON line, the error code of each way in (verify, open, the record index, the
 * first record's bytes read alone and in a pipeline). The parent starts it with a small heap and a capped address space, so reading
 * a hostile object whole crashes it instead of passing.
 * argv: store (JSON: { root } or an S3 store's options), job, runId; env BOUNDED_SECRET_KEY
 * (base64url recipient secret key).
 */
import { fromBase64Url } from '@coffer/crypto';
import { createFsStore, createS3Store, type S3StoreOptions } from '@coffer/objectstore';
import { openRun, verifyRun } from '../src/index.ts';

const [spec, job, runId] = process.argv.slice(2) as [string, string, string];
const where = JSON.parse(spec) as { root: string } | S3StoreOptions;
const store = 'root' in where ? createFsStore({ root: where.root }) : createS3Store(where);
const secretKey = fromBase64Url(process.env.BOUNDED_SECRET_KEY!);
const codeOf = (e: unknown) => String((e as { code?: unknown }).code ?? (e as Error).message);

const out: Record<string, string | null> = {};
const verdict = await verifyRun(store, { job, runId, secretKey, workers: 1 });
out.verify = verdict.ok ? null : verdict.failure!.code;
try {
  const run = await openRun(store, { job, runId, secretKey, workers: 1 });
  const entries = [];
  try {
    for await (const e of run.records()) entries.push(e);
    out.index = null;
  } catch (e) {
    out.index = codeOf(e);
  }
  if (entries.length > 0) {
    try {
      for await (const _ of run.readRecord(entries[0]!));
      out.record = null;
    } catch (e) {
      out.record = codeOf(e);
    }
    try {
      for await (const r of run.readRecords(entries.slice(0, 1))) r.release();
      out.records = null;
    } catch (e) {
      out.records = codeOf(e);
    }
  }
} catch (e) {
  out.open = codeOf(e);
}
// maxRSS is in KiB.
out.maxRssMiB = String(Math.round(process.resourceUsage().maxRSS / 1024));
process.stdout.write(`${JSON.stringify(out)}\n`);
