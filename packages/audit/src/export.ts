/**
 * Audit export (`GET /admin/audit/export`): the JSON document a consumer verifies offline, and a
 * CSV rendering for people (docs/audit.md "Export").
 *
 * The JSON document is `{ kind: 'engine-audit-export', v: 1, headSeq, headHash, events }` with the
 * events oldest first; `verifyExportDocument` checks it end to end. The CSV carries every field
 * (detail as canonical JSON) but is not a verification format: `null` and the empty string look
 * alike in it, and cells that a spreadsheet would run as a formula (starting `=`, `+`, `-`, `@`,
 * tab or carriage return) are prefixed with `'` (OWASP's CSV-injection advice). Verify the JSON.
 */
import { canonicalJson } from '@coffer/crypto';
import { AuditError } from './errors.ts';
import { type AuditAnchor, type AuditEvent, GENESIS_HASH } from './event.ts';
import { isDigest, isPlainObject } from './internal/shape.ts';
import { type ChainResult, verifyChain } from './verify.ts';

/** The JSON export document. */
export interface AuditExportDocument {
  kind: 'engine-audit-export';
  v: 1;
  headSeq: number;
  headHash: string;
  /** Oldest first. */
  events: AuditEvent[];
}

/**
 * The export document for `events` (sorted oldest first here) at `head` (default: the last event,
 * or seq 0 / GENESIS_HASH when empty). Pure; does not verify (use verifyExportDocument).
 */
export function buildExportDocument(events: readonly AuditEvent[], head?: AuditAnchor): AuditExportDocument {
  const sorted = [...events].sort((a, b) => a.seq - b.seq);
  const last = sorted.at(-1);
  const h =
    head ?? (last === undefined ? { seq: 0, hash: GENESIS_HASH } : { seq: last.seq, hash: last.hash });
  return { kind: 'engine-audit-export', v: 1, headSeq: h.seq, headHash: h.hash, events: sorted };
}

/**
 * Verifies an export document (parsed JSON) from `options.anchor` (default genesis; `null` for an
 * export of a pruned chain, or an anchor the consumer kept from earlier) to exactly its own head.
 * Returns the chain result. Throws `ERR_AUDIT_MALFORMED_DOCUMENT` when `doc` is not an export
 * document.
 */
export function verifyExportDocument(
  doc: unknown,
  options: { anchor?: AuditAnchor | null } = {},
): ChainResult {
  if (
    !isPlainObject(doc) ||
    doc.kind !== 'engine-audit-export' ||
    doc.v !== 1 ||
    !(typeof doc.headSeq === 'number' && Number.isSafeInteger(doc.headSeq) && doc.headSeq >= 0) ||
    !isDigest(doc.headHash) ||
    !Array.isArray(doc.events)
  ) {
    throw new AuditError('ERR_AUDIT_MALFORMED_DOCUMENT', 'not an engine-audit-export v1 document');
  }
  return verifyChain(doc.events, {
    ...(options.anchor === undefined ? {} : { anchor: options.anchor }),
    expectedHead: { seq: doc.headSeq, hash: doc.headHash },
  });
}

/** The CSV columns, in order. */
export const CSV_COLUMNS = [
  'seq',
  'ts',
  'action',
  'outcome',
  'actorMethod',
  'actorEmail',
  'actorSubject',
  'role',
  'sourceAddress',
  'approverEmail',
  'approverSubject',
  'target',
  'detail',
  'prevHash',
  'hash',
] as const;

/** One CSV cell: RFC 4180 quoting, plus the formula-injection guard. */
export function csvCell(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function detailText(detail: unknown): string {
  try {
    return canonicalJson(detail ?? {});
  } catch {
    return '';
  }
}

/**
 * RFC 4180 CSV of `events` in the given order: a header row of {@link CSV_COLUMNS}, then one row
 * per event, CRLF line ends, a trailing CRLF. `detail` is its canonical JSON. Never throws.
 */
export function toCsv(events: Iterable<AuditEvent>): string {
  let out = csvHeader();
  for (const e of events) out += csvRow(e);
  return out;
}

/** The CSV header line (with its CRLF), for streaming. */
export function csvHeader(): string {
  return `${CSV_COLUMNS.join(',')}\r\n`;
}

/** One CSV line (with its CRLF) for `e`, for streaming. */
export function csvRow(e: AuditEvent): string {
  const cells = [
    e.seq,
    e.ts,
    e.action,
    e.outcome,
    e.actor?.method,
    e.actor?.email,
    e.actor?.subject,
    e.role,
    e.sourceAddress,
    e.approver?.email,
    e.approver?.subject,
    e.target,
    detailText(e.detail),
    e.prevHash,
    e.hash,
  ];
  return `${cells.map((c) => csvCell(c as string | number | null | undefined)).join(',')}\r\n`;
}

/**
 * HTTP headers that carry the head with a CSV export (CSV has nowhere else to put it):
 * `x-audit-head-seq` and `x-audit-head-hash`. The last row's hash equals the head hash when the
 * export is complete.
 */
export function headHeaders(head: AuditAnchor): Record<'x-audit-head-seq' | 'x-audit-head-hash', string> {
  return { 'x-audit-head-seq': String(head.seq), 'x-audit-head-hash': head.hash };
}
