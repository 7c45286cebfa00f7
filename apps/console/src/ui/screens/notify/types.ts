/**
 * What the Notifications screen reads and writes (docs/notifications.md): the channel read shape
 * (write-only fields as `{ set: true }`, a URL as its origin), rules, delivery records, the closed
 * set of 23 events with their default severity and class, and the transport fields of each kind.
 */
import { ApiError } from '../../api/errors.ts';

export type Severity = 'info' | 'warning' | 'critical';
export const SEVERITIES: readonly Severity[] = ['info', 'warning', 'critical'];

export type EventClass = 'problem' | 'success' | 'approval' | 'security' | 'update' | 'test';

export interface EventInfo {
  name: string;
  severity: Severity;
  class: EventClass;
}

/** The 23 events (docs/notifications.md "Events"), in the table's order. */
export const EVENTS: readonly EventInfo[] = [
  { name: 'backup-failure', severity: 'critical', class: 'problem' },
  { name: 'backup-parked', severity: 'warning', class: 'problem' },
  { name: 'backup-abandoned', severity: 'critical', class: 'problem' },
  { name: 'backup-stale', severity: 'warning', class: 'problem' },
  { name: 'backup-success', severity: 'info', class: 'success' },
  { name: 'restore-applied', severity: 'info', class: 'success' },
  { name: 'restore-cancelled', severity: 'warning', class: 'problem' },
  { name: 'restore-approval-requested', severity: 'warning', class: 'approval' },
  { name: 'restore-approved', severity: 'info', class: 'approval' },
  { name: 'restore-rejected', severity: 'info', class: 'approval' },
  { name: 'drill-failed', severity: 'critical', class: 'problem' },
  { name: 'drill-passed', severity: 'info', class: 'success' },
  { name: 'verify-failed', severity: 'critical', class: 'problem' },
  { name: 'audit-chain-break', severity: 'critical', class: 'security' },
  { name: 'admin-token-retired', severity: 'warning', class: 'security' },
  { name: 'break-glass-key-set', severity: 'warning', class: 'security' },
  { name: 'sessions-revoked', severity: 'warning', class: 'security' },
  { name: 'role-changed', severity: 'warning', class: 'security' },
  { name: 'pull-credential-minted', severity: 'warning', class: 'security' },
  { name: 'update-available', severity: 'info', class: 'update' },
  { name: 'update-applied', severity: 'info', class: 'update' },
  { name: 'update-rolled-back', severity: 'warning', class: 'update' },
  { name: 'notification-test', severity: 'info', class: 'test' },
];

/** The events a rule may name (`notification-test` is never routed). */
export const RULE_EVENTS = EVENTS.filter((e) => e.class !== 'test');

export const EVENT_CLASS_TITLES: Record<Exclude<EventClass, 'test'>, string> = {
  problem: 'Problems',
  success: 'Successes (off unless listed or under a digest)',
  approval: 'Approvals',
  security: 'Security',
  update: 'Updates',
};

export type ChannelKind =
  | 'email'
  | 'webhook'
  | 'chat-webhook'
  | 'chat-connector'
  | 'incident'
  | 'alert-api'
  | 'itsm-event';

export const KINDS: readonly { kind: ChannelKind; label: string }[] = [
  { kind: 'email', label: 'Email' },
  { kind: 'webhook', label: 'Webhook (JSON, optionally signed)' },
  { kind: 'chat-webhook', label: 'Chat incoming webhook (Slack-compatible)' },
  { kind: 'chat-connector', label: 'Chat connector (Microsoft Teams, Google Chat)' },
  { kind: 'incident', label: 'Incident routing (PagerDuty Events v2)' },
  { kind: 'alert-api', label: 'Alert API (Opsgenie and compatible)' },
  { kind: 'itsm-event', label: 'IT-service events (ServiceNow)' },
];

export function kindLabel(kind: string): string {
  return KINDS.find((k) => k.kind === kind)?.label ?? kind;
}

export interface SetMarker {
  set: true;
}

/** `GET /admin/notify/channels` → channels[] (docs/notifications.md "Channels"). */
export interface ChannelView {
  id: string;
  name: string;
  kind: ChannelKind;
  enabled: boolean;
  allowPrivateTarget: boolean;
  toAddresses?: string[];
  url?: SetMarker & { origin: string };
  username?: string;
  routingKey?: SetMarker;
  apiKey?: SetMarker;
  signingSecret?: SetMarker;
}

export type Digest = 'off' | 'daily' | 'weekly';

export interface Rule {
  id: string;
  scope: 'global' | { job: string };
  minSeverity: Severity;
  events: 'all' | string[];
  channelIds: string[];
  digest: Digest;
}

export interface ChannelsAnswer {
  channels: ChannelView[];
  rules: Rule[];
  /** Ids of rules left with no existing, enabled channel. */
  nowhere: string[];
}

export interface DeliveryRecord {
  id: string;
  at: string;
  messageId: string;
  event: string;
  severity: Severity;
  channelId: string;
  channelKind: ChannelKind;
  accepted: boolean;
  test: boolean;
  attempt: number;
  willRetry: boolean;
  status?: number;
  error?: { code: string; message: string };
  detail: string;
}

/**
 * A row of `GET /admin/notify/history` (the state store's delivery ring): the attempt number, the
 * HTTP or SMTP status and the error code are folded into `detail` as
 * `attempt <n>: <accepted (status) | CODE (status), will retry>; <notification detail>`.
 * The full record's fields are read too when an engine sends them.
 */
export interface HistoryRow extends Partial<Omit<DeliveryRecord, 'channelId' | 'severity'>> {
  seq?: number;
  at: string;
  event: string;
  severity: Severity;
  channelKind: ChannelKind;
  channelId: string | null;
  detail: string;
  accepted: boolean;
  test: boolean;
}

/** The delivery error codes (docs/notifications.md "Error codes"), in words. */
export const DELIVERY_ERRORS: Record<string, string> = {
  ERR_NOTIFY_TIMEOUT: 'no answer within 5 seconds',
  ERR_NOTIFY_HTTP_STATUS: 'the receiver answered outside 2xx',
  ERR_NOTIFY_REDIRECT: 'the receiver redirected (not followed)',
  ERR_NOTIFY_CONNECT: 'the connection failed or was reset',
  ERR_NOTIFY_DNS: 'the host could not be resolved',
  ERR_NOTIFY_TLS: 'the TLS certificate was not trusted or not for the host',
  ERR_NOTIFY_EMAIL: 'the mail server refused the message or was unreachable',
  ERR_NOTIFY_SECRET: 'a sealed field of the channel could not be opened',
  ERR_NOTIFY_NOT_CONFIGURED: 'no mail transport, or the channel lacks a transport field',
  ERR_NOTIFY_URL_REFUSED: 'the URL guard refused the address',
};

/** A history row's attempt, status, error code and retry flag, from its fields or its detail line. */
export function partsOf(r: HistoryRow): {
  attempt?: number;
  status?: number;
  code?: string;
  willRetry: boolean;
  detail: string;
} {
  const m = /^attempt (\d+): ([^;]*); ([\s\S]*)$/.exec(r.detail);
  const outcome = m?.[2] ?? '';
  const status = r.status ?? (/\((\d+)\)/.exec(outcome) ? Number(/\((\d+)\)/.exec(outcome)![1]) : undefined);
  const code = r.error?.code ?? /^(ERR_[A-Z_]+|failed)/.exec(outcome)?.[1];
  const attempt = r.attempt ?? (m ? Number(m[1]) : undefined);
  return {
    ...(attempt !== undefined ? { attempt } : {}),
    ...(status !== undefined ? { status } : {}),
    ...(code !== undefined ? { code } : {}),
    willRetry: r.willRetry ?? /will retry/.test(outcome),
    detail: m ? m[3]! : r.detail,
  };
}

export interface CreateChannelAnswer {
  channel: ChannelView;
  rulesCreated: Rule[];
}

export const NOTIFY_KEY = ['notify', 'channels'] as const;
export const HISTORY_KEY = ['notify', 'history'] as const;

/** A notify error code (`ERR_NOTIFY_...`) from a 400 body. */
export function codeOfError(err: unknown): string | undefined {
  if (!(err instanceof ApiError)) return undefined;
  const body = err.body as { code?: unknown } | undefined;
  return typeof body?.code === 'string' ? body.code : undefined;
}

export function scopeText(scope: Rule['scope']): string {
  return scope === 'global' ? 'global (every job)' : `job ${scope.job}`;
}

/** A delivery record's outcome in words. */
export function outcomeText(r: DeliveryRecord): string {
  if (r.accepted) return `accepted${r.status !== undefined ? ` (${r.status})` : ''}`;
  const why = r.error ? `${r.error.code}: ${r.error.message}` : 'not accepted';
  return `not accepted${r.status !== undefined ? ` (${r.status})` : ''} — ${why}${
    r.willRetry ? '; will retry' : ''
  }`;
}
