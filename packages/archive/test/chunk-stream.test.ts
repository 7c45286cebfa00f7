// The pipelined 0.2 record stream (src/internal/chunk-stream.ts) behind readRecords and the full
// verify: records whose chunks jump between many packs (more than the four a plan keeps visiting),
// a consumer that holds every record unreleased, stream order when a pack is gone, and packs
// counted once however often a plan revisits them. With the codec on a worker (shared buffers,
// chunk ids checked there, digests on the record-hash thread) and on the calling thread.
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { unwrapChunkKey } from '../src/chunked-reader.ts';
import {
  type ChunkedManifestDocument,
  createChunkedWriter,
  type IndexEntry,
  layout,
  loadChunkedBase,
  openRun,
  type RecordInput,
  verifyRun,
} from '../src/index.ts';
import {
  loadChunkMap,
  openPackIndex,
  PACK_LINE_MAX_BYTES,
  type PackLine,
  sealPackIndex,
} from '../src/internal/chunked-index.ts';
import { sessionSalt } from '../src/internal/run-binding.ts';
import { chunkedOptions, fsStore, keys, pseudoRandom, runEntries } from './helpers.ts';

const KIB = 1024;

/** Run 1: ten distinct records; run 2: each record is five of run 1's concatenated, shuffled. */
async function twoRuns(t: { teardown(fn: () => void): void }) {
  const { store, root } = fsStore(t);
  const k = keys();
  const parts = Array.from({ length: 10 }, (_, i) => pseudoRandom(150 * KIB + i * 777, 40 + i));
  const w1 = await createChunkedWriter(chunkedOptions(store, k));
  for (let i = 0; i < parts.length; i++) await w1.addRecord({ name: `part-${i}`, body: parts[i]! });
  await w1.finish();
  const base = await loadChunkedBase(store, {
    job: 'job-a',
    runId: 'run-0001',
    secretKey: k.operational.secretKey,
    signerPublicKey: k.signer.publicKey,
  });
  const bodies = new Map<string, Uint8Array>();
  const records: RecordInput[] = [];
  for (let r = 0; r < 6; r++) {
    const picks = [0, 1, 2, 3, 4].map((j) => (r * 7 + j * 3) % parts.length);
    const body = Buffer.concat(picks.map((p) => parts[p]!));
    bodies.set(`mix-${r}`, body);
    records.push({ name: `mix-${r}`, body });
  }
  bodies.set('empty', new Uint8Array(0));
  records.splice(2, 0, { name: 'empty', body: new Uint8Array(0) });
  const w2 = await createChunkedWriter({
    ...chunkedOptions(store, k),
    runId: 'run-0002',
    prevRunId: 'run-0001',
    base,
  });
  for (const r of records) await w2.addRecord(r);
  const second = await w2.finish();
  return { store, root, k, bodies, second };
}

for (const workers of [1, 0]) {
  t.test(
    `workers ${workers}: records jumping between packs read whole and in order, held unreleased`,
    async (t) => {
      const { store, k, bodies, second } = await twoRuns(t);
      t.ok(second.newChunks < second.chunks / 2, 'run 2 mostly references run 1');
      const run = await openRun(store, {
        job: 'job-a',
        runId: 'run-0002',
        secretKey: k.breakGlass.secretKey,
        workers,
      });
      const entries = await runEntries(run);
      const doc = run.manifest.document as ChunkedManifestDocument;
      t.ok(doc.totals.packs > 4, `more packs (${doc.totals.packs}) than a plan keeps visiting`);
      // Held: nothing is released until every record came out, so no buffer may be reused under them.
      const held = [];
      for await (const r of run.readRecords(entries)) held.push(r);
      t.same(
        held.map((r) => r.entry.name),
        entries.map((e) => e.name),
        'every record, in index order',
      );
      for (const r of held) {
        const body = Buffer.concat(r.pieces);
        t.equal(
          Buffer.compare(body, Buffer.from(bodies.get(r.entry.name)!)),
          0,
          `${r.entry.name}: its bytes`,
        );
        r.release();
        r.release();
      }
      const v = await verifyRun(store, {
        job: 'job-a',
        runId: 'run-0002',
        secretKey: k.operational.secretKey,
        workers,
      });
      t.ok(v.ok, 'the full verify passes');
      t.equal(v.checks.records, entries.length);
      t.equal(
        v.checks.shards,
        doc.totals.packs,
        'each referenced pack counted once, however often it was revisited',
      );
    },
  );
}

t.test(
  'a pack gone: the records before its first use come out first, then PACK_MISSING names it',
  async (t) => {
    const { store, root, k } = await twoRuns(t);
    const run = await openRun(store, {
      job: 'job-a',
      runId: 'run-0002',
      secretKey: k.operational.secretKey,
      workers: 1,
    });
    const doc = run.manifest.document as ChunkedManifestDocument;
    const entries = await runEntries(run);
    const chunkKeys = await unwrapChunkKey(doc, 'manifest', k.operational.secretKey);
    const map = await loadChunkMap(store, 'job-a', chunkKeys);
    // The pack of the third record's last chunk; the records before its first use must come out.
    const victim = map.chunks.get(entries.at(-2)!.chunks!.at(-1)!.id)!.pack;
    const firstUse = entries.findIndex((e) => e.chunks!.some((c) => map.chunks.get(c.id)!.pack === victim));
    const file = readdirSync(join(root, 'jobs/job-a/packs'), { recursive: true, withFileTypes: true }).find(
      (e) => e.isFile() && e.name === `${victim}.bin`,
    )!;
    rmSync(join(file.parentPath, file.name));
    const got: string[] = [];
    const error = await (async () => {
      try {
        for await (const r of run.readRecords(entries)) {
          got.push(r.entry.name);
          r.release();
        }
      } catch (e) {
        return e as { code?: string; object?: string };
      }
      return null;
    })();
    t.equal(error?.code, 'ERR_ARCHIVE_PACK_MISSING');
    t.match(error?.object, victim);
    t.same(
      got,
      entries.slice(0, firstUse).map((e) => e.name),
      `the ${firstUse} records before the pack's first use, in order`,
    );
  },
);

t.test(
  'a pack-index line claiming a pack over 256 MiB is malformed: never sized for, never trusted',
  async (t) => {
    const { store, k } = await twoRuns(t);
    const run = await openRun(store, { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey });
    const doc = run.manifest.document as ChunkedManifestDocument;
    const chunkKeys = await unwrapChunkKey(doc, 'manifest', k.operational.secretKey);
    const map = await loadChunkMap(store, 'job-a', chunkKeys);
    const line = [...map.packs.values()][0]!;
    const id = '0123456789abcdef0123456789abcdef';
    const open = (edit: Partial<PackLine>) =>
      openPackIndex(
        sealPackIndex('job-a', chunkKeys, id, [{ ...line, ...edit }], sessionSalt()).bytes,
        'job-a',
        chunkKeys,
        id,
      );
    t.equal(open({})?.length, 1, 'the line as written opens');
    t.equal(open({ plainSize: PACK_LINE_MAX_BYTES + 1 }), null, 'a plaintext size over the bound');
    t.equal(open({ size: 4 * 1024 ** 3 }), null, 'a stored size of 4 GiB');
  },
);

for (const workers of [1, 0]) {
  t.test(
    `workers ${workers}: partBytes hands a big record over in parts, in order, its last part only once its digest matched`,
    async (t) => {
      const { store, k, bodies } = await twoRuns(t);
      const run = await openRun(store, {
        job: 'job-a',
        runId: 'run-0002',
        secretKey: k.operational.secretKey,
        workers,
      });
      const entries = await runEntries(run);
      const partBytes = 100 * KIB;
      const packMax = 64 * KIB * 2; // the writer's pack size, with room for its last chunk
      const bytes = (pieces: Uint8Array[]) => pieces.reduce((n, p) => n + p.length, 0);
      // Every part is copied out and released at once (as a writer does): a released part's
      // buffer may be reused under it, so a wrong release shows as changed bytes.
      const got = new Map<string, Buffer[]>();
      const order: string[] = [];
      let open: string | null = null;
      for await (const r of run.readRecords(entries, { partBytes })) {
        const name = r.entry.name;
        if (r.part === undefined) {
          t.equal(open, null, `${name}: a whole record does not interrupt another's parts`);
          t.ok(r.entry.size <= partBytes, `${name}: whole only when not over partBytes`);
          order.push(name);
          got.set(name, [Buffer.concat(r.pieces)]);
        } else {
          if (r.part.index === 0) {
            t.equal(open, null, `${name}: its parts start after the previous record ended`);
            open = name;
            order.push(name);
            got.set(name, []);
          } else t.equal(open, name, `${name}: part ${r.part.index} follows its previous part`);
          t.equal(r.part.index, got.get(name)!.length, `${name}: parts numbered in a row`);
          if (!r.part.last) t.ok(bytes(r.pieces) >= partBytes, `${name}: a part holds at least partBytes`);
          t.ok(bytes(r.pieces) <= partBytes + packMax, `${name}: a part holds at most partBytes and a pack`);
          got.get(name)!.push(Buffer.concat(r.pieces));
          if (r.part.last) open = null;
        }
        r.release();
        r.release();
      }
      t.equal(open, null, 'no record left unfinished');
      t.same(
        order,
        entries.map((e) => e.name),
        'every record, in index order',
      );
      let parted = 0;
      for (const e of entries) {
        const parts = got.get(e.name)!;
        if (parts.length > 1) parted++;
        t.equal(
          Buffer.compare(Buffer.concat(parts), Buffer.from(bodies.get(e.name)!)),
          0,
          `${e.name}: its bytes`,
        );
      }
      t.equal(
        parted,
        entries.filter((e) => e.size > partBytes).length,
        'every record over partBytes came in more than one part',
      );
      t.ok(parted >= 5, `${parted} records in parts`);

      // Held: parts kept unreleased until the end keep their bytes.
      const held = [];
      for await (const r of run.readRecords(entries, { partBytes })) held.push(r);
      const joined = new Map<string, Buffer[]>();
      for (const r of held) {
        const list = joined.get(r.entry.name) ?? [];
        list.push(Buffer.concat(r.pieces));
        joined.set(r.entry.name, list);
        r.release();
      }
      for (const e of entries)
        t.equal(
          Buffer.compare(Buffer.concat(joined.get(e.name)!), Buffer.from(bodies.get(e.name)!)),
          0,
          `${e.name}: its bytes, held`,
        );

      // A record whose digest does not match: its earlier parts come out (their chunks verified),
      // the last one never does; RECORD_TAMPERED instead, after the records before it.
      const victim = entries.findIndex((e, i) => i > 0 && e.size > 3 * partBytes);
      const altered: IndexEntry[] = entries.map((e, i) =>
        i === victim ? { ...e, sha384: `sha384:${'0'.repeat(96)}` as IndexEntry['sha384'] } : e,
      );
      const seen: { name: string; last: boolean }[] = [];
      const error = await (async () => {
        try {
          for await (const r of run.readRecords(altered, { partBytes })) {
            seen.push({ name: r.entry.name, last: r.part?.last ?? true });
            r.release();
          }
        } catch (e) {
          return e as { code?: string; message?: string };
        }
        return null;
      })();
      t.equal(error?.code, 'ERR_ARCHIVE_RECORD_TAMPERED');
      t.match(error?.message, new RegExp(`: record ${entries[victim]!.seq}$`), 'naming the record');
      t.same(
        [...new Set(seen.filter((s) => s.last).map((s) => s.name))],
        entries.slice(0, victim).map((e) => e.name),
        'the records before it, whole',
      );
      const victimParts = seen.filter((s) => s.name === entries[victim]!.name);
      t.ok(victimParts.length >= 1, `${victimParts.length} parts of the altered record handed over`);
      t.ok(
        victimParts.every((s) => !s.last),
        'none of them its last',
      );

      // maxRecordBytes holds for records handed over whole only: one in parts is never held whole.
      const big = entries.filter((e) => e.size > partBytes);
      let n = 0;
      for await (const r of run.readRecords(big, { partBytes, maxRecordBytes: partBytes })) {
        if (r.part?.last !== false) n++;
        r.release();
      }
      t.equal(n, big.length, 'records over maxRecordBytes come, in parts');
      await t.rejects(
        (async () => {
          for await (const r of run.readRecords(big, { maxRecordBytes: partBytes })) r.release();
        })(),
        { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
        'and are refused without partBytes',
      );
      const whole = big[0]!;
      await t.rejects(
        (async () => {
          const options = { partBytes: whole.size, maxRecordBytes: 1024 };
          for await (const r of run.readRecords([whole], options)) r.release();
        })(),
        { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
        'one that would come whole is still refused over maxRecordBytes',
      );

      for (const bad of [0, -1, Number.NaN]) {
        await t.rejects(
          (async () => {
            for await (const r of run.readRecords(entries, { partBytes: bad })) r.release();
          })(),
          { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' },
          `partBytes ${bad} refused`,
        );
      }
    },
  );
}

t.test(
  'a record failing its digest before a record in parts: nothing after it comes out, though later records already verified',
  async (t) => {
    // s0 in one pack, s1 ending in the next one, where `big` starts: when big's first part is due,
    // s0's and s1's hash requests are both pending; s0's mismatch must end the stream there, not
    // after handing over s1 (verified, but after the failure). Sizes are searched until the
    // writer lays the records out so.
    const found = await (async () => {
      for (const a of [40, 48, 52, 56, 60, 62]) {
        for (const b of [4, 8, 12, 20]) {
          const { store } = fsStore(t);
          const k = keys();
          const w = await createChunkedWriter(chunkedOptions(store, k));
          const bodies = [pseudoRandom(a * KIB, a), pseudoRandom(b * KIB, b), pseudoRandom(700 * KIB, 3)];
          for (const [i, name] of ['s0', 's1', 'big'].entries())
            await w.addRecord({ name, body: bodies[i]! });
          await w.finish();
          const run = await openRun(store, {
            job: 'job-a',
            runId: 'run-0001',
            secretKey: k.operational.secretKey,
          });
          const entries = await runEntries(run);
          const doc = run.manifest.document as ChunkedManifestDocument;
          const map = await loadChunkMap(
            store,
            'job-a',
            await unwrapChunkKey(doc, 'manifest', k.operational.secretKey),
          );
          const packsOf = (e: IndexEntry) => e.chunks!.map((c) => map.chunks.get(c.id)!.pack);
          const [p0, p1, p2] = entries.map(packsOf) as [string[], string[], string[]];
          if (new Set(p0).size === 1 && p1.at(-1) !== p0[0] && p2[0] === p1.at(-1)) return { run, entries };
        }
      }
      return null;
    })();
    t.ok(found, 'a layout with s0 alone in a pack and s1 ending where big starts');
    if (found === null) return;
    const { run, entries } = found;
    // Unaltered, in parts: every record comes out.
    const names: string[] = [];
    for await (const r of run.readRecords(entries, { partBytes: 100 * KIB })) {
      if (r.part?.last !== false) names.push(r.entry.name);
      r.release();
    }
    t.same(names, ['s0', 's1', 'big']);
    const altered: IndexEntry[] = entries.map((e, i) =>
      i === 0 ? { ...e, sha384: `sha384:${'0'.repeat(96)}` as IndexEntry['sha384'] } : e,
    );
    const seen: string[] = [];
    const error = await (async () => {
      try {
        for await (const r of run.readRecords(altered, { partBytes: 100 * KIB })) {
          seen.push(`${r.entry.name}${r.part === undefined ? '' : `#${r.part.index}`}`);
          r.release();
        }
      } catch (e) {
        return e as { code?: string; message?: string };
      }
      return null;
    })();
    t.equal(error?.code, 'ERR_ARCHIVE_RECORD_TAMPERED');
    t.match(error?.message, new RegExp(`: record ${entries[0]!.seq}$`), 'naming s0');
    t.same(seen, [], 'no record after it, whole or in part');
  },
);

t.test(
  'two signed ids for the same bytes of a pack: the second record using them is refused, after the first',
  async (t) => {
    const { store, k } = await twoRuns(t);
    const opts = { job: 'job-a', runId: 'run-0001', secretKey: k.operational.secretKey };
    const first = await openRun(store, opts);
    const doc = first.manifest.document as ChunkedManifestDocument;
    const chunkKeys = await unwrapChunkKey(doc, 'manifest', k.operational.secretKey);
    const map = await loadChunkMap(store, 'job-a', chunkKeys);
    const entries = await runEntries(first);
    const owner = entries[0]!;
    const chunk = owner.chunks![0]!;
    const at = map.chunks.get(chunk.id)!;
    // A pack index (sealed with the job's chunk key, as only a key holder can) describing the pack
    // of the first record's first chunk again, with another id for that chunk.
    const line = map.packs.get(at.pack)!;
    const other = 'f'.repeat(64);
    const indexId = 'fedcba9876543210fedcba9876543210';
    const forged = {
      ...line,
      chunks: line.chunks.map((c) => (c.offset === at.offset ? { ...c, id: other } : c)),
    };
    t.not(JSON.stringify(forged.chunks), JSON.stringify(line.chunks), 'the forged line differs');
    await store.put(
      layout.packIndex('job-a', chunkKeys.keyId, indexId),
      sealPackIndex('job-a', chunkKeys, indexId, [forged], sessionSalt()).bytes,
    );
    const run = await openRun(store, opts);
    // A second record naming the other id: its bytes are the same offset and length in that pack.
    const twin: IndexEntry = { ...owner, seq: owner.seq + 1, chunks: [{ id: other, length: chunk.length }] };
    const seen: string[] = [];
    const error = await (async () => {
      try {
        for await (const r of run.readRecords([owner, twin])) {
          seen.push(r.entry.name);
          r.release();
        }
      } catch (e) {
        return e as { code?: string; message?: string };
      }
      return null;
    })();
    t.same(seen, [owner.name], 'the record with the pack’s own id comes first');
    t.equal(error?.code, 'ERR_ARCHIVE_CHUNK_TAMPERED', 'then the other id is refused');
    t.match(error?.message, new RegExp(`chunk ${other} of run job-a/run-0001`));
  },
);
