/**
 * What each channel kind is sent: the one-line text, and the exact HTTP request (method, URL,
 * headers, JSON body) or mail each real service accepts. docs/notifications.md shows one request
 * per kind; a test builds them with this module and compares.
 *
 * A payload carries the event, its severity, the job id and name, RFC 3339 times and a one-line
 * detail (specification "Events / Notifications"): no backup data, keys or secrets. Free text (job
 * names, detail lines) is stripped of control characters and capped.
 */
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import type { ChannelKind, OpenChannel } from './channels.ts';
import {
  EVENT_INFO,
  type EventClass,
  type NotifyEvent,
  RECOVERY,
  recoveryFamilyOf,
  type Severity,
} from './events.ts';

/** What the engine raises. `severity` defaults to the event's; `at` to now. */
export interface Notification {
  event: NotifyEvent;
  severity?: Severity;
  jobId?: string;
  jobName?: string;
  /** One line: the job name and state in words ("run failed: destination unreachable"). */
  detail?: string;
  at?: string | Date;
  runId?: string;
}

/** One digest line, as the digest store keeps it. */
export interface DigestLine {
  event: NotifyEvent;
  severity: Severity;
  jobId?: string;
  jobName?: string;
  detail: string;
  at: string;
}

/** A notification resolved for sending (or a digest summary). */
export interface Message {
  id: string;
  event: NotifyEvent | 'digest';
  severity: Severity;
  class: EventClass | 'digest';
  jobId?: string;
  jobName?: string;
  runId?: string;
  at: string;
  title: string;
  detail: string;
  /** The one-line text (`notificationText`). */
  text: string;
  test: boolean;
  /** `resolve` for a success event that recovers a problem (incident-style kinds close it). */
  action: 'trigger' | 'resolve';
  dedupKey: string;
  digest?: { cadence: 'daily' | 'weekly'; lines: DigestLine[] };
}

/** The fixed test line (`POST /admin/notify/test`). */
export const TEST_DETAIL = 'Test notification from Coffer: this channel is set up and reachable.';

const TITLES: Record<NotifyEvent, string> = {
  'backup-failure': 'Backup failed',
  'backup-parked': 'Backup parked',
  'backup-abandoned': 'Backup abandoned',
  'backup-stale': 'Backup stale',
  'backup-success': 'Backup succeeded',
  'restore-applied': 'Restore applied',
  'restore-cancelled': 'Restore cancelled',
  'restore-approval-requested': 'Restore approval requested',
  'restore-approved': 'Restore approved',
  'restore-rejected': 'Restore rejected',
  'drill-failed': 'Restore drill failed',
  'drill-passed': 'Restore drill passed',
  'verify-failed': 'Verification failed',
  'audit-chain-break': 'Audit chain break',
  'admin-token-retired': 'Admin token retired',
  'break-glass-key-set': 'Break-glass key set',
  'sessions-revoked': 'All sessions signed out',
  'role-changed': 'Role changed',
  'pull-credential-minted': 'Pull credential minted',
  'update-available': 'Update available',
  'update-applied': 'Update applied',
  'update-rolled-back': 'Update rolled back',
  'notification-test': 'Test notification',
};

// biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters is the point
const CONTROLS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g;

/** Free text made one safe line: control characters become spaces, runs collapse, capped. */
export function oneLine(s: string, max: number): string {
  const t = s.replace(CONTROLS, ' ').replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function rfc3339(at: string | Date | undefined): string {
  const d = at === undefined ? new Date() : new Date(at);
  return Number.isNaN(d.getTime()) ? new Date().toISOString() : d.toISOString();
}

function jobLabel(m: { jobId?: string; jobName?: string }): string | undefined {
  if (m.jobName && m.jobId) return `job ${m.jobName} (${m.jobId})`;
  if (m.jobName || m.jobId) return `job ${m.jobName ?? m.jobId}`;
  return undefined;
}

/**
 * The one-line text of a notification: `[severity] Title: job name (id) - detail (time)`.
 * Example: `[critical] Backup failed: job nightly-db (job_1) - run failed: destination unreachable
 * (2025-05-01T02:00:04.120Z)`.
 */
export function notificationText(n: Notification): string {
  const m = toMessage(n);
  return m.text;
}

/** Resolves a notification for sending: defaults, safe text, title, dedup key and action. */
export function toMessage(n: Notification, options: { id?: string; test?: boolean } = {}): Message {
  const info = EVENT_INFO[n.event];
  const severity = n.severity ?? info.severity;
  const jobId = n.jobId === undefined ? undefined : oneLine(n.jobId, 100);
  const jobName = n.jobName === undefined ? undefined : oneLine(n.jobName, 200);
  const detail = oneLine(n.detail ?? info.firesWhen.replace(/`/g, ''), 500);
  const at = rfc3339(n.at);
  const job = jobLabel({ jobId, jobName });
  const title = jobName ? `${TITLES[n.event]}: ${jobName}` : TITLES[n.event];
  const text = `[${severity}] ${TITLES[n.event]}${job ? `: ${job}` : ''} - ${detail} (${at})`;
  const family = RECOVERY[n.event]?.family ?? recoveryFamilyOf(n.event);
  const m: Message = {
    id: options.id ?? randomUUID(),
    event: n.event,
    severity,
    class: info.class,
    at,
    title,
    detail,
    text,
    test: options.test ?? false,
    action: RECOVERY[n.event] !== undefined ? 'resolve' : 'trigger',
    dedupKey: `coffer:${family ?? n.event}:${jobId ?? 'engine'}`,
  };
  if (jobId !== undefined) m.jobId = jobId;
  if (jobName !== undefined) m.jobName = jobName;
  if (n.runId !== undefined) m.runId = oneLine(n.runId, 100);
  return m;
}

/** The summary message of one channel's digest. */
export function digestMessage(cadence: 'daily' | 'weekly', lines: DigestLine[], at?: Date): Message {
  const counts = new Map<string, number>();
  for (const l of lines) counts.set(l.event, (counts.get(l.event) ?? 0) + 1);
  const tally = [...counts].map(([e, c]) => `${c} ${e}`).join(', ');
  const when = rfc3339(at);
  const title = `Coffer ${cadence} digest`;
  const detail = `${lines.length} event${lines.length === 1 ? '' : 's'}: ${tally}`;
  return {
    id: randomUUID(),
    event: 'digest',
    severity: 'info',
    class: 'digest',
    at: when,
    title,
    detail,
    text: `[info] ${title} - ${detail} (${when})`,
    test: false,
    action: 'trigger',
    dedupKey: `coffer:digest:${cadence}:${when.slice(0, 10)}`,
    digest: { cadence, lines },
  };
}

/** The lines a digest lists (at most 50, then a count of the rest). */
function digestLines(m: Message): string[] {
  if (!m.digest) return [];
  const lines = m.digest.lines.slice(0, 50).map((l) => {
    const job = jobLabel(l);
    return `${l.at} [${l.severity}] ${l.event}${job ? ` ${job}` : ''}: ${l.detail}`;
  });
  if (m.digest.lines.length > 50) lines.push(`… and ${m.digest.lines.length - 50} more`);
  return lines;
}

export interface HttpRequest {
  method: 'POST';
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface MailMessage {
  to: string[];
  subject: string;
  text: string;
}

export interface BuildOptions {
  /** The incident service's events endpoint. Default `https://events.pagerduty.com/v2/enqueue`. */
  incidentUrl?: string;
  /** The name this engine gives itself in payloads (PagerDuty `source`, ServiceNow `node`). */
  source?: string;
  /** Signing time for the webhook signature (seconds since the epoch); default now. */
  signedAt?: number;
}

export const DEFAULT_INCIDENT_URL = 'https://events.pagerduty.com/v2/enqueue';
const USER_AGENT = 'coffer-notify/1';

const json = (headers: Record<string, string> = {}): Record<string, string> => ({
  'content-type': 'application/json',
  'user-agent': USER_AGENT,
  ...headers,
});

/** The generic webhook's JSON document. */
export function webhookDocument(m: Message): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    version: 1,
    id: m.id,
    event: m.event,
    severity: m.severity,
    class: m.class,
    test: m.test,
    job: m.jobId || m.jobName ? { id: m.jobId ?? null, name: m.jobName ?? null } : null,
    runId: m.runId ?? null,
    at: m.at,
    title: m.title,
    detail: m.detail,
    text: m.text,
  };
  if (m.digest) doc.digest = { cadence: m.digest.cadence, entries: m.digest.lines };
  return doc;
}

/**
 * The webhook signature header value: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`.
 * A receiver recomputes v1 over the raw body it got, compares in constant time, and refuses a `t`
 * more than five minutes off its clock.
 */
export function webhookSignature(secret: string, body: string, t: number): string {
  return `t=${t},v1=${createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')}`;
}

/**
 * Checks a webhook signature header the way a receiver should: recompute v1 over the raw body,
 * compare in constant time, and refuse a `t` more than `toleranceSec` (default 300) from `now`.
 */
export function verifyWebhookSignature(
  secret: string,
  body: string,
  header: string,
  options: { now?: number; toleranceSec?: number } = {},
): boolean {
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return false;
  const t = Number(m[1]);
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - t) > (options.toleranceSec ?? 300)) return false;
  const want = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  return timingSafeEqual(want, Buffer.from(m[2]!, 'hex'));
}

function slackEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function slackBody(m: Message): Record<string, unknown> {
  const job = jobLabel(m);
  const context = [`severity *${m.severity}*`, `event \`${m.event}\``];
  if (job) context.push(slackEscape(job));
  context.push(m.at);
  if (m.test) context.push('test');
  const lines = digestLines(m);
  const blocks: unknown[] = [
    { type: 'header', text: { type: 'plain_text', text: oneLine(`[${m.severity}] ${m.title}`, 150) } },
    { type: 'section', text: { type: 'mrkdwn', text: slackEscape(m.detail) } },
  ];
  if (lines.length > 0)
    blocks.push({
      type: 'section',
      text: { type: 'mrkdwn', text: oneLineBlock(lines.map(slackEscape), 2900) },
    });
  blocks.push({ type: 'context', elements: [{ type: 'mrkdwn', text: context.join(' · ') }] });
  return { text: m.text, blocks };
}

function oneLineBlock(lines: string[], max: number): string {
  const s = lines.join('\n');
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function isGoogleChat(url: string): boolean {
  return new URL(url).hostname.toLowerCase() === 'chat.googleapis.com';
}

function googleChatBody(m: Message): Record<string, unknown> {
  const lines = digestLines(m);
  const job = jobLabel(m);
  const head = `*[${m.severity}] ${m.title}*`;
  const tail = `${m.event}${job ? ` · ${job}` : ''} · ${m.at}${m.test ? ' · test' : ''}`;
  return { text: [head, m.detail, ...lines, tail].join('\n') };
}

function teamsBody(m: Message): Record<string, unknown> {
  const facts: { title: string; value: string }[] = [
    { title: 'Severity', value: m.severity },
    { title: 'Event', value: m.event },
  ];
  const job = jobLabel(m);
  if (job) facts.push({ title: 'Job', value: job.slice(4) });
  facts.push({ title: 'Time', value: m.at });
  if (m.test) facts.push({ title: 'Test', value: 'yes' });
  const body: unknown[] = [
    { type: 'TextBlock', size: 'Medium', weight: 'Bolder', text: `[${m.severity}] ${m.title}`, wrap: true },
    { type: 'TextBlock', text: m.detail, wrap: true },
  ];
  const lines = digestLines(m);
  if (lines.length > 0) body.push({ type: 'TextBlock', text: lines.join('\n\n'), wrap: true });
  body.push({ type: 'FactSet', facts });
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body,
        },
      },
    ],
  };
}

const PD_SEVERITY: Record<Severity, string> = { info: 'info', warning: 'warning', critical: 'critical' };

function incidentBody(m: Message, routingKey: string, source: string): Record<string, unknown> {
  if (m.action === 'resolve')
    return { routing_key: routingKey, event_action: 'resolve', dedup_key: m.dedupKey };
  const details: Record<string, unknown> = { event: m.event, detail: m.detail, test: m.test };
  if (m.jobId) details.jobId = m.jobId;
  if (m.jobName) details.jobName = m.jobName;
  if (m.runId) details.runId = m.runId;
  const lines = digestLines(m);
  if (lines.length > 0) details.entries = lines;
  const payload: Record<string, unknown> = {
    summary: oneLine(m.text, 1024),
    source,
    severity: PD_SEVERITY[m.severity],
    timestamp: m.at,
    class: m.event,
    custom_details: details,
  };
  if (m.jobName) payload.component = m.jobName;
  if (m.jobId) payload.group = m.jobId;
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: m.dedupKey,
    payload,
    client: 'Coffer',
  };
}

const OPSGENIE_PRIORITY: Record<Severity, string> = { critical: 'P1', warning: 'P3', info: 'P5' };

function alertRequest(m: Message, url: string, apiKey: string, source: string): HttpRequest {
  const headers = json({ authorization: `GenieKey ${apiKey}` });
  if (m.action === 'resolve') {
    const base = url.replace(/\/+$/, '');
    return {
      method: 'POST',
      url: `${base}/${encodeURIComponent(m.dedupKey)}/close?identifierType=alias`,
      headers,
      body: JSON.stringify({ source, note: oneLine(m.text, 25000) }),
    };
  }
  const details: Record<string, string> = { event: m.event, severity: m.severity, at: m.at };
  if (m.jobId) details.jobId = m.jobId;
  if (m.jobName) details.jobName = m.jobName;
  if (m.test) details.test = 'true';
  const body: Record<string, unknown> = {
    message: oneLine(`[${m.severity}] ${m.title}`, 130),
    alias: m.dedupKey,
    description: [m.detail, ...digestLines(m)].join('\n').slice(0, 15000),
    priority: OPSGENIE_PRIORITY[m.severity],
    source,
    tags: ['coffer', m.event, m.severity],
    details,
  };
  if (m.jobName) body.entity = m.jobName;
  return { method: 'POST', url, headers, body: JSON.stringify(body) };
}

const SNOW_SEVERITY: Record<Severity, string> = { critical: '1', warning: '4', info: '5' };

/** `yyyy-MM-dd HH:mm:ss` in UTC, the time format ServiceNow's event API reads. */
function snowTime(at: string): string {
  return at.slice(0, 19).replace('T', ' ');
}

function itsmRequest(m: Message, url: string, username: string, apiKey: string, source: string): HttpRequest {
  const additional: Record<string, unknown> = { event: m.event, severity: m.severity, test: m.test };
  if (m.jobId) additional.jobId = m.jobId;
  if (m.runId) additional.runId = m.runId;
  const lines = digestLines(m);
  const record = {
    source: 'Coffer',
    event_class: 'coffer',
    node: source,
    resource: m.jobName ?? m.jobId ?? 'engine',
    type: m.event,
    metric_name: m.event,
    severity: m.action === 'resolve' ? '0' : SNOW_SEVERITY[m.severity],
    message_key: m.dedupKey,
    description: [m.text, ...lines].join('\n').slice(0, 4000),
    time_of_event: snowTime(m.at),
    additional_info: JSON.stringify(additional),
  };
  return {
    method: 'POST',
    url,
    headers: json({
      accept: 'application/json',
      authorization: `Basic ${Buffer.from(`${username}:${apiKey}`, 'utf8').toString('base64')}`,
    }),
    body: JSON.stringify({ records: [record] }),
  };
}

/** The mail a channel with addresses (email, chat-connector mail path) is sent. */
export function buildMail(m: Message, toAddresses: string[]): MailMessage {
  const job = jobLabel(m);
  const lines = [
    m.detail,
    '',
    `Event: ${m.event}`,
    `Severity: ${m.severity}`,
    ...(job ? [`Job: ${job.slice(4)}`] : []),
    `Time: ${m.at}`,
    ...(m.test ? ['This is a test notification.'] : []),
  ];
  const d = digestLines(m);
  if (d.length > 0) lines.push('', ...d);
  lines.push('', '-- Coffer');
  return {
    to: toAddresses,
    subject: oneLine(`[Coffer] ${m.severity}: ${m.title}`, 200),
    text: `${lines.join('\n')}\n`,
  };
}

/** True when a kind sends mail for this channel (email, or chat-connector with addresses). */
export function sendsMail(c: OpenChannel): boolean {
  return c.kind === 'email' || (c.kind === 'chat-connector' && c.toAddresses !== undefined);
}

/** True for kinds that open incidents or alerts (a success event is sent to them as a resolve). */
export function opensIncidents(kind: ChannelKind): boolean {
  return kind === 'incident' || kind === 'alert-api' || kind === 'itsm-event';
}

/**
 * The HTTP request an HTTP kind is sent for a message. Throws a plain Error for a mail-path channel
 * or a channel missing its fields (a stored channel from `normaliseChannel` always has them).
 */
export function buildRequest(c: OpenChannel, m: Message, options: BuildOptions = {}): HttpRequest {
  const source = oneLine(options.source ?? 'coffer', 255);
  const need = (v: string | undefined): string => {
    if (v === undefined) throw new Error(`a ${c.kind} channel is missing a field`);
    return v;
  };
  switch (c.kind) {
    case 'webhook': {
      const body = JSON.stringify(webhookDocument(m));
      const headers = json({ 'x-coffer-event': m.event, 'x-coffer-delivery': m.id });
      if (c.signingSecret !== undefined)
        headers['x-coffer-signature'] = webhookSignature(
          c.signingSecret,
          body,
          options.signedAt ?? Math.floor(Date.now() / 1000),
        );
      return { method: 'POST', url: need(c.url), headers, body };
    }
    case 'chat-webhook':
      return { method: 'POST', url: need(c.url), headers: json(), body: JSON.stringify(slackBody(m)) };
    case 'chat-connector': {
      const url = need(c.url);
      const body = isGoogleChat(url) ? googleChatBody(m) : teamsBody(m);
      return {
        method: 'POST',
        url,
        headers: json(isGoogleChat(url) ? { 'content-type': 'application/json; charset=UTF-8' } : {}),
        body: JSON.stringify(body),
      };
    }
    case 'incident':
      return {
        method: 'POST',
        url: options.incidentUrl ?? DEFAULT_INCIDENT_URL,
        headers: json(),
        body: JSON.stringify(incidentBody(m, need(c.routingKey), source)),
      };
    case 'alert-api':
      return alertRequest(m, need(c.url), need(c.apiKey), source);
    case 'itsm-event':
      return itsmRequest(m, need(c.url), need(c.username), need(c.apiKey), source);
    case 'email':
      throw new Error('an email channel is sent by mail');
  }
}
