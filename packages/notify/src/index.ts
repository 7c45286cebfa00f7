/**
 * @coffer/notify: the notifications of the Coffer backup engine as a library (no HTTP server, no
 * storage): the 23 events, seven channel kinds, rules and routing, digests, the outbound URL guard
 * and delivery with timeouts and records. docs/notifications.md is the full description.
 */
export {
  CHANNEL_KINDS,
  type ChannelKind,
  type ChannelSummary,
  type ChannelView,
  channelSummary,
  KIND_FIELDS,
  type NormaliseChannelOptions,
  normaliseAddresses,
  normaliseChannel,
  type OpenChannel,
  openChannel,
  type SecretBox,
  type StoredChannel,
  viewChannel,
} from './channels.ts';
export {
  DELIVERY_TIMEOUT_MS,
  type DeliverOptions,
  DeliveryHistory,
  type DeliveryRecord,
  deliver,
  deliverMessage,
  deliverTest,
  type EmailConfig,
} from './deliver.ts';
export {
  type Cadence,
  DEFAULT_DIGEST_SCHEDULES,
  type DigestEntry,
  DigestScheduler,
  type DigestSchedulerOptions,
  type DigestSchedules,
  type DigestStore,
  MemoryDigestStore,
} from './digest.ts';
export {
  isNotifyError,
  NOTIFY_ERROR_CODES,
  NotifyError,
  type NotifyErrorCode,
  type UrlRefusal,
} from './errors.ts';
export {
  EVENT_CLASSES,
  EVENT_INFO,
  type EventClass,
  type EventInfo,
  isNotifyEvent,
  isSeverity,
  NOTIFY_EVENTS,
  type NotifyEvent,
  RECOVERY,
  SEVERITIES,
  type Severity,
  severityRank,
} from './events.ts';
export {
  createNotifier,
  type Notifier,
  type NotifierConfig,
  type NotifierOptions,
  type NotifyOutcome,
} from './notifier.ts';
export {
  type BuildOptions,
  buildMail,
  buildRequest,
  DEFAULT_INCIDENT_URL,
  type DigestLine,
  digestMessage,
  type HttpRequest,
  type MailMessage,
  type Message,
  type Notification,
  notificationText,
  TEST_DETAIL,
  toMessage,
  verifyWebhookSignature,
  webhookSignature,
} from './payloads.ts';
export {
  DIGESTS,
  type Digest,
  type NormaliseRuleOptions,
  normaliseRule,
  type RouteContext,
  type RouteResult,
  type Rule,
  route,
  rulesDeliveringNowhere,
  rulesForFirstChannel,
} from './rules.ts';
export {
  type AddressClass,
  checkChannelUrl,
  classifyAddress,
  PREVIEW_DOMAINS,
  type ResolvedAddress,
  type Resolver,
  resolveTarget,
  systemResolver,
  type UrlCheckOptions,
} from './url-guard.ts';
