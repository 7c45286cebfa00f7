/**
 * The chunk checks of an opened pack (codec-core.ts): an uncompressed pack has them fed piece by
 * piece as it decrypts, a compressed one checks them after decompression. Both must give the same
 * verdict for any list of ranges: the first failing chunk in the order asked, after the tag.
 */
import * as crypto from 'node:crypto';
import * as zlib from 'node:zlib';
import t from 'tap';
import { type ChunkCheck, codecCore, type OpenMessage } from '../src/internal/codec-core.ts';
import { pseudoRandom } from './helpers.ts';

const core = codecCore(crypto, zlib);
const KEY = new Uint8Array(32).fill(7);
const BINDING = new Uint8Array([3, 0x6a, 0x6f, 0x62, 4, 0x70, 0x61, 0x63, 0x6b]);
const RUN_TAG = new Uint8Array(48).fill(9);
const SALT = new Uint8Array([1, 2, 3, 4, 5, 6]);
const macKey = crypto.createSecretKey(new Uint8Array(32).fill(5));
/** The codec's cipher piece: ranges crossing it are fed in two or more parts. */
const PIECE = 256 * 1024;

/** 1 MiB + 77 bytes of plaintext; `text` makes it compress (the zstd path), else it does not. */
function plaintext(text: boolean): Buffer {
  const n = 4 * PIECE + 77;
  if (!text) return Buffer.from(pseudoRandom(n, 21));
  const line = Buffer.from('2026-11-28T04:00:00Z coffer restore: record verified and written\n');
  const b = Buffer.alloc(n);
  for (let o = 0; o < n; o += line.length) line.copy(b, o);
  return b;
}

function seal(plain: Buffer, compress: boolean) {
  const r = core.sealFrame({
    domain: 2,
    seq: 0,
    final: true,
    plain,
    compress,
    key: KEY,
    binding: BINDING,
    runTag: RUN_TAG,
    salt: SALT,
    out: null,
    digestAlg: 'sha256',
  });
  return { frame: Buffer.from(r.frame), zstd: r.zstd };
}

const mac = (plain: Buffer, start: number, length: number) =>
  crypto
    .createHmac('sha256', macKey)
    .update(plain.subarray(start, start + length))
    .digest();

/** A check of `ranges` whose ids are right except at the indexes in `wrong`. */
function check(plain: Buffer, ranges: [number, number][], wrong: number[] = []): ChunkCheck {
  const ids = new Uint8Array(ranges.length * 32);
  ranges.forEach(([s, l], i) => {
    const id = s + l <= plain.length ? mac(plain, s, l) : Buffer.alloc(32, 1);
    if (wrong.includes(i)) id[5]! ^= 0x40;
    ids.set(id, i * 32);
  });
  return { key: macKey, ranges: ranges.flat(), ids };
}

function open(frame: Buffer, chunks: ChunkCheck | null, out = false): ReturnType<typeof core.openFrame> {
  const m: OpenMessage = {
    domain: 2,
    seq: 0,
    final: true,
    frame: Buffer.from(frame),
    key: KEY,
    binding: BINDING,
    runTag: RUN_TAG,
    digest: crypto.createHash('sha256').update(frame).digest(),
    plainLength: null,
    out: out ? Buffer.alloc(frame.length + 64) : null,
    chunks,
  };
  return core.openFrame(m);
}

const verdict = (r: ReturnType<typeof core.openFrame>) => (r.ok ? 'ok' : `${r.failure}@${r.at ?? '-'}`);

const random = plaintext(false);
const text = plaintext(true);
const plainFrame = seal(random, true);
const packedFrame = seal(text, true);
t.equal(plainFrame.zstd, false, 'random plaintext is stored uncompressed (the fed path)');
t.equal(packedFrame.zstd, true, 'text is stored compressed (the checked-after path)');

/** Ranges in pack order crossing piece boundaries, ending exactly at the plaintext's end. */
const tiling: [number, number][] = [
  [0, 100_000],
  [100_000, PIECE * 2 - 100_000 + 13], // spans the first piece boundary, ends past the second
  [PIECE * 2 + 13, 1],
  [PIECE * 2 + 14, PIECE * 2 + 77 - 14],
];

t.test('every chunk of a tiling, both paths, with and without an output buffer', async (t) => {
  for (const [name, frame, plain] of [
    ['fed', plainFrame.frame, random],
    ['checked after', packedFrame.frame, text],
  ] as const) {
    for (const out of [false, true]) {
      const r = open(frame, check(plain, tiling), out);
      t.equal(verdict(r), 'ok', `${name}, out buffer ${out}`);
      if (r.ok) t.ok(Buffer.from(r.plain).equals(plain), `${name}: the plaintext is handed over whole`);
    }
  }
});

t.test('the first failing chunk in the order asked, whatever the order of the ranges', async (t) => {
  const shuffled: [number, number][] = [tiling[3]!, tiling[0]!, tiling[2]!, tiling[1]!, tiling[0]!];
  const cases: { ranges: [number, number][]; wrong: number[]; want: string }[] = [
    { ranges: tiling, wrong: [2], want: 'chunk@2' },
    { ranges: tiling, wrong: [3, 1], want: 'chunk@1' },
    { ranges: shuffled, wrong: [3], want: 'chunk@3' },
    { ranges: shuffled, wrong: [4, 1], want: 'chunk@1' },
    // A duplicate range is checked for each time it is asked.
    { ranges: shuffled, wrong: [4], want: 'chunk@4' },
    // An empty chunk (HMAC of nothing) and one past the plaintext (never fed: checked after).
    { ranges: [[5, 0], ...tiling], wrong: [0], want: 'chunk@0' },
    { ranges: [[5, 0], ...tiling], wrong: [], want: 'ok' },
    { ranges: [...tiling, [random.length - 3, 4]], wrong: [], want: 'chunk@4' },
    { ranges: [...tiling, [random.length - 3, 4]], wrong: [1], want: 'chunk@1' },
    // Overlapping ranges (never written, but a reader must still answer right).
    {
      ranges: [
        [10, PIECE],
        [20, PIECE * 3],
        [0, 1],
      ],
      wrong: [],
      want: 'ok',
    },
    {
      ranges: [
        [10, PIECE],
        [20, PIECE * 3],
        [0, 1],
      ],
      wrong: [2],
      want: 'chunk@2',
    },
  ];
  for (const { ranges, wrong, want } of cases) {
    const fed = verdict(open(plainFrame.frame, check(random, ranges, wrong)));
    const after = verdict(open(packedFrame.frame, check(text, ranges, wrong)));
    t.equal(fed, want, `fed: ${JSON.stringify(ranges)} wrong ${wrong}`);
    t.equal(after, want, `checked after: ${JSON.stringify(ranges)} wrong ${wrong}`);
  }
});

t.test('random range lists: the fed path answers as the pass after decryption', async (t) => {
  const rnd = pseudoRandom(4096, 5);
  let k = 0;
  const next = (n: number) => {
    const v =
      ((rnd[k % rnd.length]! << 16) | (rnd[(k + 1) % rnd.length]! << 8) | rnd[(k + 2) % rnd.length]!) % n;
    k += 3;
    return v;
  };
  for (let round = 0; round < 40; round++) {
    const ranges: [number, number][] = [];
    const count = 1 + next(8);
    for (let i = 0; i < count; i++) {
      const s = next(random.length);
      ranges.push([s, next(3) === 0 ? 0 : next(random.length - s + 2)]);
    }
    const wrong = next(2) === 0 ? [] : [next(count)];
    const c = check(random, ranges, wrong);
    // The reference: the same frame opened without checks, then every chunk checked in order.
    const opened = open(plainFrame.frame, null);
    t.ok(opened.ok, 'the frame opens without checks');
    let want = 'ok';
    if (opened.ok) {
      for (let i = 0; i < count; i++) {
        const [s, l] = ranges[i]!;
        const id = c.ids.subarray(i * 32, i * 32 + 32);
        if (s + l > random.length || !mac(random, s, l).equals(id)) {
          want = `chunk@${i}`;
          break;
        }
      }
    }
    t.equal(verdict(open(plainFrame.frame, c)), want, `round ${round}: ${JSON.stringify(ranges)}`);
  }
});

t.test('a bad tag is reported before any chunk', async (t) => {
  const frame = Buffer.from(plainFrame.frame);
  frame[frame.length - 1]! ^= 1;
  const m: OpenMessage = {
    domain: 2,
    seq: 0,
    final: true,
    frame,
    key: KEY,
    binding: BINDING,
    runTag: RUN_TAG,
    digest: null,
    plainLength: null,
    out: null,
    chunks: check(random, tiling, [0]),
  };
  t.equal(verdict(core.openFrame(m)), 'tag@-');
});

t.test(
  'a compressed frame opened in the buffer it was read into: its plaintext and verdicts, and no scratch kept',
  async (t) => {
    // Half random, half text: about half of it is stored, so a per-thread scratch copy of the
    // payload would stay allocated at about 2 MiB.
    const mixed = Buffer.concat([
      Buffer.from(pseudoRandom(2 * 1024 * 1024, 33)),
      plaintext(true),
      plaintext(true),
    ]);
    const sealed = seal(mixed, true);
    t.equal(sealed.zstd, true, 'the mixed plaintext is stored compressed');
    const fresh = codecCore(crypto, zlib);
    const inItsOwnBuffer = (frame: Buffer, chunks: ChunkCheck | null): OpenMessage => {
      // As a reader does: the frame read into a pool buffer at its start, opened into that buffer.
      const buf = Buffer.alloc(Math.max(frame.length, mixed.length) + 64);
      frame.copy(buf, 0);
      const m: OpenMessage = {
        domain: 2,
        seq: 0,
        final: true,
        frame: buf.subarray(0, frame.length),
        key: KEY,
        binding: BINDING,
        runTag: RUN_TAG,
        digest: crypto.createHash('sha256').update(frame).digest(),
        plainLength: mixed.length,
        out: buf.subarray(0, mixed.length),
        chunks,
      };
      return m;
    };
    const ranges: [number, number][] = [
      [0, 3 * PIECE + 5],
      [3 * PIECE + 5, mixed.length - 3 * PIECE - 5],
    ];
    const first = inItsOwnBuffer(sealed.frame, check(mixed, ranges));
    const before = process.memoryUsage().arrayBuffers;
    const r = fresh.openFrame(first);
    const after = process.memoryUsage().arrayBuffers;
    t.ok(r.ok && Buffer.compare(Buffer.from(r.plain), mixed) === 0, 'the plaintext, in place');
    t.ok(
      after - before < 1024 * 1024,
      `nothing of the payload's size stays allocated (${((after - before) / 1024).toFixed(0)} KiB more)`,
    );
    t.equal(
      verdict(fresh.openFrame(inItsOwnBuffer(sealed.frame, check(mixed, ranges, [1])))),
      'chunk@1',
      'a wrong chunk id is found',
    );
    // A byte of the payload's last piece flipped (the digest check skipped): the tag fails, and
    // nothing decrypted in place is handed over.
    const flipped = Buffer.from(sealed.frame);
    flipped[flipped.length - 20]! ^= 1;
    const m = inItsOwnBuffer(flipped, null);
    m.digest = null;
    t.equal(verdict(fresh.openFrame(m)), 'tag@-', 'a flipped ciphertext byte fails the tag');
  },
);
