#!/usr/bin/env node
// FastCDC chunker benchmark (`node bench/chunker.mjs`): streams 512 MiB of random data in 1 MiB
// pieces through the format 0.2 content chunker (packages/archive/src/internal/chunker.ts) with
// its default parameters (512 KiB / 1 MiB / 8 MiB) as one record, and for comparison through
// node:crypto SHA-256 (SHA-NI on this CPU) and SHA-384 (the record hash) fed the same pieces, in
// the same run, interleaved per round. Prints MiB/s (wall) and CPU seconds of this process for
// each (MiB per CPU-second is the steadier figure when other work shares the cores), and the chunker's share of bytes actually hashed: the first minSize bytes of a chunk are
// skipped, so "effective" MiB/s counts every byte the chunker moved past and "hashed" only those
// it ran the gear hash over. A diagnostic line runs the chunker with small parameters
// (2 KiB / 8 KiB / 64 KiB), where nearly every byte is hashed: the raw speed of the hash loop.
//
// The chunker is imported from the package's TypeScript source (Node 24 strips the types), so the
// figure does not depend on a build. It runs on the main thread; nothing else runs meanwhile.
//
// Environment: BENCH_MIB (default 512), BENCH_PIECE_KIB (default 1024), BENCH_REPEAT (default 3).
import { createHash, randomFillSync } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineNotes } from './lib/machine.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { CHUNK_PARAMS, ContentChunker } = await import(
  pathToFileURL(join(root, 'packages', 'archive', 'src', 'internal', 'chunker.ts')).href
);

const env = process.env;
const MIB = 1024 * 1024;
const totalMiB = Number(env.BENCH_MIB ?? '512');
const pieceSize = Number(env.BENCH_PIECE_KIB ?? '1024') * 1024;
const repeat = Number(env.BENCH_REPEAT ?? '3');

const data = new Uint8Array(totalMiB * MIB);
for (let o = 0; o < data.length; o += 64 * MIB) randomFillSync(data, o, Math.min(64 * MIB, data.length - o));
const pieces = [];
for (let o = 0; o < data.length; o += pieceSize)
  pieces.push(data.subarray(o, Math.min(data.length, o + pieceSize)));

/** One record through a fresh chunker; returns the chunk count and bytes hashed. */
function chunkAll(params) {
  const chunker = new ContentChunker(params);
  const min = chunker.params.minSize;
  let chunks = 0;
  let hashed = 0;
  let chunkStart = 0;
  let off = 0;
  for (const piece of pieces) {
    let at = 0;
    for (let end = chunker.next(piece, at); end >= 0; end = chunker.next(piece, at)) {
      const len = off + end - chunkStart;
      hashed += len - Math.min(len, min);
      chunks++;
      chunkStart = off + end;
      at = end;
    }
    off += piece.length;
  }
  const tail = off - chunkStart;
  if (tail > 0) {
    chunks++;
    hashed += tail - Math.min(tail, min);
  }
  return { chunks, hashed };
}

function digestAll(algorithm) {
  const h = createHash(algorithm);
  for (const piece of pieces) h.update(piece);
  return { digest: h.digest('hex').slice(0, 8) };
}

function timed(fn) {
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const result = fn();
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { ...result, wall, cpu: (cpu.user + cpu.system) / 1e6 };
}

const small = { minSize: 2048, avgSize: 8192, maxSize: 65536 };
const phases = [
  ['chunker (default 512K/1M/8M)', () => chunkAll(CHUNK_PARAMS)],
  ['sha256', () => digestAll('sha256')],
  ['sha384', () => digestAll('sha384')],
  ['chunker (small 2K/8K/64K, diagnostic)', () => chunkAll(small)],
];

console.log(
  `chunker bench: ${totalMiB} MiB random in ${pieceSize / 1024} KiB pieces, ${repeat} rounds, ` +
    `${availableParallelism()} cores, Node ${process.version}`,
);
for (const note of machineNotes()) console.log(note);
// Warm-up: lets the JIT optimise the hot loop before anything is timed.
chunkAll(CHUNK_PARAMS);
chunkAll(small);

const results = new Map(phases.map(([name]) => [name, []]));
for (let r = 1; r <= repeat; r++) {
  const line = [];
  for (const [name, fn] of phases) {
    const res = timed(fn);
    results.get(name).push(res);
    line.push(`${name.split(' ')[0]} ${(totalMiB / res.wall).toFixed(0)} MiB/s`);
  }
  console.log(`round ${r}: ${line.join(', ')}`);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log('\nmedians:');
const sha256Rate = totalMiB / median(results.get('sha256').map((x) => x.wall));
for (const [name] of phases) {
  const rs = results.get(name);
  const wall = median(rs.map((x) => x.wall));
  const cpu = median(rs.map((x) => x.cpu));
  let extra = '';
  if (rs[0].chunks !== undefined) {
    const hashedMiB = rs[0].hashed / MIB;
    extra =
      `; ${rs[0].chunks} chunks (mean ${(totalMiB / rs[0].chunks).toFixed(2)} MiB), ` +
      `${((100 * hashedMiB) / totalMiB).toFixed(0)}% hashed at ${(hashedMiB / wall).toFixed(0)} MiB/s`;
  }
  console.log(
    `  ${name.padEnd(38)} ${(totalMiB / wall).toFixed(0).padStart(6)} MiB/s effective  ` +
      `wall ${wall.toFixed(3)} s  CPU ${cpu.toFixed(3)} s (${(totalMiB / cpu).toFixed(0)} MiB per CPU-s)  ` +
      `(${((totalMiB / wall / sha256Rate) * 100).toFixed(0)}% of SHA-256)${extra}`,
  );
}
