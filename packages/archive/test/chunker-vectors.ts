/**
 * What the chunker vectors (test/fixtures/chunker/vectors.json) are made of, shared by
 * make-chunker-vectors.ts (writes them) and chunker.test.ts (checks them): the input generator, the
 * list of cases, and a slow reference chunker written straight from the normative description in
 * src/internal/chunker.ts, byte at a time and with plain arithmetic instead of bit tricks, so the
 * fast chunker is checked against code that is obviously right rather than against itself.
 */
import { createHash, hash } from 'node:crypto';
import type { ChunkParams } from '../src/internal/chunker.ts';

export const VECTOR_SEED = 'coffer/archive/v0.2/chunker-vectors';

/**
 * `length` bytes of SHA-256 in counter mode: block k (k = 0, 1, ...) is SHA-256(UTF-8 seed ||
 * u32 big-endian k), the blocks are concatenated and the result truncated to `length`. Any
 * language can regenerate it; a prefix of a longer output is the shorter output.
 */
export function counterModeBytes(seed: string, length: number): Uint8Array {
  const s = Buffer.from(seed, 'utf8');
  const block = Buffer.alloc(s.length + 4);
  s.copy(block);
  const out = new Uint8Array(Math.ceil(length / 32) * 32);
  for (let k = 0; k * 32 < length; k++) {
    block.writeUInt32BE(k, s.length);
    out.set(hash('sha256', block, 'buffer'), k * 32);
  }
  return out.subarray(0, length);
}

export interface VectorCase {
  name: string;
  /** How the input is made: counter-mode bytes of VECTOR_SEED, or all zero. */
  input: 'counter' | 'zero';
  length: number;
  params: ChunkParams;
}

const KIB = 1024;
const MIB = 1024 * KIB;
export const SMALL_PARAMS: ChunkParams = { minSize: 2 * KIB, avgSize: 8 * KIB, maxSize: 64 * KIB };

export const VECTOR_CASES: VectorCase[] = [
  { name: 'random-4MiB-small', input: 'counter', length: 4 * MIB, params: SMALL_PARAMS },
  {
    name: 'random-16MiB-default',
    input: 'counter',
    length: 16 * MIB,
    params: { minSize: 512 * KIB, avgSize: 1 * MIB, maxSize: 8 * MIB },
  },
  // The smallest sizes the rules allow: the widest masks' opposite end (5 and 9 bits).
  {
    name: 'random-64KiB-tiny',
    input: 'counter',
    length: 64 * KIB,
    params: { minSize: 64, avgSize: 128, maxSize: 256 },
  },
  { name: 'zero-256KiB-small', input: 'zero', length: 256 * KIB, params: SMALL_PARAMS },
];

export function caseInput(c: VectorCase): Uint8Array {
  return c.input === 'zero' ? new Uint8Array(c.length) : counterModeBytes(VECTOR_SEED, c.length);
}

/** gear[i] as unsigned numbers, from the definition. */
export function referenceGear(): number[] {
  const gear: number[] = [];
  for (let i = 0; i < 256; i++) {
    const d = createHash('sha256')
      .update('coffer/archive/v0.2/gear', 'utf8')
      .update(Buffer.from([i]))
      .digest();
    gear.push(d[0]! * 2 ** 24 + d[1]! * 2 ** 16 + d[2]! * 2 ** 8 + d[3]!);
  }
  return gear;
}

/** The 1,024 bytes of the gear table, each entry big-endian: what the fixture's table digest covers. */
export function gearTableBytes(gear: readonly number[]): Buffer {
  const b = Buffer.alloc(1024);
  for (const [i, g] of gear.entries()) b.writeUInt32BE(g, i * 4);
  return b;
}

/** One whole record's cut offsets, byte at a time, straight from the algorithm's text. */
export function referenceBoundaries(data: Uint8Array, params: ChunkParams): number[] {
  const gear = referenceGear();
  const { minSize, avgSize, maxSize } = params;
  const bits = Math.log2(avgSize);
  // "(h & mask) = 0" with mask = the top k bits set  <=>  h < 2^(32 - k).
  const limitS = 2 ** (32 - (bits + 2));
  const limitL = 2 ** (32 - (bits - 2));
  const cuts: number[] = [];
  let start = 0;
  while (start < data.length) {
    let end = data.length; // the record's end closes its last chunk
    let h = 0;
    for (let p = 0; start + p < data.length; p++) {
      if (p >= minSize) {
        h = (h * 2 + gear[data[start + p]!]!) % 2 ** 32;
        if (h < (p < avgSize ? limitS : limitL)) {
          end = start + p + 1;
          break;
        }
      }
      if (p + 1 === maxSize) {
        end = start + maxSize;
        break;
      }
    }
    cuts.push(end);
    start = end;
  }
  return cuts;
}
