/**
 * The FastCDC chunker of format 0.2: frozen vectors (fixtures/chunker/vectors.json) checked both
 * by the fast chunker and by the slow reference in chunker-vectors.ts, independence from how the
 * bytes are split into pieces, resistance to a shift (the reason for content-defined chunking),
 * the size rules, and refused parameters.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import t from 'tap';
import {
  CHUNK_PARAMS,
  type ChunkParams,
  ContentChunker,
  chunkBoundaries,
  gearTable,
} from '../src/internal/chunker.ts';
import {
  caseInput,
  counterModeBytes,
  gearTableBytes,
  referenceBoundaries,
  referenceGear,
  SMALL_PARAMS,
  VECTOR_CASES,
  VECTOR_SEED,
} from './chunker-vectors.ts';

interface Fixture {
  gear: { first4: string[]; tableSha256: string };
  vectors: {
    name: string;
    input: { kind: string; seed?: string; length: number };
    inputSha256: string;
    params: ChunkParams;
    boundaries: number[];
  }[];
}

const fixture: Fixture = JSON.parse(
  readFileSync(new URL('./fixtures/chunker/vectors.json', import.meta.url), 'utf8'),
);
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const MIB = 1024 * 1024;
/** The 4 MiB random input of the first vector (prefix of every counter-mode input). */
const random4 = counterModeBytes(VECTOR_SEED, 4 * MIB);

/** Feeds `data` as one record in pieces of the sizes `pieceSize` yields; returns the cut offsets. */
function streamed(data: Uint8Array, params: Partial<ChunkParams>, pieceSize: () => number): number[] {
  const chunker = new ContentChunker(params);
  const cuts: number[] = [];
  let chunkStart = 0;
  for (let off = 0; off < data.length; ) {
    const piece = data.subarray(off, Math.min(data.length, off + pieceSize()));
    let at = 0;
    for (let end = chunker.next(piece, at); end >= 0; end = chunker.next(piece, at)) {
      cuts.push(off + end);
      chunkStart = off + end;
      at = end;
    }
    off += piece.length;
    if (chunker.pending !== off - chunkStart) throw new Error(`pending ${chunker.pending} at ${off}`);
  }
  if (chunkStart < data.length) cuts.push(data.length);
  return cuts;
}

function lengths(cuts: number[]): number[] {
  return cuts.map((c, i) => c - (i === 0 ? 0 : cuts[i - 1]!));
}

/** Deterministic piece sizes in [1, max] (xorshift32). */
function randomSizes(max: number, seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return 1 + (x % max);
  };
}

t.test('gear table: derived as specified, pinned by the fixture', async (t) => {
  const ref = referenceGear();
  const table = gearTable();
  t.equal(table.length, 256);
  t.same(Array.from(table), ref, 'the module table equals the definition');
  t.same(
    ref.slice(0, 4).map((g) => `0x${g.toString(16).padStart(8, '0')}`),
    fixture.gear.first4,
    'first four entries',
  );
  t.equal(sha256(gearTableBytes(ref)), fixture.gear.tableSha256, 'digest of the whole table');
  t.same(CHUNK_PARAMS, { minSize: 512 * 1024, avgSize: 1024 * 1024, maxSize: 8 * 1024 * 1024 });
});

t.test('vectors: fast chunker and reference both reproduce the frozen boundaries', async (t) => {
  t.equal(fixture.vectors.length, VECTOR_CASES.length, 'one vector per case');
  for (const c of VECTOR_CASES) {
    const v = fixture.vectors.find((x) => x.name === c.name);
    if (!v) {
      t.fail(`vector ${c.name} missing`);
      continue;
    }
    t.same(v.params, c.params, `${c.name}: params`);
    t.equal(v.input.length, c.length, `${c.name}: length`);
    const data = caseInput(c);
    t.equal(sha256(data), v.inputSha256, `${c.name}: input regenerated`);
    t.same(chunkBoundaries(data, c.params), v.boundaries, `${c.name}: fast chunker`);
    t.same(referenceBoundaries(data, c.params), v.boundaries, `${c.name}: reference chunker`);
  }
});

t.test('fast chunker equals the reference on inputs beyond the vectors', async (t) => {
  // Other seeds and lengths around the size thresholds, and low-entropy data (a few byte values).
  const low = counterModeBytes('low-entropy', 1 * MIB).map((b) => b & 3);
  const inputs: [string, Uint8Array][] = [
    ['other seed', counterModeBytes('another seed', 2 * MIB)],
    ['low entropy', low],
    ...[2047, 2048, 2049, 8191, 8192, 8193, 65535, 65536, 65537].map((n): [string, Uint8Array] => [
      `length ${n}`,
      random4.subarray(100, 100 + n),
    ]),
  ];
  for (const [name, data] of inputs) {
    t.same(chunkBoundaries(data, SMALL_PARAMS), referenceBoundaries(data, SMALL_PARAMS), name);
  }
  // The fast path reads aligned 32-bit words: an unaligned start, and a resizable buffer (which it
  // must not take a fixed word view of), go partly or wholly byte by byte and must agree as well.
  const unaligned = random4.subarray(3, 3 + 300000);
  t.same(chunkBoundaries(unaligned, SMALL_PARAMS), referenceBoundaries(unaligned, SMALL_PARAMS), 'unaligned');
  // ES2024 resizable ArrayBuffer (the project's lib is ES2023).
  const Resizable = ArrayBuffer as unknown as new (n: number, o: { maxByteLength: number }) => ArrayBuffer;
  const resizable = new Uint8Array(new Resizable(300000, { maxByteLength: 400000 }));
  resizable.set(random4.subarray(0, 300000));
  t.same(chunkBoundaries(resizable, SMALL_PARAMS), referenceBoundaries(resizable, SMALL_PARAMS), 'resizable');
  const params = { minSize: 1024, avgSize: 4096, maxSize: 16384 };
  t.same(chunkBoundaries(low, params), referenceBoundaries(low, params), 'low entropy, 1/4/16 KiB');
});

t.test('boundaries do not depend on how the bytes are split into pieces', async (t) => {
  const whole = chunkBoundaries(random4, SMALL_PARAMS);
  const splits: [string, () => number][] = [
    ['1 byte', () => 1],
    ['7 bytes', () => 7],
    ['2 KiB (the min size)', () => 2048],
    ['8 KiB + 1', () => 8193],
    ['64 KiB', () => 65536],
    ['1 MiB', () => MIB],
    ['random 1..100', randomSizes(100, 1)],
    ['random 1..70000', randomSizes(70000, 2)],
  ];
  for (const [name, size] of splits) t.same(streamed(random4, SMALL_PARAMS, size), whole, name);

  const big = counterModeBytes(VECTOR_SEED, 16 * MIB);
  const wholeDefault = chunkBoundaries(big, CHUNK_PARAMS);
  t.same(
    streamed(big, {}, () => 65536),
    wholeDefault,
    'default params, 64 KiB pieces',
  );
  t.same(streamed(big, {}, randomSizes(MIB, 3)), wholeDefault, 'default params, random pieces up to 1 MiB');
  t.same(
    streamed(big, {}, () => 333),
    wholeDefault,
    'default params, 333-byte pieces',
  );
});

t.test('an insertion changes only the chunks around it', async (t) => {
  const at = 2 * MIB + 12345;
  const inserted = counterModeBytes('inserted', 100);
  const changed = new Uint8Array(random4.length + 100);
  changed.set(random4.subarray(0, at));
  changed.set(inserted, at);
  changed.set(random4.subarray(at), at + 100);
  const before = chunkBoundaries(random4, SMALL_PARAMS);
  const after = chunkBoundaries(changed, SMALL_PARAMS);

  t.same(
    after.filter((c) => c <= at),
    before.filter((c) => c <= at),
    'boundaries before the insertion unchanged',
  );
  // Once a boundary falls on an old one (shifted by 100), every later one does.
  const shifted = new Set(before.map((c) => c + 100));
  const resync = after.findIndex((c) => c > at && shifted.has(c));
  t.ok(resync > 0, 'the chunking falls back into step after the insertion');
  const tailBefore = before.filter((c) => c + 100 >= after[resync]!).map((c) => c + 100);
  t.same(after.slice(resync), tailBefore, 'every boundary after that is an old one shifted by 100');

  const digests = (data: Uint8Array, cuts: number[]) =>
    new Set(cuts.map((c, i) => sha256(data.subarray(i === 0 ? 0 : cuts[i - 1]!, c))));
  const old = digests(random4, before);
  const now = [...digests(changed, after)];
  const fresh = now.filter((d) => !old.has(d)).length;
  t.ok(fresh >= 1 && fresh <= 3, `only ${fresh} of ${now.length} chunks are new`);
  t.ok(now.length - fresh >= before.length - 3, 'all but at most 3 old chunks are reused');
});

t.test('size rules: min and max respected, short, empty and all-zero records', async (t) => {
  for (const [params, data] of [
    [SMALL_PARAMS, random4],
    [CHUNK_PARAMS, counterModeBytes(VECTOR_SEED, 16 * MIB)],
  ] as const) {
    const lens = lengths(chunkBoundaries(data, params));
    const last = lens.pop()!;
    const name = `${params.minSize}/${params.avgSize}/${params.maxSize}`;
    t.ok(
      lens.every((n) => n >= params.minSize && n <= params.maxSize),
      `${name}: every chunk but the last within [min, max]`,
    );
    t.ok(last > 0 && last <= params.maxSize, `${name}: last chunk non-empty and at most max`);
    t.ok(
      lens.some((n) => n < params.avgSize) && lens.some((n) => n > params.avgSize),
      `${name}: both cut conditions (below and above the average size) occur`,
    );
  }
  const random = lengths(chunkBoundaries(random4, SMALL_PARAMS));
  const mean = random4.length / random.length;
  t.ok(mean > 8192 && mean < 12288, `mean chunk ${Math.round(mean)} near the normalised target`);

  t.same(chunkBoundaries(new Uint8Array(0)), [], 'an empty record has no chunks');
  const empty = new ContentChunker();
  t.equal(empty.next(new Uint8Array(0)), -1);
  t.equal(empty.pending, 0);
  t.same(chunkBoundaries(random4.subarray(0, 2047), SMALL_PARAMS), [2047], 'shorter than min: one chunk');
  t.same(chunkBoundaries(random4.subarray(0, 5), SMALL_PARAMS), [5]);

  const zeros = new Uint8Array(1000000);
  const expected = Array.from({ length: Math.floor(zeros.length / 65536) }, (_, i) => (i + 1) * 65536);
  t.same(chunkBoundaries(zeros, SMALL_PARAMS), [...expected, zeros.length], 'all-zero: cut at every max');
  const zeroCuts = chunkBoundaries(new Uint8Array(20 * MIB));
  t.same(zeroCuts, [8 * MIB, 16 * MIB, 20 * MIB], 'all-zero, default params: cut at every 8 MiB');
});

t.test('reset starts a new record; a boundary at the end of a piece is reported', async (t) => {
  const chunker = new ContentChunker(SMALL_PARAMS);
  t.equal(chunker.next(random4.subarray(0, 5000)), -1);
  t.equal(chunker.pending, 5000);
  chunker.reset();
  t.equal(chunker.pending, 0);
  const whole = chunkBoundaries(random4, SMALL_PARAMS);
  t.same(
    streamed(random4, SMALL_PARAMS, () => 4096),
    whole,
    'same cuts after reset',
  );

  // A piece that ends exactly on a boundary returns its length, and the next piece starts fresh.
  const first = whole[0]!;
  const c2 = new ContentChunker(SMALL_PARAMS);
  t.equal(c2.next(random4.subarray(0, first)), first);
  t.equal(c2.pending, 0);
  t.equal(c2.next(random4.subarray(0, first), first), -1, 'nothing left in the piece');
  t.equal(c2.next(random4.subarray(first)), whole[1]! - first);

  const max = new ContentChunker(SMALL_PARAMS);
  const zeros = new Uint8Array(65536);
  t.equal(max.next(zeros.subarray(0, 65535)), -1);
  t.equal(max.next(zeros.subarray(0, 1)), 1, 'the byte reaching max closes the chunk');
});

t.test('invalid parameters and offsets are refused with ERR_ARCHIVE_INVALID_ARGUMENT', async (t) => {
  const bad: Partial<ChunkParams>[] = [
    { minSize: 3000, avgSize: 8192, maxSize: 65536 },
    { minSize: 2048, avgSize: 8000, maxSize: 65536 },
    { minSize: 2048, avgSize: 8192, maxSize: 65537 },
    { minSize: 8192, avgSize: 8192, maxSize: 65536 },
    { minSize: 2048, avgSize: 65536, maxSize: 65536 },
    { minSize: 2048, avgSize: 131072, maxSize: 65536 },
    { minSize: 32, avgSize: 128, maxSize: 256 },
    { minSize: 512 * 1024, avgSize: 1024 * 1024, maxSize: 128 * 1024 * 1024 },
    { minSize: 0 },
    { minSize: -2048 },
    { minSize: Number.NaN },
    { avgSize: 2 ** 20 + 0.5 },
    { maxSize: Number.POSITIVE_INFINITY },
    { minSize: '2048' as unknown as number },
    { minSize: 4 * 1024 * 1024, maxSize: 2 * 1024 * 1024 },
  ];
  for (const p of bad) {
    t.throws(
      () => new ContentChunker(p),
      { name: 'ArchiveError', code: 'ERR_ARCHIVE_INVALID_ARGUMENT', message: /chunk parameters/ },
      JSON.stringify(p),
    );
  }
  t.throws(() => chunkBoundaries(random4, { avgSize: 3 * MIB }), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' });
  t.doesNotThrow(() => new ContentChunker({ minSize: 64, avgSize: 128, maxSize: 64 * MIB }), 'the limits');
  t.same(
    new ContentChunker({ maxSize: 16 * MIB }).params,
    { ...CHUNK_PARAMS, maxSize: 16 * MIB },
    'defaults fill',
  );
  const c = new ContentChunker();
  for (const from of [-1, 11, 0.5, Number.NaN]) {
    t.throws(() => c.next(new Uint8Array(10), from), { code: 'ERR_ARCHIVE_INVALID_ARGUMENT' });
  }
});
