/**
 * The admin list (`GET /admin/audit`): newest first, paged by `beforeSeq`, filtered by action,
 * actor and time, with the chain head (docs/audit.md "Admin list").
 *
 * Query rules: `action` must be a kebab-case name (unknown names simply match nothing); `actor`
 * matches an actor's email or subject exactly (at most 320 characters); `since` / `until` are
 * RFC 3339 date-times, inclusive, normalised to UTC milliseconds so a store can compare them as
 * text (an unencoded `+hh:mm` offset, which form decoding turns into ` hh:mm`, is read as `+`); `beforeSeq` is a positive integer (the previous page's `nextBeforeSeq`); `limit` is
 * lenient like the feed's: default 100, floored and clamped to 1..1000. A bad value is
 * `ERR_AUDIT_BAD_QUERY` (400) whose message names the parameter, never its value.
 */
import { AuditError } from './errors.ts';
import type { AuditAnchor, AuditEvent } from './event.ts';
import { parseLenientLimit, type QueryValue } from './feed.ts';
import { isActionName, isRfc3339 } from './internal/shape.ts';

export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 1000;

/** A parsed admin list query; absent filters are undefined. */
export interface AuditListQuery {
  action?: string;
  actor?: string;
  /** Inclusive lower bound on ts, as `Date.prototype.toISOString()` text. */
  since?: string;
  /** Inclusive upper bound on ts, as `Date.prototype.toISOString()` text. */
  until?: string;
  beforeSeq?: number;
  limit: number;
}

/** One page of the admin list. */
export interface AuditListPage {
  kind: 'engine-audit-list';
  v: 1;
  headSeq: number;
  headHash: string;
  count: number;
  /** Send as `beforeSeq` for the next (older) page; null when this page is the last. */
  nextBeforeSeq: number | null;
  /** Newest first. */
  events: AuditEvent[];
}

type ListParams =
  | URLSearchParams
  | Partial<Record<'action' | 'actor' | 'since' | 'until' | 'beforeSeq' | 'limit', QueryValue>>;

function bad(message: string): never {
  throw new AuditError('ERR_AUDIT_BAD_QUERY', message);
}

function get(
  params: ListParams,
  name: 'action' | 'actor' | 'since' | 'until' | 'beforeSeq' | 'limit',
): QueryValue {
  const v = params instanceof URLSearchParams ? params.get(name) : params[name];
  return v === '' ? undefined : v;
}

function time(v: QueryValue, name: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  // An unencoded `+01:00` offset arrives as ` 01:00` (form decoding turns + into a space).
  const text = typeof v === 'string' ? v.replace(/ (\d{2}:\d{2})$/, '+$1') : v;
  if (!isRfc3339(text)) bad(`${name} must be an RFC 3339 date-time`);
  return new Date(text).toISOString();
}

/**
 * Parses the admin list query (a `URLSearchParams` or an object). Returns an
 * {@link AuditListQuery}. Throws `ERR_AUDIT_BAD_QUERY` naming the bad parameter.
 */
export function parseListQuery(params: ListParams): AuditListQuery {
  const q: AuditListQuery = {
    limit: parseLenientLimit(get(params, 'limit'), LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT),
  };
  const action = get(params, 'action');
  if (action !== undefined && action !== null) {
    if (!isActionName(action)) bad('action must be a kebab-case action name');
    q.action = action;
  }
  const actor = get(params, 'actor');
  if (actor !== undefined && actor !== null) {
    if (typeof actor !== 'string' || actor.length > 320)
      bad('actor must be an email or subject of at most 320 characters');
    q.actor = actor;
  }
  const since = time(get(params, 'since'), 'since');
  const until = time(get(params, 'until'), 'until');
  if (since !== undefined) q.since = since;
  if (until !== undefined) q.until = until;
  if (since !== undefined && until !== undefined && since > until) bad('since must not be after until');
  const before = get(params, 'beforeSeq');
  if (before !== undefined && before !== null) {
    const n = typeof before === 'number' ? before : /^\d{1,16}$/.test(before) ? Number(before) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1) bad('beforeSeq must be a positive integer');
    q.beforeSeq = n;
  }
  return q;
}

/** Filters that {@link filterEvents} applies (every given one must match). */
export interface AuditFilter {
  action?: string;
  /** Exact match on actor email or actor subject. */
  actor?: string;
  /** Inclusive RFC 3339 bounds on ts. */
  since?: string;
  until?: string;
  beforeSeq?: number;
  afterSeq?: number;
}

/** The events of `events` that match `filter`, in their original order. Pure; never throws. */
export function filterEvents(events: readonly AuditEvent[], filter: AuditFilter): AuditEvent[] {
  const since = filter.since === undefined ? undefined : Date.parse(filter.since);
  const until = filter.until === undefined ? undefined : Date.parse(filter.until);
  return events.filter((e) => {
    if (filter.action !== undefined && e.action !== filter.action) return false;
    if (filter.actor !== undefined && e.actor?.email !== filter.actor && e.actor?.subject !== filter.actor)
      return false;
    if (filter.beforeSeq !== undefined && !(e.seq < filter.beforeSeq)) return false;
    if (filter.afterSeq !== undefined && !(e.seq > filter.afterSeq)) return false;
    const ts = Date.parse(e.ts);
    if (since !== undefined && !(ts >= since)) return false;
    if (until !== undefined && !(ts <= until)) return false;
    return true;
  });
}

/**
 * The admin list page for `query` over `events` (any superset: filtered here, newest first, at
 * most `limit`). `nextBeforeSeq` is the last listed seq when more matching events remain, so a
 * caller that reads `limit + 1` rows from its store gets an exact answer. Pure; never throws.
 */
export function buildListPage(
  events: readonly AuditEvent[],
  query: AuditListQuery,
  head: AuditAnchor,
): AuditListPage {
  const matching = filterEvents(events, query).sort((a, b) => b.seq - a.seq);
  const listed = matching.slice(0, query.limit);
  return {
    kind: 'engine-audit-list',
    v: 1,
    headSeq: head.seq,
    headHash: head.hash,
    count: listed.length,
    nextBeforeSeq: matching.length > listed.length ? (listed.at(-1)?.seq ?? null) : null,
    events: listed,
  };
}
