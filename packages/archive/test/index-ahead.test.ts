/**
 * A 0.2 run index of several frames is sealed as it fills (internal/index-sealer.ts):
 * the header alone in frame 0, then the frames sealed ahead, then the rest, the last final. The
 * run reads back and verifies with either key; a small index keeps the one-piece layout; a writer
 * stopped with frames sealed ahead stores no index.
 */
import { readdirSync } from 'node:fs';
import t from 'tap';
import { openChunkedIndex } from '../src/chunked-reader.ts';
import { createChunkedWriter, loadChunkedBase, openRun, type RecordInput, verifyRun } from '../src/index.ts';
import { runIndexKey } from '../src/internal/chunk-keys.ts';
import { runBinding, runTag } from '../src/internal/run-binding.ts';
import { openLines } from '../src/internal/sealed-lines.ts';
import { chunkedOptions, fsStore, keys, readAll, text } from './helpers.ts';

/** Records whose index lines are ~50 KB each (metadata), so 60 of them fill three frames. */
const wide = (n: number, edit = 0): RecordInput[] =>
  Array.from({ length: n }, (_, i) => ({
    name: `r/${String(i).padStart(3, '0')}`,
    body: text(300 + i, i + edit),
    change: `c${i}-${edit}`,
    metadata: { note: `${i}`.padEnd(50_000, 'x') },
  }));

async function frameLines(store: Parameters<typeof openRun>[0], k: ReturnType<typeof keys>, runId: string) {
  const base = await loadChunkedBase(store, {
    job: 'job-a',
    runId,
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  });
  const run = await openRun(store, { job: 'job-a', runId, secretKey: k.operational.secretKey });
  const doc = run.manifest.document as { index: { chunks: number }; job: string; runId: string };
  // Frame by frame: the stored size of each.
  const bytes = Buffer.from(await store.get(`jobs/job-a/runs/${runId}/index.bin`));
  const perFrame: number[] = [];
  for (let o = 0; o < bytes.length; ) {
    const end = o + 32 + bytes.readUInt32BE(o + 16) + 16;
    perFrame.push(end - o);
    o = end;
  }
  const lines = openLines(
    bytes,
    runIndexKey(base!.keys, runId),
    runBinding('job-a', runId),
    runTag('job-a', runId),
  );
  return { base: base!, run, doc, perFrame, lines: lines! };
}

t.test('an index of several frames: header alone first, frames sealed ahead, reads back', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w = await createChunkedWriter(chunkedOptions(store, k));
  const records = wide(60);
  for (const r of records) await w.addRecord(r);
  const summary = await w.finish();
  t.equal(summary.records, 60);
  const { doc, perFrame, lines, run, base } = await frameLines(store, k, 'run-0001');
  t.ok(doc.index.chunks >= 3, `${doc.index.chunks} frames`);
  t.equal(perFrame.length, doc.index.chunks);
  t.ok(perFrame[0]! < 1024, 'frame 0 holds the header alone');
  for (const size of perFrame) t.ok(size <= 1024 * 1024 + 48, 'at most 1 MiB of lines per frame');
  t.equal(lines.length, 1 + 60 + summary.shards, 'header, records, pack references');
  t.match(JSON.parse(lines[0]!), { records: 60, packs: summary.shards });
  const index = await openChunkedIndex(store, run.manifest, base.keys);
  t.same(
    index.entries.map((e) => e.name),
    records.map((r) => r.name),
    'records in order',
  );
  const got = await readAll(run);
  t.ok(
    got.every((g, i) => Buffer.from(g.body).equals(Buffer.from(records[i]!.body as Uint8Array))),
    'every record reads back',
  );
  for (const secretKey of [k.operational.secretKey, k.breakGlass.secretKey]) {
    const v = await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey });
    t.ok(v.ok, 'verifies');
    t.equal(v.checks.records, 60);
  }
  // The next run on it: unchanged records taken unread, its own index sealed ahead too.
  const w2 = await createChunkedWriter(
    chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base }),
  );
  for (const r of wide(60)) t.not(w2.addUnchanged(r), null);
  const s2 = await w2.finish();
  t.equal(s2.unchangedRecords, 60);
  const v2 = await verifyRun(store, {
    job: 'job-a',
    runId: 'run-0002',
    secretKey: k.operational.secretKey,
    knownRecords: base,
  });
  t.ok(v2.ok);
});

t.test('a small index keeps its one-piece layout (header and lines in frame 0)', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const w = await createChunkedWriter(chunkedOptions(store, k));
  for (const r of wide(3)) await w.addRecord(r);
  await w.finish();
  const { doc, lines } = await frameLines(store, k, 'run-0001');
  t.equal(doc.index.chunks, 1);
  t.equal(lines.length >= 4, true);
});

t.test('a writer stopped with frames sealed ahead stores no index', async (t) => {
  const { store, root: dir } = fsStore(t);
  const k = keys();
  const w = await createChunkedWriter(chunkedOptions(store, k));
  for (const r of wide(45)) await w.addRecord(r);
  await w.abort();
  t.equal(await store.head('jobs/job-a/runs/run-0001/index.bin'), null);
  t.notOk(
    readdirSync(dir, { recursive: true }).some((f) => String(f).endsWith('manifest.json')),
    'no manifest',
  );
});
