/**
 * The notifier the engine keeps: routing, delivery and digests over the engine's own stored
 * channels and rules (read through `load` on every event, so a write is seen at once). `notify`
 * never rejects and is meant to be called without awaiting it on a run's path.
 */
import { normaliseAddresses, type StoredChannel } from './channels.ts';
import { type DeliverOptions, type DeliveryRecord, deliverMessage, deliverTest } from './deliver.ts';
import { DigestScheduler, type DigestSchedules, type DigestStore } from './digest.ts';
import { EVENT_INFO } from './events.ts';
import { digestMessage, type Notification, toMessage } from './payloads.ts';
import { type RouteResult, type Rule, route } from './rules.ts';

export interface NotifierConfig {
  channels: readonly StoredChannel[];
  rules: readonly Rule[];
}

export interface NotifierOptions extends DeliverOptions {
  /** The current channels and rules (the engine's state store). */
  load: () => NotifierConfig | Promise<NotifierConfig>;
  digestStore: DigestStore;
  schedules?: Partial<DigestSchedules>;
  now?: () => Date;
}

export interface NotifyOutcome extends RouteResult {
  records: DeliveryRecord[];
}

export interface Notifier {
  /** Routes, sends now, queues digests. Never rejects (a load failure routes nowhere). */
  notify(n: Notification): Promise<NotifyOutcome>;
  /** The fixed test line to one channel, recorded as a test. Never rejects. */
  test(channel: StoredChannel): Promise<DeliveryRecord[]>;
  /** The fixed test line by mail to one address (`POST /admin/email/test`). Never rejects. */
  testEmail(to: string): Promise<DeliveryRecord[]>;
  /** Sends digests that are due (also run by the schedule). */
  flushDigests(now?: Date): Promise<number>;
  /** Starts the digest schedule (and sends digests that fell due while stopped). */
  start(): void;
  stop(): void;
}

export function createNotifier(options: NotifierOptions): Notifier {
  const scheduler = new DigestScheduler({
    store: options.digestStore,
    schedules: options.schedules,
    now: options.now,
    send: async (channelId, cadence, lines) => {
      const { channels } = await options.load();
      const channel = channels.find((c) => c.id === channelId && c.enabled);
      if (!channel) return; // deleted or disabled since: the digest goes nowhere
      await deliverMessage(digestMessage(cadence, lines, options.now?.()), [channel], options);
    },
  });
  return {
    async notify(n) {
      const empty: NotifyOutcome = { now: [], digest: [], nowhere: [], records: [] };
      try {
        if (!Object.hasOwn(EVENT_INFO, n.event) || n.event === 'notification-test') return empty;
        const { channels, rules } = await options.load();
        const r = route(n.event, { jobId: n.jobId, severity: n.severity }, rules, channels);
        const m = toMessage(n);
        const targets = r.now.map((id) => channels.find((c) => c.id === id)!).filter(Boolean);
        const [records] = await Promise.all([
          deliverMessage(m, targets, options),
          ...r.digest.map((d) => scheduler.add(d.channelId, d.cadence, n).catch(() => undefined)),
        ]);
        return { ...r, records };
      } catch {
        return empty;
      }
    },
    test: (channel) => deliverTest(channel, options),
    async testEmail(to) {
      let toAddresses: string[];
      try {
        toAddresses = normaliseAddresses([to], 'to');
      } catch {
        return [];
      }
      const channel: StoredChannel = {
        id: 'email-test',
        name: 'email test',
        kind: 'email',
        enabled: true,
        allowPrivateTarget: false,
        toAddresses,
      };
      return deliverTest(channel, options);
    },
    flushDigests: (now) => scheduler.flushDue(now),
    start: () => scheduler.start(),
    stop: () => scheduler.stop(),
  };
}
