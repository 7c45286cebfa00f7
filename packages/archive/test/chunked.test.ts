// Format 0.2 (docs/archive-format.md §12): chunked, deduplicated runs written with
// createChunkedWriter and read back with the same openRun / verifyRun as 0.1 runs.
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ObjectStore } from '@coffer/objectstore';
import t, { type Test } from 'tap';
import { openChunkedIndex } from '../src/chunked-reader.ts';
import {
  CHUNKED_FORMAT_VERSION,
  type ChunkedWriterOptions,
  createChunkedWriter,
  isChunkedCheckpoint,
  isChunkedManifest,
  loadChunkedBase,
  openRun,
  type RecordInput,
  readRecoveryPointer,
  resumeChunkedWriter,
  verifyRun,
} from '../src/index.ts';
import { canonicalChunkedEntryLine } from '../src/internal/chunked-index.ts';
import type { IndexEntry } from '../src/types.ts';
import { chunkedOptions, fsStore, type Keys, keys, pseudoRandom, readAll, text } from './helpers.ts';

async function writeRun(
  store: ObjectStore,
  k: Keys,
  records: RecordInput[],
  over: Partial<ChunkedWriterOptions> = {},
) {
  const w = await createChunkedWriter(chunkedOptions(store, k, over));
  for (const r of records) await w.addRecord(r);
  return w.finish();
}

function dataSet(): RecordInput[] {
  const out: RecordInput[] = [];
  for (let i = 0; i < 40; i++) {
    out.push({
      name: `small/${i}.txt`,
      body: text(500 + i * 97, i),
      change: `v1-${i}`,
      metadata: { mode: 0o644 },
    });
  }
  out.push({ name: 'big.bin', body: pseudoRandom(400 * 1024, 7), change: 'big-v1' });
  out.push({ name: 'empty', body: new Uint8Array(0), change: 'e' });
  return out;
}

/** A record body that fails the test if it is ever read (an unchanged record must not be). */
function untouchable(): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      throw new Error('an unchanged record was read');
    },
  };
}

function bytesUnder(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += statSync(join(e.parentPath, e.name)).size;
  }
  return n;
}

t.test('an unchanged record keeps its base line only while its other fields are equal', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const meta = { mode: 0o644, owner: 'alice', pinned: true };
  const names = ['same', 'mode', 'added', 'removed', 'namespace', 'type'];
  await writeRun(
    store,
    k,
    names.map((name, i) => ({
      name,
      body: text(300 + i, i),
      change: `c-${name}`,
      metadata: meta,
      namespace: 'n',
    })),
  );
  const base = await loadChunkedBase(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  });
  const second: Record<string, Partial<RecordInput>> = {
    same: { metadata: { pinned: true, owner: 'alice', mode: 0o644 } }, // other key order, same fields
    mode: { metadata: { ...meta, mode: 0o600 } },
    added: { metadata: { ...meta, extra: null } },
    removed: { metadata: { mode: 0o644, owner: 'alice' } },
    namespace: { metadata: meta, namespace: 'other' },
    type: { metadata: meta, sourceType: 'sqlite' },
  };
  const summary = await writeRun(
    store,
    k,
    names.map((name) => ({
      name,
      body: untouchable(),
      change: `c-${name}`,
      namespace: 'n',
      ...second[name],
    })),
    { runId: 'run-0002', prevRunId: 'run-0001', base: base! },
  );
  t.equal(summary.unchangedRecords, names.length, 'no record was read');
  const open = (runId: string) =>
    openRun(store, {
      job: 'job-a',
      runId,
      secretKey: k.operational.secretKey,
      signerPublicKey: k.signer.publicKey,
    });
  const [one, two] = [await open('run-0001'), await open('run-0002')];
  const entries1 = new Map<string, IndexEntry>();
  for await (const e of one.records()) entries1.set(e.name, e);
  for await (const e of two.records()) {
    const want = second[e.name]!;
    t.same(e.metadata, want.metadata, `${e.name}: the run's own metadata`);
    t.equal(e.namespace, want.namespace ?? 'n');
    t.equal(e.sourceType, want.sourceType ?? 'files');
    t.same(e.chunks, entries1.get(e.name)!.chunks, `${e.name}: the base's chunks`);
    t.equal(e.sha384, entries1.get(e.name)!.sha384);
  }
  // Lines as stored: the reused one is the base's line, every one is the canonical line.
  const lines = async (runId: string) => {
    const index = await openChunkedIndex(store, (await open(runId)).manifest, base!.keys);
    return new Map(index.entries.map((e, i) => [e.name, { e, line: index.lines![i]! }]));
  };
  const [l1, l2] = [await lines('run-0001'), await lines('run-0002')];
  t.equal(l2.get('same')!.line, l1.get('same')!.line);
  for (const name of names.slice(1)) t.not(l2.get(name)!.line, l1.get(name)!.line, `${name}: a new line`);
  for (const { e, line } of l2.values())
    t.equal(line, canonicalChunkedEntryLine({ ...e, chunks: e.chunks! }));
});

t.test('a two-run chain: the second run stores only what changed and both read back', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const first = await writeRun(store, k, dataSet());
  t.equal(first.formatVersion, CHUNKED_FORMAT_VERSION);
  t.equal(first.newChunks, first.chunks, 'a first run stores every chunk it references');
  t.ok(first.newPacks >= 2, 'several packs');
  const afterFirst = bytesUnder(join(root, 'jobs/job-a/packs'));

  const base = await loadChunkedBase(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  });
  t.ok(base, 'the base opens');
  t.equal(base!.records.size, 42);

  // Run 2: small/3 rewritten, the big file modified in the middle (same size), one record added,
  // everything else unchanged (same change token: never read).
  const big = pseudoRandom(400 * 1024, 7);
  big.set(pseudoRandom(1000, 99), 200 * 1024);
  const records: RecordInput[] = [];
  for (let i = 0; i < 40; i++) {
    records.push(
      i === 3
        ? { name: 'small/3.txt', body: text(800, 1234), change: 'v2-3', metadata: { mode: 0o644 } }
        : { name: `small/${i}.txt`, body: untouchable(), change: `v1-${i}`, metadata: { mode: 0o644 } },
    );
  }
  records.push({ name: 'big.bin', body: big, change: 'big-v2' });
  records.push({ name: 'empty', body: untouchable(), change: 'e' });
  records.push({ name: 'new.txt', body: text(3000, 5) });
  const second = await writeRun(store, k, records, { runId: 'run-0002', prevRunId: 'run-0001', base });
  t.equal(second.unchangedRecords, 40, '39 small files and the empty record were not read');
  t.ok(second.newChunks < second.chunks / 4, `few new chunks (${second.newChunks} of ${second.chunks})`);
  t.ok(second.newBytes < 40 * 1024, `new bytes ${second.newBytes} are about what changed`);
  const grown = bytesUnder(join(root, 'jobs/job-a/packs')) - afterFirst;
  t.ok(grown < afterFirst / 4, `the job's packs grew by ${grown} bytes, not another copy of ${afterFirst}`);

  // Both runs read back completely with the break-glass key alone, and verify.
  for (const [runId, expected] of [
    ['run-0001', dataSet()],
    ['run-0002', records],
  ] as const) {
    const run = await openRun(store, {
      job: 'job-a',
      runId,
      secretKey: k.breakGlass.secretKey,
      signerPublicKey: k.signer.publicKey,
    });
    t.ok(isChunkedManifest(run.manifest.document));
    const got = await readAll(run);
    t.equal(got.length, expected.length);
    const v = await verifyRun(store, { job: 'job-a', runId, secretKey: k.breakGlass.secretKey });
    t.ok(v.ok, `${runId} verifies`);
    t.equal(v.checks.records, expected.length);
  }
  const run2 = await openRun(store, { job: 'job-a', runId: 'run-0002', secretKey: k.operational.secretKey });
  const got = await readAll(run2);
  const byName = new Map(got.map((g) => [g.entry.name, g.body]));
  const same = (a: Uint8Array | undefined, b: Uint8Array) =>
    a !== undefined && Buffer.from(a).equals(Buffer.from(b));
  t.ok(same(byName.get('big.bin'), big), 'the modified large record reads back exactly');
  t.ok(
    same(byName.get('small/5.txt'), text(500 + 5 * 97, 5)),
    "an unchanged record reads back from the first run's packs",
  );
  t.ok(same(byName.get('small/3.txt'), text(800, 1234)), 'the rewritten record reads back');
  t.equal(byName.get('empty')?.length, 0);
  // readRecords gives the same bytes.
  const entries = [];
  for await (const e of run2.records()) entries.push(e);
  let n = 0;
  for await (const r of run2.readRecords(entries)) {
    t.ok(
      Buffer.concat(r.pieces).equals(Buffer.from(byName.get(r.entry.name)!)),
      `readRecords: ${r.entry.name}`,
    );
    r.release();
    n++;
  }
  t.equal(n, entries.length);
  const pointer = await readRecoveryPointer(store);
  t.equal(pointer?.formatVersion, CHUNKED_FORMAT_VERSION);
  t.equal(pointer?.supported, true);
});

t.test('damage is named: a missing pack, a changed pack, a chunk id that does not match', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  await writeRun(store, k, dataSet());
  const packFiles = readdirSync(join(root, 'jobs/job-a/packs'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.parentPath.includes('/data/'))
    .map((e) => join(e.parentPath, e.name));
  t.ok(packFiles.length >= 2);
  const verify = () =>
    verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });

  const victim = packFiles[0]!;
  const saved = readFileSync(victim);
  const flipped = Buffer.from(saved);
  flipped[100] = flipped[100]! ^ 1;
  writeFileSync(victim, flipped);
  let v = await verify();
  t.equal(v.ok, false);
  t.equal(v.failure?.code, 'ERR_ARCHIVE_SHARD_TAMPERED', 'a changed pack fails its digest');

  rmSync(victim);
  v = await verify();
  t.equal(v.failure?.code, 'ERR_ARCHIVE_PACK_MISSING', 'a deleted pack is named');
  t.match(v.failure?.object ?? '', /packs\/[0-9a-f]{32}\/data\//);

  writeFileSync(victim, saved);
  v = await verify();
  t.ok(v.ok, 'restored pack verifies again');

  // Without its pack indexes the packs describe themselves (their chunk tables, every chunk
  // checked against its id): the run still verifies. Without the packs, nothing can be found.
  const keyDir = join(root, 'jobs/job-a/packs', readdirSync(join(root, 'jobs/job-a/packs'))[0]!);
  rmSync(join(keyDir, 'index'), { recursive: true });
  v = await verify();
  t.ok(v.ok, 'lost pack indexes are rebuilt from the packs');
  rmSync(join(keyDir, 'data'), { recursive: true });
  v = await verify();
  t.equal(v.failure?.code, 'ERR_ARCHIVE_CHUNK_MISSING');
});

t.test('chunks never cross jobs: another job with the same data has its own key and packs', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const a = await writeRun(store, k, dataSet());
  const b = await writeRun(store, k, dataSet(), { job: 'job-b' });
  t.equal(b.newChunks, b.chunks, 'job-b deduplicates nothing against job-a');
  t.equal(a.chunks, b.chunks);
  const ra = await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
  const rb = await openRun(store, { job: 'job-b', runId: 'run-0001', secretKey: k.operational.secretKey });
  const da = ra.manifest.document;
  const db = rb.manifest.document;
  t.ok(isChunkedManifest(da) && isChunkedManifest(db) && da.chunkKey !== db.chunkKey, 'distinct chunk keys');
});

t.test('addUnchanged takes a base record at once, or answers null and adds nothing', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  const meta = { mode: 0o644 };
  await writeRun(store, k, [
    { name: 'a', body: text(700, 1), change: 'a1', metadata: meta },
    { name: 'b', body: text(900, 2), change: 'b1', metadata: meta },
  ]);
  const base = await loadChunkedBase(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  });
  const w = await createChunkedWriter(
    chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base: base! }),
  );
  const a = w.addUnchanged({ name: 'a', size: 700, change: 'a1', metadata: meta });
  t.match(a, { seq: 0, name: 'a', size: 700, sizeChanged: false }, 'taken unread, in order');
  t.equal(a!.sha384, base!.records.get('a')!.sha384, "the base record's digest");
  t.equal(
    w.addUnchanged({ name: 'b', size: 900, change: 'b2', metadata: meta }),
    null,
    'another change token',
  );
  t.equal(w.addUnchanged({ name: 'b', size: 901, change: 'b1', metadata: meta }), null, 'another size');
  t.equal(w.addUnchanged({ name: 'new', change: 'n1' }), null, 'not in the base');
  t.equal(w.addUnchanged({ name: 'b', metadata: meta }), null, 'no change token');
  t.throws(() => w.addUnchanged({ name: '', change: 'x' }), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' });
  t.throws(() => w.addUnchanged({ name: 'b', change: 'b1', metadata: { x: [1] as unknown as string } }), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  // Nothing was added by the refusals: the record read next is the second of the run.
  const b = await w.addRecord({ name: 'b', body: text(950, 3), change: 'b2', metadata: meta });
  t.equal(b.seq, 1);
  const summary = await w.finish();
  t.match(summary, { records: 2, unchangedRecords: 1 });
  t.throws(() => w.addUnchanged({ name: 'a', change: 'a1' }), { code: 'ERR_ARCHIVE_INVALID_STATE' });
  const run = await openRun(store, { job: 'job-a', runId: 'run-0002', secretKey: k.operational.secretKey });
  const got = new Map((await readAll(run)).map((g) => [g.entry.name, Buffer.from(g.body)]));
  t.same([...got.keys()], ['a', 'b']);
  t.ok(got.get('a')!.equals(text(700, 1)), 'the unread record restores with its base bytes');
  t.ok(got.get('b')!.equals(text(950, 3)));
  const v = await verifyRun(store, { job: 'job-a', runId: 'run-0002', secretKey: k.operational.secretKey });
  t.ok(v.ok, 'the run verifies');
});

t.test(
  'answers asked ahead are kept until their records are added, and never trusted for another token',
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    // More records than the writer keeps answers for (1,024), so the oldest answers are dropped.
    const n = 1_100;
    const base = Array.from({ length: n }, (_, i) => ({
      name: `r/${i}`,
      body: text(40 + (i % 7), i),
      change: `c${i}`,
    }));
    await writeRun(store, k, base);
    const loaded = await loadChunkedBase(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
    });
    const w = await createChunkedWriter(
      chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base: loaded! }),
    );
    // A read-ahead asks about every record before it adds the first.
    for (const r of base)
      t.equal(w.wouldReuse({ name: r.name, size: r.body.length, change: r.change }), true);
    // An answer is for the token and size it was asked with: another one is looked up (and read).
    t.equal(w.addUnchanged({ name: 'r/1099', size: base[1099]!.body.length, change: 'other' }), null);
    t.equal(w.addUnchanged({ name: 'r/1098', size: 1, change: 'c1098' }), null);
    const changed = new Set(['r/1099', 'r/1098']);
    for (const r of base) {
      if (changed.has(r.name)) continue;
      const got = w.addUnchanged({ name: r.name, size: r.body.length, change: r.change });
      if (got === null) t.fail(`${r.name} was not taken unread`);
    }
    await w.addRecord({ name: 'r/1099', body: text(99, 5), change: 'other' });
    // The answer for r/1098 was consumed by the refusal above: asked without one, it is looked up.
    await w.addRecord({
      name: 'r/1098',
      body: untouchable(),
      size: base[1098]!.body.length,
      change: 'c1098',
    });
    const summary = await w.finish();
    t.match(summary, { records: n, unchangedRecords: n - 1 });
    const v = await verifyRun(store, { job: 'job-a', runId: 'run-0002', secretKey: k.operational.secretKey });
    t.ok(v.ok, 'the run verifies');
    const run = await openRun(store, { job: 'job-a', runId: 'run-0002', secretKey: k.operational.secretKey });
    const got = new Map((await readAll(run)).map((g) => [g.entry.name, Buffer.from(g.body)]));
    t.ok(
      got.get('r/0')!.equals(base[0]!.body),
      'an answer dropped from the memo still restores its base bytes',
    );
    t.ok(got.get('r/1099')!.equals(text(99, 5)), 'the record with another token was read');
    t.ok(got.get('r/1098')!.equals(base[1098]!.body));
  },
);

t.test('metadata is refused over 64 KiB of JSON, accepted under it', async (t) => {
  const { store } = fsStore(t);
  const w = await createChunkedWriter(chunkedOptions(store, keys()));
  // 60,000 plain characters: the writer's quick bound is over the limit, the exact size under it.
  await w.addRecord({ name: 'fits', body: text(10), metadata: { note: 'x'.repeat(60_000) } });
  await t.rejects(w.addRecord({ name: 'long', body: text(10), metadata: { note: 'x'.repeat(66_000) } }), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
    message: /64 KiB/,
  });
  // Escaped characters count as written: 11,000 control characters are 66,000 bytes of JSON.
  await t.rejects(
    w.addRecord({ name: 'escaped', body: text(10), metadata: { note: '\u0001'.repeat(11_000) } }),
    { code: 'ERR_ARCHIVE_INVALID_ARGUMENT', message: /64 KiB/ },
  );
  t.equal((await w.finish()).records, 1);
});

t.test('bad input is refused clearly', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  await t.rejects(createChunkedWriter(chunkedOptions(store, k, { packSize: -1 })), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  await t.rejects(
    createChunkedWriter(
      chunkedOptions(store, k, { chunking: { minSize: 3000, avgSize: 8192, maxSize: 65536 } }),
    ),
    {
      code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
    },
  );
  const w = await createChunkedWriter(chunkedOptions(store, k));
  await t.rejects(w.addRecord({ name: '', body: new Uint8Array(1) }), {
    code: 'ERR_ARCHIVE_INVALID_ARGUMENT',
  });
  const failing: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      yield new Uint8Array(10);
      throw new Error('disk gone');
    },
  };
  await t.rejects(w.addRecord({ name: 'x', body: failing }), { code: 'ERR_ARCHIVE_SOURCE_READ' });
  await t.rejects(w.finish(), { code: 'ERR_ARCHIVE_INVALID_STATE' }, 'a failed writer cannot commit');
  t.equal(
    await loadChunkedBase(store, { job: 'job-a', runId: null, secretKey: k.operational.secretKey }),
    null,
  );
});

t.test(
  'the writer read-back (newPacks) reads only the new packs and checks the rest by listing',
  async (t) => {
    const { store, root } = fsStore(t);
    const k = keys();
    const first = await writeRun(store, k, dataSet());
    const base = await loadChunkedBase(store, {
      job: 'job-a',
      runId: 'run-0001',
      secretKey: k.operational.secretKey,
    });
    const records = dataSet().map((r) =>
      r.name === 'small/1.txt' ? { ...r, body: text(900, 77), change: 'v2' } : r,
    );
    const w = await createChunkedWriter(
      chunkedOptions(store, k, { runId: 'run-0002', prevRunId: 'run-0001', base }),
    );
    t.equal(
      w.wouldReuse({ name: 'small/2.txt', size: 500 + 2 * 97, change: 'v1-2' }),
      true,
      'an unchanged record would be reused',
    );
    t.equal(
      w.wouldReuse({ name: 'small/2.txt', size: 500 + 2 * 97, change: 'other' }),
      false,
      'another token is read',
    );
    t.equal(w.wouldReuse({ name: 'nope', change: 'v1-2' }), false);
    for (const r of records) await w.addRecord(r);
    const second = await w.finish();
    t.equal(second.packIds.length, second.newPacks);
    t.ok(second.newPacks >= 1 && second.newPacks < first.newPacks);
    let opened = 0;
    const v = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0002',
      secretKey: k.operational.secretKey,
      newPacks: second.packIds,
      onProgress: (p) => {
        opened = p.shardsDone;
      },
    });
    t.ok(v.ok, 'the incremental read-back passes');
    t.equal(v.checks.records, records.length);
    t.equal(opened, second.newPacks, 'only the new packs were opened');
    // An old pack the run needs is gone: the listing check names it without reading anything.
    const old = readdirSync(join(root, 'jobs/job-a/packs'), { recursive: true, withFileTypes: true }).find(
      (e) =>
        e.isFile() && e.parentPath.includes('/data/') && !second.packIds.some((p) => e.name.startsWith(p)),
    )!;
    rmSync(join(old.parentPath, old.name));
    const bad = await verifyRun(store, {
      job: 'job-a',
      runId: 'run-0002',
      secretKey: k.operational.secretKey,
      newPacks: second.packIds,
    });
    t.equal(bad.failure?.code, 'ERR_ARCHIVE_PACK_MISSING');
  },
);

t.test('a checkpoint describes the packs stored so far; the resumed run stores nothing twice', async (t) => {
  const { store, root } = fsStore(t);
  const k = keys();
  const w = await createChunkedWriter(chunkedOptions(store, k));
  const records = dataSet();
  for (const r of records.slice(0, 41)) await w.addRecord(r);
  const cp = await w.exportCheckpoint();
  t.ok(isChunkedCheckpoint(cp), 'a chunked checkpoint');
  await w.abort();
  const packsBefore = bytesUnder(join(root, 'jobs/job-a/packs'));
  t.ok(packsBefore > 0);
  await t.rejects(
    resumeChunkedWriter(cp, {
      store,
      signerSecretKey: k.signer.secretKey,
      operationalSecretKey: k.breakGlass.secretKey,
    }),
    { code: 'ERR_ARCHIVE_CHECKPOINT_UNREADABLE' },
    'only the operational key opens it',
  );
  const r = await resumeChunkedWriter(cp, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  t.equal(r.resume.recordsDone, 0, 'records are fed again from the first');
  for (const rec of dataSet()) await r.writer.addRecord(rec);
  const done = await r.writer.finish();
  t.ok(
    done.newChunks < done.chunks,
    `chunks stored before the crash were referenced (${done.newChunks} new of ${done.chunks})`,
  );
  const v = await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.breakGlass.secretKey });
  t.ok(v.ok, 'the resumed run verifies');
  t.equal(v.checks.records, records.length);
});

/** `store` with its `put` replaced (a watched or failing destination). */
function withPut(store: ObjectStore, put: ObjectStore['put']): ObjectStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'put') return put;
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

t.test(
  'the manifest is stored last: after the index and its signature, which are stored together',
  async (t) => {
    const k = keys();
    const { store } = fsStore(t);
    const { layout } = await import('../src/layout.ts');
    const index = layout.index('job-a', 'run-0001');
    const signature = layout.signature('job-a', 'run-0001');
    const manifest = layout.manifest('job-a', 'run-0001');
    const events: string[] = [];
    let letIndexLand: () => void = () => undefined;
    // Held until the signature is stored, or half a second (a writer storing them one after the
    // other then shows it in the order of the events instead of hanging).
    const indexHeld = new Promise<void>((r) => {
      letIndexLand = r;
      setTimeout(r, 500);
    });
    const watched = withPut(store, async (key, body, options) => {
      if (key === index) {
        events.push('index started');
        await indexHeld;
      }
      const r = await store.put(key, body, options);
      if (key === signature) {
        events.push('signature stored');
        letIndexLand();
      }
      if (key === index) events.push('index stored');
      if (key === manifest) events.push('manifest stored');
      return r;
    });
    await writeRun(watched, k, dataSet());
    t.same(events, ['index started', 'signature stored', 'index stored', 'manifest stored']);
    t.equal(
      (await verifyRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey })).ok,
      true,
    );

    for (const failing of [index, signature]) {
      const { store: s2 } = fsStore(t);
      const broken = withPut(s2, async (key, body, options) => {
        if (key === failing) throw Object.assign(new Error('disk full'), { code: 'ENOSPC' });
        return s2.put(key, body, options);
      });
      await t.rejects(
        writeRun(broken, k, dataSet()),
        { code: 'ERR_ARCHIVE_DESTINATION' },
        `${failing.split('/').pop()} not stored: the run fails`,
      );
      t.equal(await s2.head(manifest), null, 'and no manifest commits it');
    }
  },
);

/** A writer of run-0001 checkpointed after its first records, and a successor resumed from it. */
async function twoHolders(t: Test, store: ObjectStore, k: Keys, fence?: () => void) {
  const a = await createChunkedWriter(chunkedOptions(store, k, fence ? { beforeCommit: fence } : {}));
  const records = dataSet();
  for (const r of records.slice(0, 20)) await a.addRecord(r);
  const cp = await a.exportCheckpoint();
  for (const r of records.slice(20)) await a.addRecord(r);
  const resumed = await resumeChunkedWriter(cp, {
    store,
    signerSecretKey: k.signer.secretKey,
    operationalSecretKey: k.operational.secretKey,
  });
  for (const r of dataSet()) await resumed.writer.addRecord(r);
  t.teardown(() => a.abort().catch(() => undefined));
  return { a, b: resumed.writer, records };
}

t.test(
  "a holder that passed its fence, then stood still past its lease while its successor committed, does not replace the committed run's index or signature",
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    // The fence holds at the writer's first check (before the pack index and run index are
    // stored) and fails at the next: the lease was taken over while this writer stood still.
    let checks = 0;
    const lost = Object.assign(new Error('lease lost'), { code: 'ERR_STATE_LEASE_LOST' });
    const { a, b, records } = await twoHolders(t, store, k, () => {
      if (++checks > 1) throw lost;
    });
    const committed = await b.finish();
    const before = await Promise.all(
      ['index.bin', 'manifest.sig', 'manifest.json'].map((f) => store.head(`jobs/job-a/runs/run-0001/${f}`)),
    );
    await t.rejects(a.finish(), { code: 'ERR_ARCHIVE_DESTINATION' }, 'the stale commit is refused');
    t.equal(checks, 1, 'refused at its index put, before its second check');
    t.same(
      await Promise.all(
        ['index.bin', 'manifest.sig', 'manifest.json'].map((f) =>
          store.head(`jobs/job-a/runs/run-0001/${f}`),
        ),
      ),
      before,
      'index, signature and manifest are the successor’s',
    );
    const v = await verifyRun(store, {
      job: 'job-a',
      runId: committed.runId,
      secretKey: k.breakGlass.secretKey,
    });
    t.equal(v.ok, true, `the committed run verifies: ${JSON.stringify(v.failure)}`);
    t.equal(v.checks.records, records.length);
  },
);

t.test(
  'a resumed writer replaces the index and signature an attempt left without its manifest',
  async (t) => {
    const { store } = fsStore(t);
    const k = keys();
    const manifest = 'jobs/job-a/runs/run-0001/manifest.json';
    // The first attempt dies between its signature and its manifest.
    let dead = true;
    const dying = withPut(store, async (key, body, options) => {
      if (dead && key === manifest)
        throw Object.assign(new Error('killed'), { code: 'ERR_OBJECTSTORE_FAULT' });
      return store.put(key, body, options);
    });
    const { a, b, records } = await twoHolders(t, dying, k);
    await t.rejects(a.finish(), { code: 'ERR_ARCHIVE_DESTINATION' }, 'the first attempt dies');
    t.not(await store.head('jobs/job-a/runs/run-0001/index.bin'), null, 'it left its index');
    t.not(await store.head('jobs/job-a/runs/run-0001/manifest.sig'), null, 'and its signature');
    dead = false;
    const done = await b.finish();
    const v = await verifyRun(store, { job: 'job-a', runId: done.runId, secretKey: k.breakGlass.secretKey });
    t.equal(v.ok, true, `the resumed run verifies: ${JSON.stringify(v.failure)}`);
    t.equal(v.checks.records, records.length);
  },
);

t.test('a create-only put retried after its reply was lost finds its own bytes and goes on', async (t) => {
  const { store } = fsStore(t);
  const k = keys();
  // As an S3 client's retry does: the first attempt stored the object, its reply never came, the
  // retry is refused as a precondition failure.
  const retried = new Set<string>();
  const lossy = withPut(store, async (key, body, options) => {
    const r = await store.put(key, body, options);
    if (options?.ifNoneMatch === '*' && /runs\/run-0001\/(index\.bin|manifest\.sig)$/.test(key)) {
      retried.add(key.split('/').at(-1)!);
      return store.put(key, body, options);
    }
    return r;
  });
  const w = await createChunkedWriter(chunkedOptions(lossy, k));
  for (const r of dataSet()) await w.addRecord(r);
  const done = await w.finish();
  t.same([...retried].sort(), ['index.bin', 'manifest.sig'], 'both puts were refused on their retry');
  const v = await verifyRun(store, { job: 'job-a', runId: done.runId, secretKey: k.breakGlass.secretKey });
  t.equal(v.ok, true, 'the run committed and verifies');
});
