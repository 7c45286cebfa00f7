/**
 * Finds the lines of an index being opened among a base's known lines (types.ts KnownRecords),
 * so that an unchanged record is taken as the known one instead of being parsed again.
 *
 * A run lists its records in the order its base did, so the line looked for is nearly always the
 * base's next one: each line is compared with the next few known lines first (string equality: no
 * hashing of a ~300-byte line, no map of every known line). Only after a run of misses that
 * changed records do not explain (records moved, a base from another listing) is a map of the
 * known lines built, once, and asked for every line the window misses. Whichever way a line is
 * found it is equal to the known line, so the heuristics decide only how fast, never what.
 * Profiled on a 20,000-record run with nothing changed: the map and its lookups were 50-60 ms of
 * the read-back.
 */
import type { IndexEntry, KnownRecords } from '../types.ts';

/** Known lines after the last match compared before a line counts as a miss. */
const WINDOW = 8;
/** Misses in a row after which the map is built (a changed record is one miss). */
const MISSES_FOR_MAP = 32;

export class KnownLines {
  readonly #records: ReadonlyMap<string, IndexEntry>;
  readonly #names: string[];
  readonly #lines: string[];
  #next = 0;
  #misses = 0;
  #byLine: Map<string, number> | null = null;

  constructor(known: KnownRecords) {
    this.#records = known.records;
    this.#names = [...known.lines.keys()];
    this.#lines = [...known.lines.values()];
  }

  /** The known line equal to `line` with its record, or null. */
  find(line: string): { line: string; entry: IndexEntry } | null {
    const lines = this.#lines;
    const end = Math.min(this.#next + WINDOW, lines.length);
    for (let i = this.#next; i < end; i++) if (lines[i] === line) return this.#found(i);
    if (this.#byLine === null && ++this.#misses < MISSES_FOR_MAP) return null;
    this.#byLine ??= new Map(lines.map((l, i) => [l, i]));
    const i = this.#byLine.get(line);
    return i === undefined ? null : this.#found(i);
  }

  /** Whether the map of known lines was built (tests). */
  get mapped(): boolean {
    return this.#byLine !== null;
  }

  #found(i: number): { line: string; entry: IndexEntry } | null {
    const entry = this.#records.get(this.#names[i]!);
    if (entry === undefined) return null;
    this.#next = i + 1;
    this.#misses = 0;
    return { line: this.#lines[i]!, entry };
  }
}
