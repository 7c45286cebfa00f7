/**
 * The audit log over a store: what the engine calls. Records events (building each one inside the
 * store's serialised append, so the chain stays linear under concurrent writers), answers the
 * feed, the admin list, the export (streamed) and the verify route.
 *
 * Security-relevant behaviour: a store failure is `ERR_AUDIT_STORE` carrying only the store's
 * code (never its message, which might quote a connection string); the specification answers a
 * failing audit read on `/support/*` with 503 (fail closed). Events pass the redaction guard in
 * `buildEvent` before they reach the store.
 */
import { AuditError, isAuditError } from './errors.ts';
import {
  type AuditAnchor,
  type AuditEvent,
  type AuditEventInput,
  buildEvent,
  GENESIS_ANCHOR,
  GENESIS_HASH,
} from './event.ts';
import { type AuditExportDocument, csvHeader, csvRow, headHeaders } from './export.ts';
import { type AuditFeedPage, buildFeedPage, parseFeedQuery, type QueryValue } from './feed.ts';
import { type AuditListPage, buildListPage, parseListQuery } from './list.ts';
import { type AuditStore, eventToRow, rowToEvent } from './store.ts';
import { type ChainResult, ChainVerifier } from './verify.ts';

/** Rows read per store query when walking the whole chain (export, verify). */
const CHUNK = 1000;

/** The verify route's 200 body: the chain result plus whether it was anchored at genesis. */
export type AuditVerifyReport = { kind: 'engine-audit-verify'; v: 1; anchored: boolean } & ChainResult;

/** A streamed export: set `headers` and `contentType`, then send `chunks`. */
export interface AuditExportStream {
  head: AuditAnchor;
  contentType: string;
  /** `x-audit-head-seq` and `x-audit-head-hash`. */
  headers: Record<string, string>;
  /** The body in pieces; iterating throws `ERR_AUDIT_STORE` when the store fails mid-way. */
  chunks: AsyncIterable<string>;
}

/** The engine-facing audit API (see createAuditLog). */
export interface AuditLog {
  /**
   * Appends the event for `input` (built from the true head inside the store's transaction) and
   * returns it. `now` defaults to the log's clock at append time. Throws what buildEvent throws,
   * or `ERR_AUDIT_STORE`.
   */
  record(input: AuditEventInput, now?: Date): Promise<AuditEvent>;
  /** The head, `{ seq: 0, hash: GENESIS_HASH }` when empty. Throws `ERR_AUDIT_STORE`. */
  head(): Promise<AuditAnchor>;
  /**
   * `GET /support/audit-feed`: parses `afterSeq` / `limit` and returns the page. Throws
   * `AuditAfterSeqError` (400 with `err.body`) or `ERR_AUDIT_STORE` (503).
   */
  feedPage(params: URLSearchParams | { afterSeq?: QueryValue; limit?: QueryValue }): Promise<AuditFeedPage>;
  /**
   * `GET /admin/audit`: newest first, filtered, paged by `beforeSeq`, with the head. Throws
   * `ERR_AUDIT_BAD_QUERY` (400) or `ERR_AUDIT_STORE`.
   */
  list(params: Parameters<typeof parseListQuery>[0]): Promise<AuditListPage>;
  /** `GET /admin/audit/export` as one document (small chains). Throws `ERR_AUDIT_STORE`. */
  exportDocument(): Promise<AuditExportDocument>;
  /** `GET /admin/audit/export?format=json|csv`, streamed. Throws `ERR_AUDIT_STORE`. */
  openExport(format: 'json' | 'csv'): Promise<AuditExportStream>;
  /**
   * `GET /admin/audit/verify`: recomputes the whole retained chain up to the stored head. A break
   * is a result (`ok: false`, `firstBadSeq`), not an exception. Throws `ERR_AUDIT_STORE`.
   */
  verify(): Promise<AuditVerifyReport>;
}

function storeError(e: unknown): AuditError {
  if (isAuditError(e)) return e;
  const code = (e as { code?: unknown } | null)?.code;
  return new AuditError(
    'ERR_AUDIT_STORE',
    'the audit store failed',
    typeof code === 'string' && /^ERR_[A-Z0-9_]{1,60}$/.test(code) ? { causeCode: code } : undefined,
  );
}

async function guarded<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (e) {
    throw storeError(e);
  }
}

/**
 * The audit log over `store` (the engine passes `state.audit`). `options.now` is the clock used
 * when `record` is called without a time (default `() => new Date()`). Never throws.
 */
export function createAuditLog(store: AuditStore, options: { now?: () => Date } = {}): AuditLog {
  const clock = options.now ?? (() => new Date());

  const head = async (): Promise<AuditAnchor> => {
    const h = await guarded(() => store.head());
    return h === null ? { ...GENESIS_ANCHOR } : { seq: h.seq, hash: h.hash };
  };

  /** Events with from < seq <= to, oldest first, in chunks. */
  async function* walk(from: number, to: number): AsyncGenerator<AuditEvent[]> {
    let cursor = from;
    while (cursor < to) {
      const rows = await guarded(() => store.query({ afterSeq: cursor, order: 'asc', limit: CHUNK }));
      const events = rows.filter((r) => r.seq > cursor && r.seq <= to).map(rowToEvent);
      if (events.length === 0) return;
      yield events;
      cursor = events.at(-1)!.seq;
      if (rows.length < CHUNK) return;
    }
  }

  const startOf = async (): Promise<number> => {
    const earliest = await guarded(() => store.earliestSeq());
    return earliest === null ? 0 : earliest - 1;
  };

  return {
    async record(input, now) {
      let buildError: unknown;
      let built: AuditEvent | undefined;
      try {
        await store.append((prev) => {
          try {
            built = buildEvent(prev, input, now ?? clock());
            return eventToRow(built);
          } catch (e) {
            buildError = e;
            throw e;
          }
        });
      } catch (e) {
        throw buildError ?? storeError(e);
      }
      return built!;
    },

    head,

    async feedPage(params) {
      const { afterSeq, limit } = parseFeedQuery(params);
      const h = await head();
      const rows =
        afterSeq >= h.seq ? [] : await guarded(() => store.query({ afterSeq, order: 'asc', limit }));
      const earliestSeq = await guarded(() => store.earliestSeq());
      return buildFeedPage(rows.map(rowToEvent), {
        afterSeq,
        limit,
        earliestSeq,
        headSeq: h.seq,
        headHash: h.hash,
      });
    },

    async list(params) {
      const q = parseListQuery(params);
      const h = await head();
      const rows = await guarded(() =>
        store.query({
          ...(q.action === undefined ? {} : { action: q.action }),
          ...(q.actor === undefined ? {} : { actor: q.actor }),
          ...(q.since === undefined ? {} : { since: q.since }),
          ...(q.until === undefined ? {} : { until: q.until }),
          beforeSeq: Math.min(q.beforeSeq ?? h.seq + 1, h.seq + 1),
          order: 'desc',
          limit: q.limit + 1,
        }),
      );
      return buildListPage(rows.map(rowToEvent), q, h);
    },

    async exportDocument() {
      const h = await head();
      const events: AuditEvent[] = [];
      for await (const chunk of walk(await startOf(), h.seq)) events.push(...chunk);
      return { kind: 'engine-audit-export', v: 1, headSeq: h.seq, headHash: h.hash, events };
    },

    async openExport(format) {
      const h = await head();
      const from = await startOf();
      const chunks =
        format === 'csv'
          ? (async function* () {
              yield csvHeader();
              for await (const chunk of walk(from, h.seq)) yield chunk.map(csvRow).join('');
            })()
          : (async function* () {
              yield `{"kind":"engine-audit-export","v":1,"headSeq":${h.seq},"headHash":${JSON.stringify(h.hash)},"events":[`;
              let first = true;
              for await (const chunk of walk(from, h.seq)) {
                const text = chunk.map((e) => JSON.stringify(e)).join(',');
                yield first ? text : `,${text}`;
                first = false;
              }
              yield ']}';
            })();
      return {
        head: h,
        contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json',
        headers: headHeaders(h),
        chunks,
      };
    },

    async verify() {
      const h = await head();
      const from = await startOf();
      const anchored = from === 0;
      const verifier = new ChainVerifier(anchored ? { seq: 0, hash: GENESIS_HASH } : null);
      for await (const chunk of walk(from, h.seq)) if (!verifier.pushAll(chunk)) break;
      return { kind: 'engine-audit-verify', v: 1, anchored, ...verifier.finish(h) };
    },
  };
}
