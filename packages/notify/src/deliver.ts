/**
 * Delivery (specification "Events / Notifications"): never throws, never blocks the caller's
 * backup (the engine does not await it on a run's path), a 5-second timeout per attempt, and one
 * channel's failure does not stop the others (channels are sent in parallel). Transient failures
 * (a 5xx, 408 or 429 answer, a timeout, a reset or refused connection, a DNS hiccup, an SMTP 4xx)
 * are retried with backoff; a 4xx, a redirect, a refused URL or a TLS failure is final. Every
 * attempt becomes a `DeliveryRecord` handed to the `record` sink; a record carries a code and a
 * fixed message, never a URL, key, address or body.
 */
import { randomUUID } from 'node:crypto';
import { type ChannelKind, openChannel, type SecretBox, type StoredChannel } from './channels.ts';
import type { NotifyErrorCode } from './errors.ts';
import type { NotifyEvent, Severity } from './events.ts';
import { AttemptFailure, postOnce } from './internal/http.ts';
import { type EmailConfig, mailOnce } from './internal/mail.ts';
import {
  type BuildOptions,
  buildMail,
  buildRequest,
  type Message,
  type Notification,
  sendsMail,
  TEST_DETAIL,
  toMessage,
} from './payloads.ts';
import type { Resolver } from './url-guard.ts';

export type { EmailConfig } from './internal/mail.ts';

/** One delivery attempt. */
export interface DeliveryRecord {
  id: string;
  /** RFC 3339 time the attempt finished. */
  at: string;
  /** The notification's id (the same on every attempt and every channel of one notification). */
  messageId: string;
  event: NotifyEvent | 'digest';
  severity: Severity;
  channelId: string;
  channelKind: ChannelKind;
  /** The receiver accepted it (a 2xx answer, or the mail server took the message). */
  accepted: boolean;
  /** A test send (`POST /admin/notify/test`). */
  test: boolean;
  /** 1 for the first attempt. */
  attempt: number;
  /** Another attempt follows this failed one. */
  willRetry: boolean;
  /** The HTTP status or SMTP reply code, when there was one. */
  status?: number;
  /** Why it failed: a code and a fixed message, never a URL, key or body. */
  error?: { code: NotifyErrorCode; message: string };
  /** The redaction-safe detail line of the notification. */
  detail: string;
}

export interface DeliverOptions extends BuildOptions {
  /** Opens the sealed URL, keys and secrets of a channel for the send. */
  secrets: SecretBox;
  /** Receives every attempt's record (the engine keeps a ring of 1000: `DeliveryHistory`). */
  record?: (rec: DeliveryRecord) => void;
  /** Mail transport for email channels and chat connectors with addresses. */
  email?: EmailConfig;
  /** DNS for the send-time URL check; default the system resolver. */
  resolver?: Resolver;
  /** Extra trusted CA certificates (PEM), added to Node's default trust. */
  ca?: string | string[];
  /** Per attempt; default 5000 ms. */
  timeoutMs?: number;
  /** Further attempts after a transient failure; default 2. */
  retries?: number;
  /** Wait before the first retry; each later wait is four times the one before. Default 1000 ms. */
  backoffMs?: number;
}

export const DELIVERY_TIMEOUT_MS = 5000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

async function attemptOnce(
  channel: StoredChannel,
  m: Message,
  options: DeliverOptions,
): Promise<number | undefined> {
  let open: ReturnType<typeof openChannel>;
  try {
    open = openChannel(channel, options.secrets);
  } catch {
    throw new AttemptFailure('ERR_NOTIFY_SECRET', 'a sealed field of the channel could not be opened', false);
  }
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  if (sendsMail(open)) {
    if (!options.email)
      throw new AttemptFailure('ERR_NOTIFY_NOT_CONFIGURED', 'no mail transport is configured', false);
    await mailOnce(options.email, buildMail(m, open.toAddresses!), timeoutMs);
    return undefined;
  }
  let req: ReturnType<typeof buildRequest>;
  try {
    req = buildRequest(open, m, options);
  } catch {
    throw new AttemptFailure('ERR_NOTIFY_NOT_CONFIGURED', 'the channel is missing a transport field', false);
  }
  const r = await postOnce(req, {
    allowPrivateTarget: channel.allowPrivateTarget,
    timeoutMs,
    resolver: options.resolver,
    ca: options.ca,
  });
  return r.status;
}

async function deliverToChannel(
  channel: StoredChannel,
  m: Message,
  options: DeliverOptions,
): Promise<DeliveryRecord[]> {
  const out: DeliveryRecord[] = [];
  const retries = Math.max(0, options.retries ?? 2);
  for (let attempt = 1; ; attempt++) {
    const base = {
      id: randomUUID(),
      messageId: m.id,
      event: m.event,
      severity: m.severity,
      channelId: channel.id,
      channelKind: channel.kind,
      test: m.test,
      attempt,
      detail: m.detail,
    };
    let rec: DeliveryRecord;
    try {
      const status = await attemptOnce(channel, m, options);
      rec = { ...base, at: new Date().toISOString(), accepted: true, willRetry: false };
      if (status !== undefined) rec.status = status;
    } catch (err) {
      const f =
        err instanceof AttemptFailure
          ? err
          : new AttemptFailure('ERR_NOTIFY_CONNECT', 'the send failed unexpectedly', false);
      const willRetry = f.transient && attempt <= retries;
      rec = {
        ...base,
        at: new Date().toISOString(),
        accepted: false,
        willRetry,
        error: { code: f.code, message: f.message },
      };
      if (f.status !== undefined) rec.status = f.status;
    }
    out.push(rec);
    try {
      options.record?.(rec);
    } catch {
      // A failing sink must not stop delivery.
    }
    if (!rec.willRetry) return out;
    await sleep((options.backoffMs ?? 1000) * 4 ** (attempt - 1));
  }
}

/**
 * Sends a resolved message to each given channel (in parallel; the caller chooses the channels,
 * normally `route(...).now`). Resolves with every attempt's record once all channels are done;
 * never rejects.
 */
export async function deliverMessage(
  m: Message,
  channels: readonly StoredChannel[],
  options: DeliverOptions,
): Promise<DeliveryRecord[]> {
  const per = await Promise.all(
    channels.map((c) => deliverToChannel(c, m, options).catch((): DeliveryRecord[] => [])),
  );
  return per.flat();
}

/** `deliverMessage` for a notification the engine raised. Never rejects. */
export async function deliver(
  n: Notification,
  channels: readonly StoredChannel[],
  options: DeliverOptions,
): Promise<DeliveryRecord[]> {
  let m: Message;
  try {
    m = toMessage(n);
  } catch {
    return [];
  }
  return deliverMessage(m, channels, options);
}

/**
 * The fixed info-severity test line to one channel (enabled or not), recorded with `test: true`.
 * No retries: the operator is waiting for the answer. Never rejects.
 */
export async function deliverTest(
  channel: StoredChannel,
  options: DeliverOptions,
): Promise<DeliveryRecord[]> {
  const m = toMessage({ event: 'notification-test', detail: TEST_DETAIL }, { test: true });
  return deliverMessage(m, [channel], { ...options, retries: 0 });
}

/** The delivery history: a ring of the newest `capacity` records (default 1000). */
export class DeliveryHistory {
  readonly capacity: number;
  #ring: DeliveryRecord[] = [];
  #next = 0;

  constructor(capacity = 1000) {
    this.capacity = capacity;
  }

  /** Adds a record (pass `history.add` as the `record` sink), dropping the oldest when full. */
  add = (rec: DeliveryRecord): void => {
    if (this.#ring.length < this.capacity) this.#ring.push(rec);
    else this.#ring[this.#next] = rec;
    this.#next = (this.#next + 1) % this.capacity;
  };

  /** Newest first. */
  list(): DeliveryRecord[] {
    const n = this.#ring.length;
    const out: DeliveryRecord[] = [];
    for (let i = 1; i <= n; i++) out.push(this.#ring[(this.#next - i + n * 2) % n]!);
    return out;
  }

  get size(): number {
    return this.#ring.length;
  }
}
