/**
 * The engine's notifications (docs/notifications.md): @coffer/notify's notifier over the state
 * store, subscribed to the engine's event bus (`app.events`). A raised event is routed and sent in
 * the background: delivery never blocks or fails the run, restore or route that raised it (the bus
 * calls subscribers after the raise returns; `notify` never rejects). Secrets of channels are sealed
 * by `notifySecretBox` under the operational key; each attempt becomes a row of the store's ring.
 */
import {
  createNotifier,
  type DeliveryRecord,
  type Notification,
  type Notifier,
  type NotifyEvent,
  type SecretBox,
  type StoredChannel,
} from '@coffer/notify';
import type { State } from '@coffer/state';
import type { FastifyBaseLogger } from 'fastify';
import type { EngineConfig } from '../config.ts';
import { type EngineEvent, type EngineEvents, NOTIFY_EVENT_OF } from '../events.ts';
import { SERVICE_NAME } from '../version.ts';
import { notifySecretBox } from './secret-box.ts';
import { deliveryRow, loadNotifyConfig, stateDigestStore } from './store.ts';

export interface NotifyServiceOptions {
  state: State;
  config: EngineConfig;
  operationalSecretKey: Uint8Array;
  log: FastifyBaseLogger;
  /** How long one attempt may take (default 5 s, the package's). Tests only. */
  timeoutMs?: number;
  /** Wait before the first retry (default 1 s). Tests only. */
  backoffMs?: number;
}

/** One line of words for an event's detail (ids, counts and reason codes only). */
export function detailLine(e: EngineEvent): string {
  const d = e.detail;
  const pairs = Object.entries(d)
    .filter(([, v]) => v !== null && v !== '')
    .map(([k, v]) => `${k} ${v}`);
  const what = e.name.replaceAll('-', ' ');
  return `${what}${e.jobId ? ` (job ${e.jobId})` : ''}${pairs.length ? `: ${pairs.join(', ')}` : ''}`.slice(
    0,
    400,
  );
}

export class NotifyService {
  readonly secrets: SecretBox;
  readonly notifier: Notifier;
  private readonly o: NotifyServiceOptions;
  private unsubscribe: (() => void) | null = null;
  /** Notifications in flight (awaited on stop, so a shutdown does not cut a send midway). */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(options: NotifyServiceOptions) {
    this.o = options;
    this.secrets = notifySecretBox(options.operationalSecretKey);
    const { state, config, log } = options;
    const mail = config.mail;
    this.notifier = createNotifier({
      load: () => loadNotifyConfig(state),
      digestStore: stateDigestStore(state),
      secrets: this.secrets,
      record: (rec: DeliveryRecord) => {
        state.notifications
          .recordDelivery(deliveryRow(rec))
          .catch(() => log.warn({ event: 'notify-record-failed' }, 'a delivery record could not be stored'));
        if (!rec.accepted)
          log.warn(
            {
              event: 'notify-delivery-failed',
              channel: rec.channelId,
              kind: rec.channelKind,
              code: rec.error?.code,
              status: rec.status,
              willRetry: rec.willRetry,
            },
            'a notification was not accepted',
          );
      },
      ...(mail
        ? {
            email: {
              transport: (() => {
                const u = new URL(mail.url);
                return {
                  host: u.hostname,
                  port: Number(u.port || (u.protocol === 'smtps:' ? 465 : 587)),
                  secure: u.protocol === 'smtps:',
                  ...(mail.username === undefined
                    ? {}
                    : { auth: { user: mail.username, pass: mail.password ?? '' } }),
                };
              })(),
              from: mail.from,
            },
          }
        : {}),
      ...(config.notify.ca ? { ca: config.notify.ca } : {}),
      ...(config.notify.incidentUrl ? { incidentUrl: config.notify.incidentUrl } : {}),
      source: SERVICE_NAME,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.backoffMs === undefined ? {} : { backoffMs: options.backoffMs }),
    });
  }

  /** Routes one engine event (the bus's subscriber). Never throws. */
  handle(e: EngineEvent): Promise<void> {
    const p = this.send(e).then(
      () => undefined,
      () => undefined,
    );
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
    return p;
  }

  private async send(e: EngineEvent): Promise<void> {
    const mapped = NOTIFY_EVENT_OF[e.name];
    // The job's display name for the message (best effort: a store read failing sends without it).
    const job = e.jobId ? await this.o.state.jobs.get(e.jobId).catch(() => null) : null;
    const jobName = (job?.config as { name?: unknown } | undefined)?.name;
    const n: Notification = {
      event: mapped.event as NotifyEvent,
      ...(mapped.severity ? { severity: mapped.severity } : {}),
      ...(e.jobId ? { jobId: e.jobId } : {}),
      ...(typeof jobName === 'string' && jobName !== '' ? { jobName } : {}),
      ...(typeof e.detail.runId === 'string' ? { runId: e.detail.runId } : {}),
      detail: detailLine(e),
      at: e.at,
    };
    await this.notifier.notify(n);
  }

  async test(channel: StoredChannel): Promise<DeliveryRecord[]> {
    return this.notifier.test(channel);
  }

  async testEmail(to: string): Promise<DeliveryRecord[]> {
    return this.notifier.testEmail(to);
  }

  start(events: EngineEvents): void {
    this.unsubscribe = events.subscribe((e) => this.handle(e));
    this.notifier.start();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.notifier.stop();
    await Promise.allSettled([...this.inFlight]);
  }
}
