/**
 * Audit feed pages (`GET /support/audit-feed?afterSeq=&limit=`): the query rules, the page
 * document, and the consumer-side page check (specification "Pull endpoints" and "Audit event and
 * feed page"; docs/audit.md "Feed pages").
 *
 * Query rules, decided where the specification leaves room:
 * - `afterSeq`: absent, null or the empty string means 0. Otherwise the value is read with
 *   JavaScript's `Number()` (decimal, exponent, `0x`/`0o`/`0b` prefixes and surrounding
 *   whitespace are accepted, as `Number()` accepts them); anything that is not a finite number
 *   >= 0 is refused with exactly `afterSeq must be a non-negative integer` (400). Fractions are
 *   floored; `-0` reads as 0.
 * - `limit`: absent, null, empty or not a number (NaN) means the default 500; otherwise floored
 *   and clamped to 1..1000 (0 and negatives give 1, +Infinity and anything over 1000 give 1000).
 *   `limit` is never an error: the specification calls the clamp lenient.
 */
import { AuditAfterSeqError, AuditError } from './errors.ts';
import { type AuditAnchor, type AuditEvent, GENESIS_HASH } from './event.ts';
import { isDigest, isPlainObject } from './internal/shape.ts';
import { type ChainResult, ChainVerifier } from './verify.ts';

export const FEED_DEFAULT_LIMIT = 500;
export const FEED_MAX_LIMIT = 1000;
/** The specification's pull rate limit on the feed: 120 pulls per 60 s per credential, then 429. */
export const FEED_RATE_LIMIT = { pulls: 120, windowSeconds: 60 } as const;

/** A raw query value: what `URLSearchParams.get` returns, or a number from a typed caller. */
export type QueryValue = string | number | null | undefined;

/** A parsed feed query. */
export interface FeedQuery {
  afterSeq: number;
  limit: number;
}

/** The feed page document, exactly the specification's fields. */
export interface AuditFeedPage {
  kind: 'engine-audit-feed';
  v: 1;
  /** The (floored) afterSeq the page answers. */
  afterSeq: number;
  /** The last event's seq, or `afterSeq` when `count` is 0: send it as the next `afterSeq`. */
  nextAfterSeq: number;
  /** Lowest seq still retained (headSeq + 1 when nothing is). */
  earliestSeq: number;
  /** True when afterSeq + 1 < earliestSeq: events the consumer has not seen were pruned. */
  gapBefore: boolean;
  /** The chain head when the page was read (0 and GENESIS_HASH for an empty chain). */
  headSeq: number;
  headHash: string;
  count: number;
  /** Events with afterSeq < seq <= headSeq, oldest first, at most `limit`. */
  events: AuditEvent[];
}

function read(
  params: URLSearchParams | { afterSeq?: QueryValue; limit?: QueryValue },
  name: 'afterSeq' | 'limit',
) {
  return params instanceof URLSearchParams ? params.get(name) : params[name];
}

function toNumber(v: string | number): number {
  return typeof v === 'number' ? v : Number(v);
}

/**
 * Parses `afterSeq` and `limit` by the rules in the module comment. Accepts a `URLSearchParams`
 * (first value of each name) or an object. Returns `{ afterSeq, limit }`. Throws
 * `AuditAfterSeqError` (`ERR_AUDIT_BAD_AFTER_SEQ`, `body` = the 400 body) for a bad afterSeq.
 */
export function parseFeedQuery(
  params: URLSearchParams | { afterSeq?: QueryValue; limit?: QueryValue },
): FeedQuery {
  const rawAfter = read(params, 'afterSeq');
  let afterSeq = 0;
  if (rawAfter !== undefined && rawAfter !== null && rawAfter !== '') {
    if (typeof rawAfter !== 'string' && typeof rawAfter !== 'number') throw new AuditAfterSeqError();
    const n = toNumber(rawAfter);
    if (!Number.isFinite(n) || n < 0) throw new AuditAfterSeqError();
    afterSeq = Math.floor(n) || 0; // `|| 0` turns -0 into 0
  }
  return { afterSeq, limit: parseLenientLimit(read(params, 'limit'), FEED_DEFAULT_LIMIT, FEED_MAX_LIMIT) };
}

/**
 * A page size read leniently: absent, empty, null or NaN gives `fallback`; otherwise floored and
 * clamped to 1..max. Never throws.
 */
export function parseLenientLimit(raw: unknown, fallback: number, max: number): number {
  if (raw === undefined || raw === null || raw === '') return fallback;
  if (typeof raw !== 'string' && typeof raw !== 'number') return fallback;
  const n = toNumber(raw);
  if (Number.isNaN(n)) return fallback;
  return Math.min(max, Math.max(1, Math.floor(n)));
}

/** What `buildFeedPage` needs besides the events. */
export interface FeedPageInput {
  afterSeq: number;
  limit: number;
  /** Lowest retained seq, or null when nothing is retained. */
  earliestSeq: number | null;
  headSeq: number;
  headHash: string;
}

/**
 * The feed page for `events` (any superset of the wanted range, in any order): keeps events with
 * afterSeq < seq <= headSeq, oldest first, at most `limit`; sets `nextAfterSeq` to the last
 * kept seq (or afterSeq when none), `gapBefore` to afterSeq + 1 < earliestSeq, and earliestSeq
 * to headSeq + 1 when nothing is retained. Events past headSeq are dropped so a page that
 * reaches the head always ends on headHash. Throws `ERR_AUDIT_BAD_QUERY` for numbers out of range.
 */
export function buildFeedPage(events: readonly AuditEvent[], input: FeedPageInput): AuditFeedPage {
  const { afterSeq, limit, headSeq, headHash } = input;
  if (!(Number.isInteger(afterSeq) && afterSeq >= 0))
    throw new AuditError('ERR_AUDIT_BAD_QUERY', 'afterSeq out of range');
  if (!(Number.isInteger(limit) && limit >= 1 && limit <= FEED_MAX_LIMIT)) {
    throw new AuditError('ERR_AUDIT_BAD_QUERY', 'limit out of range');
  }
  if (!(Number.isSafeInteger(headSeq) && headSeq >= 0) || !isDigest(headHash)) {
    throw new AuditError('ERR_AUDIT_BAD_QUERY', 'head must be a non-negative seq and a sha384 digest');
  }
  const earliestSeq = input.earliestSeq ?? headSeq + 1;
  const kept = events
    .filter((e) => e.seq > afterSeq && e.seq <= headSeq)
    .sort((a, b) => a.seq - b.seq)
    .slice(0, limit);
  const last = kept.at(-1);
  return {
    kind: 'engine-audit-feed',
    v: 1,
    afterSeq,
    nextAfterSeq: last === undefined ? afterSeq : last.seq,
    earliestSeq,
    gapBefore: afterSeq + 1 < earliestSeq,
    headSeq,
    headHash,
    count: kept.length,
    events: kept,
  };
}

/** The result of checking one feed page against the consumer's position. */
export type FeedPageResult = ChainResult & {
  /** True when the verified position equals the page's head (stop polling until later). */
  caughtUp: boolean;
  /** True when the page reported `gapBefore` (only reached with `acceptGap`). */
  gap: boolean;
};

/**
 * Consumer side: checks a feed page that answered `afterSeq = anchor.seq` (anchor = the last
 * verified `{ headSeq, headHash }`, or omitted for the first poll from genesis). Verifies each
 * event's prevHash against the previous hash, and when the page reaches the head, that the last
 * hash equals `headHash`; an empty page at the anchor's seq must show the anchor's hash as head.
 * A head below the anchor is `truncated` (the engine's chain got shorter).
 *
 * With `gapBefore` the consumer cannot link the page to its anchor: the result is `seq-gap`
 * unless `acceptGap` is set, in which case the page is verified unanchored and `gap` is true.
 * On success the result's `{ headSeq, headHash }` is the next anchor. Throws
 * `ERR_AUDIT_MALFORMED_DOCUMENT` when the page is not a feed page or its fields contradict each
 * other (count, afterSeq, nextAfterSeq, events past the head).
 */
export function verifyFeedPage(
  page: unknown,
  anchor: AuditAnchor = { seq: 0, hash: GENESIS_HASH },
  options: { acceptGap?: boolean } = {},
): FeedPageResult {
  const p = checkFeedPage(page);
  if (p.afterSeq !== anchor.seq) malformed('page afterSeq is not the anchor seq that was asked for');
  const gap = p.gapBefore;
  if (gap && !options.acceptGap) {
    return {
      ok: false,
      firstBadSeq: anchor.seq + 1,
      index: 0,
      problem: 'seq-gap',
      message: `events ${anchor.seq + 1}..${p.earliestSeq - 1} were pruned before this consumer read them`,
      lastGood: anchor,
      count: 0,
      caughtUp: false,
      gap,
    };
  }
  if (p.headSeq < anchor.seq) {
    return {
      ok: false,
      firstBadSeq: p.headSeq + 1,
      index: 0,
      problem: 'truncated',
      message: `the engine's head ${p.headSeq} is below the consumer's verified seq ${anchor.seq}`,
      lastGood: anchor,
      count: 0,
      caughtUp: false,
      gap,
    };
  }
  const verifier = new ChainVerifier(gap ? null : anchor);
  verifier.pushAll(p.events);
  const reachesHead = (p.events.at(-1)?.seq ?? anchor.seq) === p.headSeq;
  const result = verifier.finish(reachesHead ? { seq: p.headSeq, hash: p.headHash } : undefined);
  // An empty unanchored page has no position of its own: keep the consumer's.
  if (result.ok && result.count === 0)
    return { ...result, headSeq: anchor.seq, headHash: anchor.hash, caughtUp: reachesHead, gap };
  return { ...result, caughtUp: result.ok && reachesHead, gap };
}

function malformed(message: string): never {
  throw new AuditError('ERR_AUDIT_MALFORMED_DOCUMENT', message);
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Shape and internal consistency of a feed page; throws ERR_AUDIT_MALFORMED_DOCUMENT. */
function checkFeedPage(page: unknown): AuditFeedPage {
  if (!isPlainObject(page) || page.kind !== 'engine-audit-feed' || page.v !== 1) {
    malformed('not an engine-audit-feed v1 page');
  }
  const { afterSeq, nextAfterSeq, earliestSeq, gapBefore, headSeq, headHash, count, events } = page;
  if (
    !isCount(afterSeq) ||
    !isCount(nextAfterSeq) ||
    !isCount(earliestSeq) ||
    typeof gapBefore !== 'boolean' ||
    !isCount(headSeq) ||
    !isDigest(headHash) ||
    !isCount(count) ||
    !Array.isArray(events)
  ) {
    malformed('feed page fields have the wrong types');
  }
  if (events.length !== count) malformed('feed page count does not equal the number of events');
  if (gapBefore !== afterSeq + 1 < earliestSeq)
    malformed('feed page gapBefore contradicts afterSeq and earliestSeq');
  const last = events.at(-1) as { seq?: unknown } | undefined;
  const lastSeq = last === undefined ? afterSeq : last.seq;
  if (lastSeq !== nextAfterSeq)
    malformed('feed page nextAfterSeq is not its last seq (or afterSeq when empty)');
  if (last !== undefined && typeof lastSeq === 'number' && lastSeq > headSeq) {
    malformed('feed page carries events past its head');
  }
  if (count === 0 && headSeq > afterSeq && earliestSeq <= headSeq) {
    malformed('feed page is empty although retained events follow afterSeq');
  }
  return page as unknown as AuditFeedPage;
}
