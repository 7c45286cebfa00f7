/**
 * The committed golden archive of format 0.2 (fixtures/golden-0.2, made by make-golden-0.2.ts)
 * must read and verify on every run, and each way of breaking it (docs/archive-format.md §12.12)
 * must give its own precise error code naming the object. Broken variants work on a temporary copy.
 */
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  canonicalJson,
  decodeKeyFile,
  fingerprint,
  formatDigest,
  generateRecipient,
  sha384,
} from '@coffer/crypto';
import { createFsStore, type ObjectStore } from '@coffer/objectstore';
import { tempDir } from '@coffer/testkit';
import t from 'tap';
import { unwrapChunkKey } from '../src/chunked-reader.ts';
import {
  type ChunkedManifestDocument,
  type IndexEntry,
  isChunkedManifest,
  layout,
  listRuns,
  loadChunkedBase,
  openRun,
  readRecoveryPointer,
  readRunManifest,
  verifyRun,
} from '../src/index.ts';
import type { ChunkKeys } from '../src/internal/chunk-keys.ts';
import { openPackIndex, type PackLine, sealPackIndex } from '../src/internal/chunked-index.ts';
import { packDigestOf } from '../src/internal/pack-digest.ts';
import { runTag, sessionSalt } from '../src/internal/run-binding.ts';
import { readAll } from './helpers.ts';
import {
  BIG_SIZE,
  GOLDEN_CHUNKING,
  GOLDEN_PACK_SIZE,
  GOLDEN_RUNS,
  GOLDEN_SOURCE,
  goldenRecords02,
  unchangedInRun2,
} from './make-golden-0.2.ts';

const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'golden-0.2');
const key = (name: string) => decodeKeyFile(readFileSync(join(fixture, 'keys', name), 'utf8')).key;
const operational = key('operational.key');
const breakGlass = key('break-glass.key');
const signerPub = key('signer.pub');
const pin = fingerprint(signerPub);
const JOB = 'golden';
type Store = ReturnType<typeof createFsStore>;

async function chunkedManifest(store: ObjectStore, job: string, runId: string) {
  const m = await readRunManifest(store, { job, runId, pinSigner: pin });
  if (!isChunkedManifest(m.document)) throw new Error(`${job}/${runId} is not a 0.2 run`);
  return { key: m.key, doc: m.document as ChunkedManifestDocument };
}

async function entries(store: ObjectStore, job: string, runId: string): Promise<IndexEntry[]> {
  const run = await openRun(store, { job, runId, secretKey: operational, pinSigner: pin });
  const out: IndexEntry[] = [];
  for await (const e of run.records()) out.push(e);
  return out;
}

/** A pack index of the fixture, opened with the job's chunk key (test-only use of the internals). */
interface OpenedIndex {
  id: string;
  object: string;
  packs: PackLine[];
}

/** What the broken variants need to know about job golden: its chunk key and pack indexes. */
async function goldenLayout(store: ObjectStore, root: string) {
  const m = await chunkedManifest(store, JOB, 'run-0001');
  const keys = await unwrapChunkKey(m.doc, m.key, operational);
  const indexes: OpenedIndex[] = [];
  for (const name of readdirSync(join(root, layout.packIndexPrefix(JOB, keys.keyId))).sort()) {
    const id = name.replace(/\.bin$/, '');
    const object = layout.packIndex(JOB, keys.keyId, id);
    const packs = openPackIndex(readFileSync(join(root, object)), JOB, keys, id);
    if (packs === null) throw new Error(`${object} does not open`);
    indexes.push({ id, object, packs });
  }
  const packOf = new Map<string, string>();
  for (const ix of indexes) for (const p of ix.packs) for (const c of p.chunks) packOf.set(c.id, p.pack);
  const run1 = await entries(store, JOB, 'run-0001');
  const run2 = await entries(store, JOB, 'run-0002');
  const packsOf = (es: IndexEntry[]) => new Set(es.flatMap((e) => e.chunks!.map((c) => packOf.get(c.id)!)));
  const packs1 = packsOf(run1);
  const packs2 = packsOf(run2);
  // Packs run-0001 stored that run-0002 also takes chunks from (sorted: a deterministic choice).
  const shared = [...packs1].filter((p) => packs2.has(p)).sort();
  const indexOf = (pack: string) => indexes.find((ix) => ix.packs.some((p) => p.pack === pack))!;
  return {
    keys,
    indexes,
    packOf,
    run1,
    run2,
    packs1,
    packs2,
    shared,
    indexOf,
    packObject: (pack: string) => layout.pack(JOB, keys.keyId, pack),
    indexPrefix: layout.packIndexPrefix(JOB, keys.keyId),
  };
}

/** Re-seals a pack index of job golden after `edit` (as a holder of the chunk key could). */
function rewriteIndex(
  root: string,
  keys: ChunkKeys,
  ix: OpenedIndex,
  edit: (packs: PackLine[]) => PackLine[],
) {
  const sealed = sealPackIndex(JOB, keys, ix.id, edit(structuredClone(ix.packs)), sessionSalt());
  writeFileSync(join(root, sealed.key), sealed.bytes);
}

/** A writable copy of the fixture store. */
function copy(t: { teardown(fn: () => void): void }): { root: string; store: Store } {
  const root = tempDir(t, 'coffer-golden-02-');
  cpSync(join(fixture, 'store'), root, { recursive: true });
  return { root, store: createFsStore({ root }) };
}

function flip(file: string, at: (len: number) => number): void {
  const b = readFileSync(file);
  const i = at(b.length);
  b[i] = b[i]! ^ 0x01;
  writeFileSync(file, b);
}

async function failure(store: ObjectStore, runId: string, job = JOB, secretKey = operational) {
  const v = await verifyRun(store, { job, runId, secretKey, pinSigner: pin });
  return v.ok ? 'ok' : `${v.failure!.code} ${v.failure!.object ?? ''}`.trim();
}

async function failureMessage(store: ObjectStore, runId: string): Promise<string> {
  const v = await verifyRun(store, { job: JOB, runId, secretKey: operational, pinSigner: pin });
  return v.failure?.message ?? '';
}

const sumSizes = (run: 1 | 2) => goldenRecords02(run).reduce((n, r) => n + r.body.length, 0);

t.test('the golden 0.2 archive reads and verifies with both keys, pinned', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  t.same(
    (await listRuns(store)).map((r) => `${r.job}/${r.runId}`),
    ['golden/run-0001', 'golden/run-0002', 'other/run-0001'],
  );
  const pointer = await readRecoveryPointer(store);
  t.same(pointer && { v: pointer.formatVersion, ok: pointer.supported, signer: pointer.signer }, {
    v: '0.2.0',
    ok: true,
    signer: pin,
  });
  t.equal(
    JSON.parse(readFileSync(join(fixture, 'store/_RECOVERY/FORMAT'), 'utf8')).formatVersion,
    '0.2.0',
    '_RECOVERY/FORMAT names 0.2.0',
  );
  for (const run of GOLDEN_RUNS) {
    const expected = goldenRecords02(run.inputs);
    for (const [keyName, secretKey] of [
      ['operational', operational],
      ['break-glass', breakGlass],
    ] as const) {
      const what = `${run.job}/${run.runId} with the ${keyName} key`;
      const v = await verifyRun(store, { job: run.job, runId: run.runId, secretKey, pinSigner: pin });
      t.equal(v.ok, true, `${what} verifies: ${JSON.stringify(v.failure)}`);
      t.equal(v.checks.signerPinned, true);
      t.equal(v.checks.records, expected.length);
      t.equal(v.checks.bytes, sumSizes(run.inputs));
      const opened = await openRun(store, {
        job: run.job,
        runId: run.runId,
        secretKey,
        signerPublicKey: signerPub,
      });
      const all = await readAll(opened);
      t.same(
        all.map((r) => [
          r.entry.name,
          r.entry.namespace,
          r.entry.sourceType,
          r.entry.binding,
          r.entry.metadata,
          r.entry.change,
          r.entry.size,
          Buffer.from(r.body).toString('base64'),
        ]),
        expected.map((r) => [
          r.name,
          r.namespace ?? GOLDEN_SOURCE.namespace,
          r.sourceType ?? GOLDEN_SOURCE.type,
          GOLDEN_SOURCE.binding,
          r.metadata,
          r.change,
          r.body.length,
          Buffer.from(r.body).toString('base64'),
        ]),
        `${what}: every record's bytes and fields`,
      );
      // readRecords (the batched path) gives the same bytes.
      let n = 0;
      for await (const r of opened.readRecords(all.map((a) => a.entry))) {
        t.ok(Buffer.concat(r.pieces).equals(Buffer.from(expected[n]!.body)), `readRecords: ${r.entry.name}`);
        r.release();
        n++;
      }
      t.equal(n, expected.length);
    }
  }
});

t.test('the manifests: format 0.2.0, one chunk key per job, chunking and totals', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  const m1 = (await chunkedManifest(store, JOB, 'run-0001')).doc;
  const m2 = (await chunkedManifest(store, JOB, 'run-0002')).doc;
  const mo = (await chunkedManifest(store, 'other', 'run-0001')).doc;
  for (const [m, run] of [
    [m1, GOLDEN_RUNS[0]],
    [m2, GOLDEN_RUNS[1]],
    [mo, GOLDEN_RUNS[2]],
  ] as const) {
    t.equal(m.formatVersion, '0.2.0');
    t.equal(m.prevRunId, run.prevRunId);
    t.equal(m.startedAt, run.at);
    t.equal(m.sealedAt, run.at);
    t.match(m.chunkKey, /^[0-9a-f]{32}$/);
    t.same(m.chunking, { ...GOLDEN_CHUNKING, packSize: GOLDEN_PACK_SIZE });
    t.same(m.source, GOLDEN_SOURCE);
    t.notOk('shards' in m || 'shardSize' in m, 'a 0.2 manifest has no shards');
    t.same(
      m.recipients.map((r) => r.role),
      ['operational', 'break-glass'],
      'the chunk key is wrapped for the operational and break-glass keys',
    );
  }
  t.equal(m2.chunkKey, m1.chunkKey, 'run-0002 carries the chunk key of run-0001');
  t.not(mo.chunkKey, m1.chunkKey, 'another job has its own chunk key');
  // The totals are pinned: chunk boundaries depend only on the bytes and the chunking parameters.
  // run-0001 already stores fewer chunks than it references: the log's text repeats within itself.
  t.strictSame(m1.totals, {
    records: 8,
    bytes: sumSizes(1),
    chunks: 36,
    newChunks: 30,
    newBytes: 205825,
    packs: 4,
  });
  t.strictSame(mo.totals, m1.totals, 'the same data in another job stores as much (nothing shared)');
  // run-0002 stores 5 new chunks in 1 new pack and references the 4 packs of run-0001 too.
  t.strictSame(m2.totals, {
    records: 8,
    bytes: sumSizes(2),
    chunks: 39,
    newChunks: 5,
    newBytes: 16124,
    packs: 5,
  });
  t.ok(
    m2.totals.newChunks < m2.totals.chunks && m2.totals.newBytes < m2.totals.bytes,
    'run-0002 is incremental',
  );

  // Unchanged records are the same chunks; the large record shares all but the edited chunks.
  const e1 = new Map((await entries(store, JOB, 'run-0001')).map((e) => [e.name, e]));
  const e2 = new Map((await entries(store, JOB, 'run-0002')).map((e) => [e.name, e]));
  const unchanged = unchangedInRun2();
  t.same([...unchanged].sort(), [
    'blob.bin',
    'empty',
    'hello.txt',
    'kv/session:42',
    'ünïcødé/日本語/😀 file.txt',
  ]);
  for (const name of unchanged) {
    t.same(e2.get(name)!.chunks, e1.get(name)!.chunks, `${name}: referenced, not stored again`);
    t.equal(e2.get(name)!.sha384, e1.get(name)!.sha384);
  }
  const big1 = e1.get('big.bin')!;
  const big2 = e2.get('big.bin')!;
  t.equal(big2.size, BIG_SIZE);
  t.ok(big1.chunks!.length >= 10, `the large record spans ${big1.chunks!.length} chunks`);
  const old = new Set(big1.chunks!.map((c) => c.id));
  const fresh = big2.chunks!.filter((c) => !old.has(c.id));
  t.ok(fresh.length >= 1 && fresh.length <= 3, `an edit in the middle re-stores ${fresh.length} chunks`);
  t.equal(e1.get('empty')!.chunks!.length, 0, 'an empty record has no chunk');
  t.notOk(e2.has('tmp/scratch.bin'), 'the removed record is gone from run-0002');
  t.ok(e2.has('notes/new.txt'), 'the added record is in run-0002');
});

t.test('a missing referenced pack is named by both runs', async (t) => {
  const { root, store } = copy(t);
  const g = await goldenLayout(store, root);
  t.ok(g.shared.length >= 1, 'run-0002 takes chunks from packs of run-0001');
  const victim = g.packObject(g.shared[0]!);
  rmSync(join(root, victim));
  t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_PACK_MISSING ${victim}`);
  t.equal(await failure(store, 'run-0002'), `ERR_ARCHIVE_PACK_MISSING ${victim}`);
  // The writer's read-back (only the new packs read) finds it by listing.
  const newPacks = [...g.packs2].filter((p) => !g.packs1.has(p));
  const v = await verifyRun(store, { job: JOB, runId: 'run-0002', secretKey: operational, newPacks });
  t.equal(`${v.failure?.code} ${v.failure?.object}`, `ERR_ARCHIVE_PACK_MISSING ${victim}`);
  // Reading a record that needs it fails the same way.
  const needs = g.run2.find((e) => e.chunks!.some((c) => g.packOf.get(c.id) === g.shared[0]))!;
  const run = await openRun(store, { job: JOB, runId: 'run-0002', secretKey: breakGlass, pinSigner: pin });
  await t.rejects(
    async () => {
      for await (const _ of run.readRecord(needs)) void _;
    },
    { code: 'ERR_ARCHIVE_PACK_MISSING', object: victim },
  );
});

t.test("another job's pack and pack index under golden's prefix never resolve", async (t) => {
  const { root, store } = copy(t);
  const g = await goldenLayout(store, root);
  const other = await chunkedManifest(store, 'other', 'run-0001');
  const otherPrefix = `jobs/other/packs/${other.doc.chunkKey}/`;
  const otherIndex = readdirSync(join(root, otherPrefix, 'index'))[0]!;
  const otherPack = readdirSync(join(root, otherPrefix, 'data'), {
    recursive: true,
    withFileTypes: true,
  }).find((e) => e.isFile())!;
  const packRel = relative(join(root, otherPrefix), join(otherPack.parentPath, otherPack.name));
  const goldenPrefix = `jobs/golden/packs/${g.keys.keyId}/`;
  // Same relative names, under golden's own key id (listed, but sealed under other's key and job)...
  const planted = `${goldenPrefix}index/${otherIndex}`;
  cpSync(join(root, otherPrefix, 'index', otherIndex), join(root, planted));
  cpSync(join(root, otherPrefix, packRel), join(root, goldenPrefix, packRel));
  // ...and other's whole key id folder under golden's packs (never listed: another key id).
  cpSync(join(root, otherPrefix), join(root, `jobs/golden/packs/${other.doc.chunkKey}/`), {
    recursive: true,
  });
  t.equal(await failure(store, 'run-0001'), 'ok', 'golden run-0001 still verifies');
  t.equal(await failure(store, 'run-0002'), 'ok', 'golden run-0002 still verifies');
  const base = await loadChunkedBase(store, {
    job: JOB,
    runId: 'run-0002',
    secretKey: operational,
    pinSigner: pin,
  });
  t.same(base!.unreadableIndexes, [planted], 'the planted index is reported unreadable, never trusted');

  // Without golden's own pack index of run-0001, its packs describe themselves from their chunk
  // tables (§12.4): the runs still verify, and the other job's pack under golden's prefix (sealed
  // under another key) is never used.
  const own = g.indexOf(g.shared[0]!);
  rmSync(join(root, own.object));
  t.equal(await failure(store, 'run-0001'), 'ok', 'packs rebuild their own description');
  t.equal(await failure(store, 'run-0002'), 'ok');
  // Without those packs too, the chunks are missing: the other job's copy of the same bytes is
  // never used.
  for (const p of own.packs) rmSync(join(root, g.packObject(p.pack)));
  const firstChunk = g.run1.find((e) => e.chunks!.length > 0)!.chunks![0]!.id;
  t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_CHUNK_MISSING ${g.indexPrefix}`);
  t.match(await failureMessage(store, 'run-0001'), `chunk ${firstChunk} of run golden/run-0001`);
  t.equal(await failure(store, 'run-0002'), `ERR_ARCHIVE_CHUNK_MISSING ${g.indexPrefix}`);
  const run = await openRun(store, { job: JOB, runId: 'run-0001', secretKey: breakGlass, pinSigner: pin });
  const hello = g.run1.find((e) => e.name === 'hello.txt')!;
  await t.rejects(
    async () => {
      for await (const _ of run.readRecord(hello)) void _;
    },
    { code: 'ERR_ARCHIVE_CHUNK_MISSING' },
  );
  // The other job itself is untouched.
  t.equal(await failure(store, 'run-0001', 'other'), 'ok');
});

/**
 * Swapped chunks (§12.12). §12.5 makes a reader check that a pack line's chunks tile its plaintext
 * in order, and §12.7 step 7 skips (and reports) a pack index that fails any check; so exchanging
 * two chunks' offsets while keeping the line order makes the index unreadable, and its packs are
 * then described from their own chunk tables (each chunk checked against its id). An index that still tiles but points a chunk id at
 * another chunk's bytes is caught by step 8: the bytes do not have the signed id
 * (ERR_ARCHIVE_CHUNK_TAMPERED, naming the pack).
 */
t.test('a swapped chunk in a properly sealed pack index', async (t) => {
  const setup = async (t: { teardown(fn: () => void): void }) => {
    const { root, store } = copy(t);
    const g = await goldenLayout(store, root);
    // Two adjacent chunks of different lengths in a pack of run-0001.
    for (const ix of g.indexes)
      for (const p of ix.packs.filter((x) => g.packs1.has(x.pack)))
        for (let j = 0; j + 1 < p.chunks.length; j++)
          if (p.chunks[j]!.length !== p.chunks[j + 1]!.length) return { root, store, g, ix, pack: p.pack, j };
    throw new Error('no pack with two chunks of different lengths');
  };
  const swap =
    (
      pack: string,
      j: number,
      place: (a: PackLine['chunks'][0], b: PackLine['chunks'][0]) => PackLine['chunks'],
    ) =>
    (packs: PackLine[]) =>
      packs.map((p) => {
        if (p.pack !== pack) return p;
        const chunks = [...p.chunks];
        chunks.splice(j, 2, ...place(p.chunks[j]!, p.chunks[j + 1]!));
        return { ...p, chunks };
      });
  const firstUse = (es: IndexEntry[], ids: string[]) =>
    es.flatMap((e) => e.chunks!.map((c) => c.id)).find((id) => ids.includes(id));

  t.test(
    'offsets exchanged, order kept: the index does not tile and is skipped; the pack describes itself',
    async (t) => {
      const { root, store, g, ix, pack, j } = await setup(t);
      rewriteIndex(
        root,
        g.keys,
        ix,
        swap(pack, j, (a, b) => [
          { ...a, offset: b.offset },
          { ...b, offset: a.offset },
        ]),
      );
      const base = await loadChunkedBase(store, { job: JOB, runId: 'run-0001', secretKey: operational });
      t.same(base!.unreadableIndexes, [ix.object], 'the doctored index is reported unreadable');
      t.equal(await failure(store, 'run-0001'), 'ok', 'its packs are described from their own tables');
      // With the packs gone as well, the chunks are missing.
      for (const p of ix.packs) rmSync(join(root, g.packObject(p.pack)));
      t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_CHUNK_MISSING ${g.indexPrefix}`);
    },
  );

  t.test('ids exchanged, the line still tiles: the bytes do not match the signed id', async (t) => {
    const { root, store, g, ix, pack, j } = await setup(t);
    rewriteIndex(
      root,
      g.keys,
      ix,
      swap(pack, j, (a, b) => [
        { id: b.id, offset: a.offset, length: b.length },
        { id: a.id, offset: a.offset + b.length, length: a.length },
      ]),
    );
    const a = ix.packs.find((p) => p.pack === pack)!.chunks[j]!.id;
    const b = ix.packs.find((p) => p.pack === pack)!.chunks[j + 1]!.id;
    const base = await loadChunkedBase(store, { job: JOB, runId: 'run-0001', secretKey: operational });
    t.same(base!.unreadableIndexes, [], 'the doctored index opens and tiles');
    t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_CHUNK_TAMPERED ${g.packObject(pack)}`);
    t.match(
      await failureMessage(store, 'run-0001'),
      `chunk ${firstUse(g.run1, [a, b])} of run golden/run-0001`,
    );
    const victim = g.run1.find((e) => e.chunks!.some((c) => c.id === a))!;
    const run = await openRun(store, { job: JOB, runId: 'run-0001', secretKey: breakGlass, pinSigner: pin });
    await t.rejects(
      async () => {
        for await (const _ of run.readRecord(victim)) void _;
      },
      { code: 'ERR_ARCHIVE_CHUNK_TAMPERED', object: g.packObject(pack) },
    );
  });

  t.test('ids exchanged with the slots kept: the length differs from the signed one', async (t) => {
    const { root, store, g, ix, pack, j } = await setup(t);
    rewriteIndex(
      root,
      g.keys,
      ix,
      swap(pack, j, (a, b) => [
        { id: b.id, offset: a.offset, length: a.length },
        { id: a.id, offset: b.offset, length: b.length },
      ]),
    );
    const a = ix.packs.find((p) => p.pack === pack)!.chunks[j]!.id;
    const b = ix.packs.find((p) => p.pack === pack)!.chunks[j + 1]!.id;
    t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_CHUNK_TAMPERED ${g.packObject(pack)}`);
    t.match(await failureMessage(store, 'run-0001'), `chunk ${firstUse(g.run1, [a, b])}: length differs`);
  });
});

t.test("a pack's bytes flipped fail its digest for both runs", async (t) => {
  const { root, store } = copy(t);
  const g = await goldenLayout(store, root);
  const victim = g.packObject(g.shared[0]!);
  flip(join(root, victim), (n) => n >> 1);
  t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_SHARD_TAMPERED ${victim}`);
  t.equal(await failure(store, 'run-0002'), `ERR_ARCHIVE_SHARD_TAMPERED ${victim}`);
});

t.test('a pack copied under another pack id fails its run tag or its AEAD tag', async (t) => {
  const renamed = 'ab'.repeat(16);
  const setup = async (t: { teardown(fn: () => void): void }) => {
    const { root, store } = copy(t);
    const g = await goldenLayout(store, root);
    const pack = g.shared[0]!;
    const moved = g.packObject(renamed);
    cpSync(join(root, g.packObject(pack)), join(root, moved));
    return { root, store, g, pack, moved };
  };

  t.test('copied as is: the header names another pack', async (t) => {
    const { root, store, g, pack, moved } = await setup(t);
    rewriteIndex(root, g.keys, g.indexOf(pack), (packs) =>
      packs.map((p) => (p.pack === pack ? { ...p, pack: renamed } : p)),
    );
    t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_SHARD_TRANSPLANTED ${moved}`);
    t.equal(await failure(store, 'run-0002'), `ERR_ARCHIVE_SHARD_TRANSPLANTED ${moved}`);
  });

  t.test('header run tag rewritten and digest updated (a key holder): the AEAD tag fails', async (t) => {
    const { root, store, g, pack, moved } = await setup(t);
    const frame = readFileSync(join(root, moved));
    // Salted frame header: 6 bytes of the run tag at 20..26 (docs/archive-format.md §4).
    t.equal(frame[6]! & 4, 4, 'the pack frame is salted');
    frame.set(runTag(JOB, renamed).subarray(0, 6), 20);
    writeFileSync(join(root, moved), frame);
    rewriteIndex(root, g.keys, g.indexOf(pack), (packs) =>
      packs.map((p) => (p.pack === pack ? { ...p, pack: renamed, sha256: packDigestOf(frame) } : p)),
    );
    t.equal(await failure(store, 'run-0001'), `ERR_ARCHIVE_SHARD_TAMPERED ${moved}`);
    t.equal(await failure(store, 'run-0002'), `ERR_ARCHIVE_SHARD_TAMPERED ${moved}`);
  });
});

t.test('a doctored manifest chunkKey fails the signature', async (t) => {
  const doctor = (root: string) => {
    const f = join(root, 'jobs/golden/runs/run-0002/manifest.json');
    const text = readFileSync(f, 'utf8');
    const m = /"chunkKey":"([0-9a-f]{32})"/.exec(text)!;
    const next = text.replace(m[0], `"chunkKey":"${'0'.repeat(32)}"`);
    t.not(next, text);
    writeFileSync(f, next);
    return next;
  };
  t.test('manifest bytes differ from the signed digest', async (t) => {
    const { root, store } = copy(t);
    doctor(root);
    t.equal(
      await failure(store, 'run-0002'),
      'ERR_ARCHIVE_MANIFEST_TAMPERED jobs/golden/runs/run-0002/manifest.json',
    );
  });
  t.test('signed digest re-pointed at the doctored bytes: the signature fails', async (t) => {
    const { root, store } = copy(t);
    const next = doctor(root);
    const sigFile = join(root, 'jobs/golden/runs/run-0002/manifest.sig');
    const sig = JSON.parse(readFileSync(sigFile, 'utf8'));
    sig.manifest = formatDigest(sha384(Buffer.from(next, 'utf8')));
    writeFileSync(sigFile, canonicalJson(sig));
    t.equal(
      await failure(store, 'run-0002'),
      'ERR_ARCHIVE_BAD_SIGNATURE jobs/golden/runs/run-0002/manifest.sig',
    );
  });
});

t.test('a stranger key does not unwrap the chunk key', async (t) => {
  const store = createFsStore({ root: join(fixture, 'store') });
  const stranger = generateRecipient();
  t.equal(
    await failure(store, 'run-0002', JOB, stranger.secretKey),
    'ERR_ARCHIVE_WRONG_KEY jobs/golden/runs/run-0002/manifest.json',
  );
});
