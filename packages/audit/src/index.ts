/**
 * @coffer/audit: the engine's tamper-evident audit chain.
 *
 * Each event carries `seq` (1, 2, 3, ... without gaps), `ts`, the actor's identity, role, source
 * address and approver, and `prevHash` / `hash`, where `hash` is `sha384:<hex>` over the RFC 8785
 * canonical JSON of the event without its `hash` (so including `prevHash`). The first event's
 * prevHash is `sha384:` + 96 zeros. Normative description: docs/audit.md.
 *
 * What lives here: the event builder with its redaction guard (events never carry a secret,
 * token, URL credential or backup data), the standalone verifier a consumer runs on exported
 * documents and feed pages without trusting the engine, feed-page and admin-list query rules,
 * JSON/CSV export, and `createAuditLog(store)`, the engine-facing API over a store that
 * @coffer/state's `state.audit` satisfies. No I/O of its own; runs in Node and browsers.
 */
export {
  ACTOR_METHODS,
  type ActorMethod,
  AUDIT_ACTIONS,
  AUDIT_OUTCOMES,
  type AuditAction,
  type AuditOutcome,
  isAuditAction,
} from './actions.ts';
export {
  AFTER_SEQ_ERROR,
  AUDIT_ERROR_CODES,
  AuditAfterSeqError,
  AuditError,
  type AuditErrorCode,
  isAuditError,
} from './errors.ts';
export {
  type AuditActor,
  type AuditAnchor,
  type AuditEvent,
  type AuditEventInput,
  type AuditIdentity,
  buildEvent,
  GENESIS_ANCHOR,
  GENESIS_HASH,
  hashEvent,
  type JsonValue,
  MAX_DETAIL_BYTES,
  MAX_DETAIL_DEPTH,
  type UnhashedAuditEvent,
} from './event.ts';
export {
  type AuditExportDocument,
  buildExportDocument,
  CSV_COLUMNS,
  csvCell,
  csvHeader,
  csvRow,
  headHeaders,
  toCsv,
  verifyExportDocument,
} from './export.ts';
export {
  type AuditFeedPage,
  buildFeedPage,
  FEED_DEFAULT_LIMIT,
  FEED_MAX_LIMIT,
  FEED_RATE_LIMIT,
  type FeedPageInput,
  type FeedPageResult,
  type FeedQuery,
  parseFeedQuery,
  parseLenientLimit,
  type QueryValue,
  verifyFeedPage,
} from './feed.ts';
export {
  type AuditFilter,
  type AuditListPage,
  type AuditListQuery,
  buildListPage,
  filterEvents,
  LIST_DEFAULT_LIMIT,
  LIST_MAX_LIMIT,
  parseListQuery,
} from './list.ts';
export { type AuditExportStream, type AuditLog, type AuditVerifyReport, createAuditLog } from './log.ts';
export {
  assertNoSecrets,
  findSecrets,
  isSensitiveFieldName,
  looksSecret,
  MAX_STRING_LENGTH,
  REDACTED,
  type SecretFinding,
  type SecretRule,
  sanitizeDetail,
} from './redact.ts';
export {
  type AuditHead,
  type AuditRow,
  type AuditRowInput,
  type AuditRowQuery,
  type AuditStore,
  createMemoryAuditStore,
  eventToRow,
  type MemoryAuditStore,
  rowToEvent,
} from './store.ts';
export {
  assertChain,
  type ChainBroken,
  type ChainOk,
  type ChainProblem,
  type ChainResult,
  ChainVerifier,
  type VerifyOptions,
  verifyChain,
} from './verify.ts';
