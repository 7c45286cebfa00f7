/**
 * The storage interface the audit log needs, shaped so that @coffer/state's `AuditRepository`
 * (`state.audit`) satisfies it as is, plus the row <-> event mapping and an in-memory store.
 *
 * Row mapping: `eventToRow` stores the hashed object (the event without `hash`) in `event`, and
 * seq, ts, prevHash, hash, action and the actor's email and subject in their own columns.
 * `rowToEvent` rebuilds the event with the columns taking precedence over the JSON, so an edit
 * to either a column or the JSON changes what the verifier hashes and is reported as
 * `hash-mismatch` (or `prev-mismatch`), never silently ignored.
 *
 * Linearity under concurrent writers is the store's job: `append` runs the builder and the
 * insert in one serialised transaction (state: SQLite BEGIN IMMEDIATE, PostgreSQL advisory lock).
 */
import { type AuditAnchor, type AuditEvent, GENESIS_HASH } from './event.ts';
import { isPlainObject } from './internal/shape.ts';

/** The chain head as a store reports it (same shape as state's `AuditHead`). */
export type AuditHead = AuditAnchor;

/** What the builder hands the store (same shape as state's `AuditRowInput`). */
export interface AuditRowInput {
  seq: number;
  ts: string;
  prevHash: string;
  hash: string;
  action: string;
  actorSubject?: string | null;
  actorEmail?: string | null;
  /** The event as hashed (without `hash`). */
  event: Record<string, unknown>;
}

/** A stored row (same shape as state's `AuditRow`). */
export interface AuditRow {
  seq: number;
  ts: string;
  prevHash: string;
  hash: string;
  action: string;
  actorSubject: string | null;
  actorEmail: string | null;
  event: Record<string, unknown>;
}

/** A store query (same shape as state's `AuditQuery`). */
export interface AuditRowQuery {
  beforeSeq?: number;
  afterSeq?: number;
  action?: string;
  /** Matches actor subject or email exactly. */
  actor?: string;
  /** Inclusive RFC 3339 bounds on ts. */
  since?: string;
  until?: string;
  limit?: number;
  order?: 'asc' | 'desc';
}

/**
 * What the audit log needs from storage. `append(build)` must call `build(head)` and insert its
 * row in one serialised transaction, refusing a row whose seq or prevHash do not continue the
 * head. `query` defaults to newest first; it must honour `limit` up to at least 1001.
 */
export interface AuditStore {
  append(build: (prev: AuditHead | null) => AuditRowInput | Promise<AuditRowInput>): Promise<AuditRow>;
  head(): Promise<AuditHead | null>;
  /** Lowest retained seq, or null when empty. */
  earliestSeq(): Promise<number | null>;
  query(q?: AuditRowQuery): Promise<AuditRow[]>;
}

/** The row to store for `event`. Pure. */
export function eventToRow(event: AuditEvent): AuditRowInput {
  const { hash, ...hashed } = event;
  return {
    seq: event.seq,
    ts: event.ts,
    prevHash: event.prevHash,
    hash,
    action: event.action,
    actorSubject: event.actor.subject,
    actorEmail: event.actor.email,
    event: hashed as unknown as Record<string, unknown>,
  };
}

/**
 * The event a stored row holds: its JSON with the columns laid over it (see module comment).
 * Never throws; a damaged row yields an event the verifier reports.
 */
export function rowToEvent(row: AuditRow): AuditEvent {
  const json = isPlainObject(row.event) ? row.event : {};
  const actor = isPlainObject(json.actor)
    ? { ...json.actor, email: row.actorEmail, subject: row.actorSubject }
    : json.actor;
  return {
    ...json,
    seq: row.seq,
    ts: row.ts,
    action: row.action,
    actor,
    prevHash: row.prevHash,
    hash: row.hash,
  } as AuditEvent;
}

/** An in-memory {@link AuditStore} with `rows` exposed (tests and tools may edit them). */
export interface MemoryAuditStore extends AuditStore {
  /** The stored rows, oldest first. Editing them simulates tampering. */
  readonly rows: AuditRow[];
  /** Drops rows with seq below `seq` (retention), as a pruning engine would. */
  pruneBefore(seq: number): void;
}

/**
 * A real, serialised, in-memory store: appends run one at a time (a promise chain), so concurrent
 * `record` calls stay linear exactly as with the state store. For tests, tools and consumers that
 * keep a verified copy; the engine uses @coffer/state.
 */
export function createMemoryAuditStore(): MemoryAuditStore {
  let rows: AuditRow[] = [];
  let tail: Promise<unknown> = Promise.resolve();
  const head = (): AuditHead | null => {
    const last = rows.at(-1);
    return last === undefined ? null : { seq: last.seq, hash: last.hash };
  };
  const store: MemoryAuditStore = {
    get rows() {
      return rows;
    },
    pruneBefore(seq: number) {
      rows = rows.filter((r) => r.seq >= seq);
    },
    append(build) {
      const run = tail.then(async () => {
        const prev = head();
        const input = await build(prev);
        if (input.seq !== (prev?.seq ?? 0) + 1 || input.prevHash !== (prev?.hash ?? GENESIS_HASH)) {
          throw Object.assign(new Error('audit row does not continue the head'), {
            code: 'ERR_MEMORY_STORE_INVARIANT',
          });
        }
        const row: AuditRow = {
          seq: input.seq,
          ts: input.ts,
          prevHash: input.prevHash,
          hash: input.hash,
          action: input.action,
          actorSubject: input.actorSubject ?? null,
          actorEmail: input.actorEmail ?? null,
          event: structuredClone(input.event),
        };
        rows.push(row);
        return structuredClone(row);
      });
      tail = run.catch(() => undefined);
      return run;
    },
    async head() {
      return head();
    },
    async earliestSeq() {
      return rows[0]?.seq ?? null;
    },
    async query(q = {}) {
      const since = q.since === undefined ? undefined : Date.parse(q.since);
      const until = q.until === undefined ? undefined : Date.parse(q.until);
      const matched = rows.filter(
        (r) =>
          (q.beforeSeq === undefined || r.seq < q.beforeSeq) &&
          (q.afterSeq === undefined || r.seq > q.afterSeq) &&
          (q.action === undefined || r.action === q.action) &&
          (q.actor === undefined || r.actorEmail === q.actor || r.actorSubject === q.actor) &&
          (since === undefined || Date.parse(r.ts) >= since) &&
          (until === undefined || Date.parse(r.ts) <= until),
      );
      if ((q.order ?? 'desc') === 'desc') matched.reverse();
      return structuredClone(matched.slice(0, Math.min(q.limit ?? 100, 10000)));
    },
  };
  return store;
}
