/**
 * A full verify of a 0.2 run streams its index (internal/streamed-index.ts): records are read in
 * windows as the index frames open, and the index is judged whole (final frame, counts, totals)
 * before the last window is read. Small windows here stand for the 4,096-record windows of a
 * real run, so that every step crosses several window ends: the verdicts and checks are those of
 * a verify that loaded the whole index first (an opened run whose records were listed), a pack
 * holding several windows' records is opened once, and an index that is authentic but not whole
 * or not well formed fails with the same code on both paths.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJsonBytes, formatDigest, sha384, sign, toBase64Url } from '@coffer/crypto';
import type { ObjectStore } from '@coffer/objectstore';
import { countReads } from '@coffer/testkit';
import t from 'tap';
import { ChunkedRunReader, unwrapChunkKey } from '../src/chunked-reader.ts';
import {
  createChunkedWriter,
  layout,
  loadChunkedBase,
  openRun,
  type RecordInput,
  readRunManifest,
  type VerifyVerdict,
  verifyRun,
} from '../src/index.ts';
import { runIndexKey } from '../src/internal/chunk-keys.ts';
import { MANIFEST_SIGNATURE_CONTEXT } from '../src/internal/manifest.ts';
import { runBinding, runTag, sessionSalt } from '../src/internal/run-binding.ts';
import { openLines, sealLines } from '../src/internal/sealed-lines.ts';
import { streamChunkedIndex } from '../src/internal/streamed-index.ts';
import type { ChunkedManifestDocument } from '../src/types.ts';
import { JOB, writeRun } from './chain-helpers.ts';
import { chunkedOptions, fsStore, type Keys, keys, pseudoRandom, text } from './helpers.ts';

/** Twelve small records (one pack of the tests' 64 KiB packs holds them all) and a 300 KiB one. */
const records = (seed: number): RecordInput[] => [
  ...Array.from({ length: 12 }, (_, i) => ({ name: `small/${i}`, body: text(1500 + i, i + seed) })),
  { name: 'big', body: pseudoRandom(300 * 1024, seed) },
];

function options(k: Keys, runId: string) {
  return { job: JOB, runId, secretKey: k.operational.secretKey, signerPublicKey: k.signer.publicKey };
}

/** verifyRun streaming the index in windows of `window` records. */
async function streamed(store: ObjectStore, k: Keys, runId: string, window: number): Promise<VerifyVerdict> {
  const run = await openRun(store, options(k, runId));
  if (!(run instanceof ChunkedRunReader)) throw new Error('not a 0.2 run');
  run.verifyWindow = window;
  return verifyRun(store, { ...options(k, runId), opened: run });
}

/** verifyRun of a run whose whole index was loaded first (no streaming). */
async function loaded(store: ObjectStore, k: Keys, runId: string): Promise<VerifyVerdict> {
  const run = await openRun(store, options(k, runId));
  for await (const _ of run.records());
  return verifyRun(store, { ...options(k, runId), opened: run });
}

const code = (v: VerifyVerdict) => (v.ok ? 'ok' : v.failure!.code);

t.test('a streamed verify checks what a loaded one does, in windows of any size', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(1));
  // The second run takes most of its chunks from the first run's packs.
  await writeRun(store, k, 'run-0002', 'run-0001', [...records(1).slice(0, 10), ...records(2).slice(10)]);
  for (const runId of ['run-0001', 'run-0002']) {
    const whole = await loaded(store, k, runId);
    t.ok(whole.ok, `${runId}: a verify of the loaded index passes`);
    t.equal(whole.checks.records, 13);
    for (const window of [1, 2, 5, 4096]) {
      const v = await streamed(store, k, runId, window);
      t.ok(v.ok, `${runId}, windows of ${window}: passes`);
      t.same(
        { records: v.checks.records, bytes: v.checks.bytes, index: v.checks.index },
        { records: whole.checks.records, bytes: whole.checks.bytes, index: true },
        `${runId}, windows of ${window}: every record and byte, and the index`,
      );
    }
    // Up to four windows are planned ahead: a pack whose records span three windows of four
    // continues one visit across their ends rather than being read and opened once per window.
    const { store: counted, count } = countReads(store);
    const packReads = () => count((key) => key.includes('/packs/') && key.includes('/data/'));
    await loaded(counted, k, runId);
    const wholeReads = packReads();
    await streamed(counted, k, runId, 4);
    t.equal(packReads() - wholeReads, wholeReads, `${runId}: no pack read again (${wholeReads} reads)`);
  }
});

t.test('a damaged pack fails a streamed verify where it fails a loaded one', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(3));
  const whole = await loaded(store, k, 'run-0001');
  // The big record's last chunk: its pack holds no small record (they come first and fill theirs).
  const run = await openRun(store, options(k, 'run-0001'));
  const entries = [];
  for await (const e of run.records()) entries.push(e);
  const big = entries.at(-1)!;
  const map = await (run as ChunkedRunReader).chunkMap();
  const pack = map.chunks.get(big.chunks!.at(-1)!.id)!.pack;
  const file = join(root, layout.pack(JOB, (run as ChunkedRunReader).keys.keyId, pack));
  const bytes = readFileSync(file);
  bytes[bytes.length >> 1]! ^= 1;
  writeFileSync(file, bytes);
  const before = await loaded(store, k, 'run-0001');
  t.equal(code(before), 'ERR_ARCHIVE_SHARD_TAMPERED', 'the loaded verify names the pack');
  for (const window of [1, 3, 4096]) {
    const v = await streamed(store, k, 'run-0001', window);
    t.equal(code(v), code(before), `windows of ${window}: the same failure`);
    t.equal(v.failure!.object, before.failure!.object, `windows of ${window}: the same object`);
    t.equal(v.checks.records, before.checks.records, `windows of ${window}: the records before it verified`);
    t.equal(v.checks.index, false, `windows of ${window}: the index is not reported checked`);
  }
  t.equal(whole.checks.records, 13);
});

/**
 * Rewrites run `runId`'s index as a holder of the job's chunk key and of the signer key could:
 * `edit` changes its lines (header first), `totals` the manifest's totals; the manifest is signed
 * again, so only the index's own consistency can fail.
 */
async function reseal(
  store: ObjectStore,
  root: string,
  k: Keys,
  runId: string,
  edit: (lines: string[]) => string[],
  totals: (t: ChunkedManifestDocument['totals']) => void = () => undefined,
): Promise<void> {
  const m = await readRunManifest(store, { job: JOB, runId, signerPublicKey: k.signer.publicKey });
  const doc = structuredClone(m.document) as ChunkedManifestDocument;
  const keys = await unwrapChunkKey(doc, m.key, k.operational.secretKey);
  const key = runIndexKey(keys, runId);
  const binding = runBinding(JOB, runId);
  const tag = runTag(JOB, runId);
  const indexFile = join(root, layout.index(JOB, runId));
  const lines = openLines(readFileSync(indexFile), key, binding, tag);
  if (lines === null) throw new Error('the index does not open');
  const sealed = sealLines(edit(lines), key, binding, tag, sessionSalt(), true);
  writeFileSync(indexFile, sealed.bytes);
  doc.index = { ...doc.index, size: sealed.size, sha384: sealed.digest };
  totals(doc.totals);
  const manifestBytes = canonicalJsonBytes(doc);
  writeFileSync(join(root, layout.manifest(JOB, runId)), manifestBytes);
  const sigFile = join(root, layout.signature(JOB, runId));
  const sig = JSON.parse(readFileSync(sigFile, 'utf8'));
  sig.manifest = formatDigest(sha384(manifestBytes));
  sig.signature = toBase64Url(sign(k.signer.secretKey, manifestBytes, MANIFEST_SIGNATURE_CONTEXT));
  writeFileSync(sigFile, canonicalJsonBytes(sig));
}

t.test('an authentic index that is not whole or not well formed fails both ways alike', async (t) => {
  const k = keys();
  const variants: {
    what: string;
    code: string;
    edit: (lines: string[]) => string[];
    totals?: (t: ChunkedManifestDocument['totals']) => void;
  }[] = [
    {
      what: 'a record line that is not JSON, in the middle',
      code: 'ERR_ARCHIVE_INDEX_TAMPERED',
      edit: (l) => l.map((line, i) => (i === 7 ? line.slice(0, -3) : line)),
    },
    {
      what: 'a header counting a pack reference that is not there',
      code: 'ERR_ARCHIVE_INDEX_INCONSISTENT',
      edit: (l) => {
        const h = JSON.parse(l[0]!);
        h.packs++;
        return [JSON.stringify(h), ...l.slice(1)];
      },
      totals: (t) => {
        t.packs++;
      },
    },
    {
      what: 'a last pack reference missing',
      code: 'ERR_ARCHIVE_INDEX_INCONSISTENT',
      edit: (l) => l.slice(0, -1),
    },
    {
      what: 'a byte total the records do not add up to',
      code: 'ERR_ARCHIVE_INDEX_INCONSISTENT',
      edit: (l) => l,
      totals: (t) => {
        t.bytes++;
      },
    },
    {
      what: 'a record count the manifest does not state',
      code: 'ERR_ARCHIVE_INDEX_INCONSISTENT',
      edit: (l) => l,
      totals: (t) => {
        t.records--;
      },
    },
  ];
  for (const v of variants) {
    const { store, root } = fsStore(t);
    await writeRun(store, k, 'run-0001', null, records(4));
    t.ok((await streamed(store, k, 'run-0001', 2)).ok, `${v.what}: verifies before the edit`);
    await reseal(store, root, k, 'run-0001', v.edit, v.totals);
    // The loaded path: the index read whole (records()) refuses it, before any verify.
    const listing = await openRun(store, options(k, 'run-0001'));
    const loadedCode = await runEntriesOf(listing).then(
      () => 'ok',
      (e: { code: string }) => e.code,
    );
    t.equal(loadedCode, v.code, `${v.what}: the whole index is refused`);
    const fresh = await verifyRun(store, options(k, 'run-0001'));
    t.equal(code(fresh), v.code, `${v.what}: a fresh (streamed) verify fails alike`);
    // The index stream itself hands out no window after the last whole one it could judge:
    // the last window (here records 10-12) comes out only once the index was found whole.
    const m = await readRunManifest(store, {
      job: JOB,
      runId: 'run-0001',
      signerPublicKey: k.signer.publicKey,
    });
    const chunkKeys = await unwrapChunkKey(
      m.document as ChunkedManifestDocument,
      m.key,
      k.operational.secretKey,
    );
    let handed = 0;
    const thrown = await (async () => {
      for await (const w of streamChunkedIndex(store, m, chunkKeys, 5)) handed += w.length;
    })().then(
      () => 'ok',
      (e: { code: string }) => e.code,
    );
    t.equal(thrown, v.code, `${v.what}: the index stream refuses it`);
    t.ok(handed <= 10, `${v.what}: ${handed} records handed out before, never the last window`);
    for (const window of [1, 2, 5]) {
      const s = await streamed(store, k, 'run-0001', window);
      t.equal(code(s), v.code, `${v.what}: windows of ${window} fail alike`);
      t.equal(s.checks.index, false, `${v.what}: windows of ${window}: the index is not reported checked`);
      t.ok(s.checks.records < 13, `${v.what}: windows of ${window}: not every record was counted verified`);
    }
  }
});

t.test("the run's signed pack references are checked once the records are, both ways", async (t) => {
  const k = keys();
  const lastRef = (lines: string[], edit: (ref: { pack: string; sha256: string; size: number }) => void) => {
    const ref = JSON.parse(lines.at(-1)!);
    edit(ref);
    return [...lines.slice(0, -1), JSON.stringify(ref)];
  };
  {
    const { store, root } = fsStore(t);
    await writeRun(store, k, 'run-0001', null, records(5));
    let pack = '';
    await reseal(store, root, k, 'run-0001', (l) =>
      lastRef(l, (ref) => {
        pack = ref.pack;
        ref.size++;
      }),
    );
    const run = await openRun(store, options(k, 'run-0001'));
    const object = layout.pack(JOB, (run as ChunkedRunReader).keys.keyId, pack);
    for (const [what, v] of [
      ['loaded', await loaded(store, k, 'run-0001')],
      ['windows of 2', await streamed(store, k, 'run-0001', 2)],
      ['fresh', await verifyRun(store, options(k, 'run-0001'))],
    ] as const) {
      t.equal(code(v), 'ERR_ARCHIVE_SHARD_TAMPERED', `${what}: a reference whose size differs fails`);
      t.equal(v.failure?.object, object, `${what}: naming the pack`);
    }
  }
  {
    // A reference to a pack no index describes and no record uses (it was repacked away) is fine.
    const { store, root } = fsStore(t);
    await writeRun(store, k, 'run-0001', null, records(6));
    await reseal(store, root, k, 'run-0001', (l) =>
      lastRef(l, (ref) => {
        ref.pack = 'f'.repeat(32);
      }),
    );
    t.ok((await loaded(store, k, 'run-0001')).ok, 'loaded: a reference to a pack gone and unused passes');
    t.ok((await streamed(store, k, 'run-0001', 2)).ok, 'windows of 2: passes alike');
  }
});

t.test('records read in windows are the records read whole, in parts too', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(7));
  await writeRun(store, k, 'run-0002', 'run-0001', [...records(7).slice(0, 9), ...records(8).slice(9)]);
  for (const runId of ['run-0001', 'run-0002']) {
    const read = async (entries: 'whole' | number, partBytes?: number) => {
      const run = await openRun(store, options(k, runId));
      const source = entries === 'whole' ? await runEntriesOf(run) : run.recordWindows(entries);
      const out: string[] = [];
      for await (const r of run.readRecords(source, partBytes === undefined ? {} : { partBytes })) {
        out.push(
          `${r.entry.seq}:${r.part ? `${r.part.index}${r.part.last ? '.' : ''}` : ''}:${Buffer.concat(r.pieces).toString('base64')}`,
        );
        r.release();
      }
      return out;
    };
    const whole = await read('whole');
    t.equal(whole.length, 13, `${runId}: every record read whole`);
    for (const w of [1, 2, 5, 4096])
      t.same(await read(w), whole, `${runId}, windows of ${w}: the same records`);
    const parts = await read('whole', 64 * 1024);
    t.ok(parts.length > 13, `${runId}: the big record comes in parts`);
    t.same(await read(3, 64 * 1024), parts, `${runId}, windows of 3: the same parts`);
  }
  // A window may be a selection; entries out of order are refused when their window comes.
  const run = await openRun(store, options(k, 'run-0001'));
  const all = await runEntriesOf(run);
  const picked: string[] = [];
  for await (const r of run.readRecords(
    (async function* () {
      yield [all[1]!, all[4]!];
      yield [all[12]!];
    })(),
  )) {
    picked.push(r.entry.name);
    r.release();
  }
  t.same(picked, [all[1]!.name, all[4]!.name, all[12]!.name], 'a selection in windows');
  const again = await openRun(store, options(k, 'run-0001'));
  const got: number[] = [];
  await t.rejects(
    (async () => {
      for await (const r of again.readRecords(
        (async function* () {
          yield [all[3]!];
          yield [all[2]!];
        })(),
      )) {
        got.push(r.entry.seq);
        r.release();
      }
    })(),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
    'a window going back in seq is refused',
  );
  t.ok(got.length <= 1, 'nothing after it was read');
  await t.rejects(
    (async () => {
      for await (const _ of again.recordWindows(0));
    })(),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
    'a window size of 0 is refused',
  );
});

async function runEntriesOf(run: Awaited<ReturnType<typeof openRun>>) {
  const out = [];
  for await (const e of run.records()) out.push(e);
  return out;
}

t.test('a streamed verify reads a pack larger than any its map knew, described by scanning', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, 'run-0001', null, records(9));
  const first = await readRunManifest(store, {
    job: JOB,
    runId: 'run-0001',
    signerPublicKey: k.signer.publicKey,
  });
  const indexes = join(
    root,
    layout.packIndexPrefix(JOB, (first.document as ChunkedManifestDocument).chunkKey),
  );
  const before = new Set(readdirSync(indexes));
  // The second run's packs are 16 times the first's (1 MiB against 64 KiB)...
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
  });
  const w = await createChunkedWriter(
    chunkedOptions(store, k, {
      runId: 'run-0002',
      prevRunId: 'run-0001',
      base,
      writeRecovery: false,
      packSize: 1024 * 1024,
    }),
  );
  for (const r of [...records(9).slice(0, 4), { name: 'large', body: pseudoRandom(3 * 1024 * 1024, 10) }])
    await w.addRecord(r);
  await w.finish();
  // ...and its pack index is lost: the verify's map knows only 64 KiB packs when its buffers are
  // sized, and finds the large ones by scanning the packs no index describes.
  for (const name of readdirSync(indexes)) if (!before.has(name)) rmSync(join(indexes, name));
  for (const window of [2, 4096]) {
    const v = await streamed(store, k, 'run-0002', window);
    t.ok(v.ok, `windows of ${window}: passes (${v.failure?.message ?? 'ok'})`);
    t.equal(v.checks.records, 5, `windows of ${window}: every record`);
  }
  t.ok((await loaded(store, k, 'run-0002')).ok, 'as a verify of the loaded index does');
});
