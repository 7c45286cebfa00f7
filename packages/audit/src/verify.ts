/**
 * The standalone chain verifier: what a consumer runs on exported documents or feed pages without
 * trusting the engine (docs/audit.md, "Verifying without trusting the engine").
 *
 * For each event in order it checks, and stops at the first failure:
 *   1. the event is well formed (`malformed`);
 *   2. its seq is the previous seq + 1 (`seq-gap` when higher: events missing or moved ahead;
 *      `seq-order` when lower or equal: a duplicate or an event moved back);
 *   3. its prevHash equals the previous event's hash, or the anchor's (`prev-mismatch`);
 *   4. its hash equals the recomputed hash (`hash-mismatch`).
 * After the last event, an expected head must be met exactly (`truncated` when the chain stops
 * short of it, `head-mismatch` when it ends elsewhere or with another hash).
 *
 * `firstBadSeq` is always the seq that should have been at the failing position (the previous
 * seq + 1), so "drop event 3" and "edit event 3" both report 3. A failed chain is a result, not
 * an exception (the engine's verify route answers it with 200); `assertChain` throws instead.
 * Security property: any change to a stored event, and any removal, insertion or reordering, is
 * reported unless the attacker rewrote every later event too and the consumer holds no anchor or
 * head from before the rewrite.
 */
import { AuditError } from './errors.ts';
import { type AuditAnchor, type AuditEvent, GENESIS_HASH, hashEvent } from './event.ts';
import { isActionName, isDigest, isPlainObject, isRfc3339, isSeq } from './internal/shape.ts';

/** Why verification stopped. */
export type ChainProblem =
  | 'malformed'
  | 'seq-gap'
  | 'seq-order'
  | 'prev-mismatch'
  | 'hash-mismatch'
  | 'truncated'
  | 'head-mismatch';

/** A chain that verified: where it ends (the anchor for the next page). */
export interface ChainOk {
  ok: true;
  /** Seq of the first event checked, or null when there were none. */
  firstSeq: number | null;
  /** Seq and hash of the last event checked (the anchor's when there were none). */
  headSeq: number;
  headHash: string;
  /** Number of events checked. */
  count: number;
}

/** A chain that did not verify. */
export interface ChainBroken {
  ok: false;
  /** The seq that should have been at the failing position (previous seq + 1). */
  firstBadSeq: number;
  /** Position of the failing event in the input (events.length when the failure is at the end). */
  index: number;
  problem: ChainProblem;
  /** One sentence for people; names seqs and the problem, never event content. */
  message: string;
  /** The last position that did verify (the anchor when the first event failed), or null when unanchored. */
  lastGood: AuditAnchor | null;
  /** Number of events that verified before the failure. */
  count: number;
}

export type ChainResult = ChainOk | ChainBroken;

/** Where verification starts and, optionally, where it must end. */
export interface VerifyOptions {
  /**
   * The position before the first event. Omitted: the genesis anchor `{ seq: 0, hash:
   * GENESIS_HASH }`, so the events must start at seq 1. `null`: unanchored, the first event's seq
   * and prevHash are taken as given (a pruned chain; say so when you report the result). Pass the
   * previous page's `{ headSeq, headHash }` to verify page after page.
   */
  anchor?: AuditAnchor | null;
  /** The chain must end exactly here (an export's or feed page's head). */
  expectedHead?: AuditAnchor;
}

function checkAnchor(anchor: unknown, name: string): AuditAnchor {
  if (
    !isPlainObject(anchor) ||
    !(anchor.seq === 0 || isSeq(anchor.seq)) ||
    !isDigest(anchor.hash) ||
    (anchor.seq === 0 && anchor.hash !== GENESIS_HASH)
  ) {
    throw new AuditError(
      'ERR_AUDIT_MALFORMED_DOCUMENT',
      `${name} must be { seq, hash } with a non-negative integer seq and a sha384 digest (genesis at seq 0)`,
    );
  }
  return { seq: anchor.seq as number, hash: anchor.hash };
}

/**
 * Incremental verifier: feed events one at a time (or page by page) in chain order, then call
 * `finish`. Holds only the last position, so it verifies chains of any length in constant memory.
 */
export class ChainVerifier {
  #last: AuditAnchor | null;
  #first: number | null = null;
  #count = 0;
  #index = 0;
  #failure: ChainBroken | null = null;

  /** Throws `ERR_AUDIT_MALFORMED_DOCUMENT` for an anchor that is not `{ seq, hash }`. */
  constructor(anchor: AuditAnchor | null = { seq: 0, hash: GENESIS_HASH }) {
    this.#last = anchor === null ? null : checkAnchor(anchor, 'anchor');
  }

  /** The failure so far, or null. */
  get failure(): ChainBroken | null {
    return this.#failure;
  }

  #fail(problem: ChainProblem, firstBadSeq: number, message: string): false {
    this.#failure = {
      ok: false,
      firstBadSeq,
      index: this.#index,
      problem,
      message,
      lastGood: this.#last,
      count: this.#count,
    };
    return false;
  }

  /** Checks the next event. Returns false once the chain has failed (later events are ignored). */
  push(event: unknown): boolean {
    if (this.#failure !== null) return false;
    const expected = this.#last === null ? null : this.#last.seq + 1;
    const e = event as Partial<AuditEvent> & Record<string, unknown>;
    if (
      !isPlainObject(e) ||
      !isSeq(e.seq) ||
      !isRfc3339(e.ts) ||
      !isActionName(e.action) ||
      !isDigest(e.prevHash) ||
      !isDigest(e.hash)
    ) {
      const at = expected ?? (isPlainObject(e) && isSeq(e.seq) ? e.seq : 1);
      return this.#fail(
        'malformed',
        at,
        `event at seq ${at} is malformed (seq, ts, action, prevHash or hash)`,
      );
    }
    if (expected !== null && e.seq !== expected) {
      return e.seq > expected
        ? this.#fail('seq-gap', expected, `seq ${expected} is missing (found ${e.seq} in its place)`)
        : this.#fail(
            'seq-order',
            expected,
            `seq ${e.seq} is out of order or repeated where ${expected} belongs`,
          );
    }
    const seq = e.seq;
    const prevHash = this.#last?.hash ?? (seq === 1 ? GENESIS_HASH : null);
    if (prevHash !== null && e.prevHash !== prevHash) {
      return this.#fail(
        'prev-mismatch',
        seq,
        `seq ${seq}: prevHash does not equal the hash of seq ${seq - 1}${seq === 1 ? ' (genesis)' : ''}`,
      );
    }
    let computed: string;
    try {
      computed = hashEvent(e);
    } catch {
      return this.#fail('malformed', seq, `event at seq ${seq} has no canonical JSON form`);
    }
    if (computed !== e.hash) {
      return this.#fail('hash-mismatch', seq, `seq ${seq}: hash does not match the event's content`);
    }
    this.#first ??= seq;
    this.#last = { seq, hash: e.hash };
    this.#count++;
    this.#index++;
    return true;
  }

  /** Checks every event of `events` in order; returns false once the chain has failed. */
  pushAll(events: Iterable<unknown>): boolean {
    for (const e of events) if (!this.push(e)) return false;
    return this.#failure === null;
  }

  /**
   * The result. With `expectedHead`, the chain must end exactly there. Throws
   * `ERR_AUDIT_MALFORMED_DOCUMENT` for an expected head that is not `{ seq, hash }`.
   */
  finish(expectedHead?: AuditAnchor): ChainResult {
    if (this.#failure !== null) return this.#failure;
    const last = this.#last;
    if (expectedHead !== undefined) {
      const head = checkAnchor(expectedHead, 'expectedHead');
      const lastSeq = last?.seq ?? 0;
      if (lastSeq < head.seq) {
        this.#fail(
          'truncated',
          lastSeq + 1,
          `the chain stops at seq ${lastSeq}, before its head ${head.seq}`,
        );
      } else if (lastSeq > head.seq) {
        this.#fail('head-mismatch', head.seq + 1, `the chain runs past its head ${head.seq}`);
      } else if (last !== null && last.hash !== head.hash) {
        this.#fail('head-mismatch', head.seq, `seq ${head.seq}: hash does not equal the head hash`);
      }
      if (this.#failure !== null) return this.#failure;
    }
    if (last === null) {
      // Unanchored and empty: nothing verified, nothing to anchor on.
      return { ok: true, firstSeq: null, headSeq: 0, headHash: GENESIS_HASH, count: 0 };
    }
    return { ok: true, firstSeq: this.#first, headSeq: last.seq, headHash: last.hash, count: this.#count };
  }
}

/**
 * Verifies `events` (in chain order) from `options.anchor` (default genesis), optionally up to
 * exactly `options.expectedHead`. Returns `{ ok: true, headSeq, headHash, ... }`, whose head is
 * the anchor for the next page, or `{ ok: false, firstBadSeq, problem, ... }`. Throws only
 * `ERR_AUDIT_MALFORMED_DOCUMENT` for a malformed anchor or expected head.
 */
export function verifyChain(events: Iterable<unknown>, options: VerifyOptions = {}): ChainResult {
  const verifier = new ChainVerifier(options.anchor === undefined ? undefined : options.anchor);
  verifier.pushAll(events);
  return verifier.finish(options.expectedHead);
}

/**
 * Returns nothing when `result.ok`; otherwise throws `ERR_AUDIT_CHAIN_BROKEN` carrying
 * `firstBadSeq` (for callers that prefer an exception).
 */
export function assertChain(result: ChainResult): asserts result is ChainOk {
  if (!result.ok) {
    throw new AuditError('ERR_AUDIT_CHAIN_BROKEN', `audit chain broken: ${result.message}`, {
      firstBadSeq: result.firstBadSeq,
    });
  }
}
