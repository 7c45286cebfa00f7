// readRecords with `checkRecordDigest: false` (a restore's phase two over a 0.2 run): the records'
// SHA-384 is not computed, and every other check still holds: each pack's digest and tag, and each
// chunk against its keyed id. With the codec on a worker and on the calling thread.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { unwrapChunkKey } from '../src/chunked-reader.ts';
import {
  type ChunkedManifestDocument,
  createChunkedWriter,
  type IndexEntry,
  isArchiveError,
  openRun,
  type RecordRead,
  type RecordsReadOptions,
} from '../src/index.ts';
import { openPackIndex, sealPackIndex } from '../src/internal/chunked-index.ts';
import { sessionSalt } from '../src/internal/run-binding.ts';
import { chunkedOptions, fsStore, keys, pseudoRandom, runEntries } from './helpers.ts';

const KIB = 1024;
const JOB = 'job-a';
const RUN = 'run-0001';

/** One run: two single-chunk records of equal size, an empty one, and one over many packs. */
async function oneRun(t: { teardown(fn: () => void): void }) {
  const { store, root } = fsStore(t);
  const k = keys();
  const bodies = new Map<string, Uint8Array>([
    ['a', pseudoRandom(1500, 3)],
    ['b', pseudoRandom(1500, 4)],
    ['empty', new Uint8Array(0)],
    ['large', pseudoRandom(400 * KIB, 5)],
  ]);
  const w = await createChunkedWriter(chunkedOptions(store, k));
  for (const [name, body] of bodies) await w.addRecord({ name, body });
  await w.finish();
  return { store, root, k, bodies };
}

/** Reads `entries`, releasing each record as it comes; the bytes per name (parts joined). */
async function read(
  run: Awaited<ReturnType<typeof openRun>>,
  entries: IndexEntry[],
  options: RecordsReadOptions,
): Promise<Map<string, Buffer>> {
  const got = new Map<string, Buffer[]>();
  for await (const r of run.readRecords(entries, options) as AsyncIterable<RecordRead>) {
    const list = got.get(r.entry.name) ?? [];
    list.push(Buffer.concat(r.pieces.map((p) => Buffer.from(p))));
    got.set(r.entry.name, list);
    r.release();
  }
  return new Map([...got].map(([n, l]) => [n, Buffer.concat(l)]));
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (e) {
    return isArchiveError(e) ? e.code : String(e);
  }
}

for (const workers of [1, 0]) {
  t.test(`workers ${workers}: records read byte-exact and in order, whole and in parts`, async (t) => {
    const { store, k, bodies } = await oneRun(t);
    const run = await openRun(store, { job: JOB, runId: RUN, secretKey: k.operational.secretKey, workers });
    const entries = await runEntries(run);
    for (const options of [{ checkRecordDigest: false }, { checkRecordDigest: false, partBytes: 64 * KIB }]) {
      const got = await read(run, entries, options);
      t.same([...got.keys()], [...bodies.keys()], `${JSON.stringify(options)}: every record, in order`);
      for (const [name, body] of bodies) t.ok(got.get(name)!.equals(body), `${name} byte-exact`);
    }
    let parts = 0;
    for await (const r of run.readRecords(entries, { checkRecordDigest: false, partBytes: 64 * KIB })) {
      if (r.entry.name === 'large') parts++;
      r.release();
    }
    t.ok(parts > 1, `the large record came in ${parts} parts`);
  });

  t.test(`workers ${workers}: the record digest is what it skips`, async (t) => {
    const { store, k, bodies } = await oneRun(t);
    const run = await openRun(store, { job: JOB, runId: RUN, secretKey: k.operational.secretKey, workers });
    const entries = await runEntries(run);
    // An entry whose stated SHA-384 is wrong (what only a full read can find out): refused by
    // default, read by the second read that leaves the digest to the first.
    const wrong = entries.map((e) =>
      e.name === 'large' ? { ...e, sha384: `sha384:${'0'.repeat(96)}` as IndexEntry['sha384'] } : e,
    );
    t.equal(await codeOf(read(run, wrong, {})), 'ERR_ARCHIVE_RECORD_TAMPERED', 'checked by default');
    const got = await read(run, wrong, { checkRecordDigest: false });
    t.ok(got.get('large')!.equals(bodies.get('large')!), 'not computed with checkRecordDigest: false');
    // An empty record has no chunk to check: its digest is still compared with the empty one.
    const emptyWrong = entries.map((e) =>
      e.name === 'empty' ? { ...e, sha384: `sha384:${'0'.repeat(96)}` as IndexEntry['sha384'] } : e,
    );
    t.equal(
      await codeOf(read(run, emptyWrong, { checkRecordDigest: false })),
      'ERR_ARCHIVE_RECORD_TAMPERED',
      'an empty record stating another digest',
    );
  });

  t.test(`workers ${workers}: without the record digest every chunk is still checked`, async (t) => {
    const { store, root, k } = await oneRun(t);
    const open = () => openRun(store, { job: JOB, runId: RUN, secretKey: k.operational.secretKey, workers });
    const run = await open();
    const entries = await runEntries(run);
    const doc = run.manifest.document as ChunkedManifestDocument;
    const chunkKeys = await unwrapChunkKey(doc, 'manifest', k.operational.secretKey);
    const [a, b] = [entries[0]!.chunks!, entries[1]!.chunks!];
    t.equal(a.length, 1);
    t.equal(b.length, 1);
    // A pack index rewritten by someone holding the keys: records a and b swap places in the pack
    // (same length, so the chunks still tile it). Pack digest and tag are unchanged and verify;
    // only the chunk ids can tell that a's id now names b's bytes.
    const dir = join(root, 'jobs', JOB, 'packs', chunkKeys.keyId, 'index');
    let swapped = 0;
    for (const file of readdirSync(dir)) {
      const id = file.replace(/\.bin$/, '');
      const lines = openPackIndex(readFileSync(join(dir, file)), JOB, chunkKeys, id)!;
      for (const line of lines) {
        for (const c of line.chunks) {
          const other = c.id === a[0]!.id ? b[0]!.id : c.id === b[0]!.id ? a[0]!.id : null;
          if (other === null) continue;
          c.id = other;
          swapped++;
        }
      }
      writeFileSync(join(dir, file), sealPackIndex(JOB, chunkKeys, id, lines, sessionSalt()).bytes);
    }
    t.equal(swapped, 2, 'both chunks moved');
    const forged = await open();
    t.equal(
      await codeOf(read(forged, entries, { checkRecordDigest: false })),
      'ERR_ARCHIVE_CHUNK_TAMPERED',
      'a chunk whose bytes are not its id',
    );

    // A pack's bytes changed: its digest no longer matches.
    const fresh = await oneRun(t);
    const packs = readdirSync(join(fresh.root, 'jobs', JOB, 'packs'), {
      recursive: true,
      withFileTypes: true,
    })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name))
      .filter((p) => p.includes('/data/'));
    t.ok(packs.length > 1);
    for (const p of packs) {
      const bytes = readFileSync(p);
      bytes[bytes.length >> 1]! ^= 1;
      writeFileSync(p, bytes);
    }
    const run2 = await openRun(fresh.store, {
      job: JOB,
      runId: RUN,
      secretKey: fresh.k.operational.secretKey,
      workers,
    });
    t.equal(
      await codeOf(read(run2, await runEntries(run2), { checkRecordDigest: false })),
      'ERR_ARCHIVE_SHARD_TAMPERED',
      'a pack whose bytes changed',
    );
  });
}
