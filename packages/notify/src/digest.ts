/**
 * Digests: the success-class stream batched per channel and sent on a schedule (`digest: daily`
 * or `weekly` on a rule). Each entry is stored with the time it is due (the next firing of its
 * cadence's cron pattern after it was added), so the schedule survives a restart: a new scheduler
 * over the same store sends whatever fell due while the engine was down as soon as it starts, then
 * follows the cron patterns (croner). All state is in the injected store; one summary message per
 * channel per flush.
 */
import { Cron } from 'croner';
import type { NotifyEvent, Severity } from './events.ts';
import { type DigestLine, type Notification, toMessage } from './payloads.ts';

export type Cadence = 'daily' | 'weekly';

export interface DigestEntry extends DigestLine {
  channelId: string;
  cadence: Cadence;
  /** RFC 3339: the flush that sends it. */
  dueAt: string;
}

/** Where pending digest entries live (the engine's state store). */
export interface DigestStore {
  add(entry: DigestEntry): Promise<void> | void;
  /** Removes and returns every entry whose `dueAt` is at or before `now`. */
  takeDue(now: Date): Promise<DigestEntry[]> | DigestEntry[];
}

/** An in-memory store (tests, single-process use). */
export class MemoryDigestStore implements DigestStore {
  entries: DigestEntry[] = [];
  add(entry: DigestEntry): void {
    this.entries.push(entry);
  }
  takeDue(now: Date): DigestEntry[] {
    const due = this.entries.filter((e) => Date.parse(e.dueAt) <= now.getTime());
    this.entries = this.entries.filter((e) => Date.parse(e.dueAt) > now.getTime());
    return due;
  }
}

export interface DigestSchedules {
  /** Cron pattern of the daily flush; default `0 8 * * *` (08:00). */
  daily: string;
  /** Cron pattern of the weekly flush; default `0 8 * * 1` (Monday 08:00). */
  weekly: string;
  /** IANA time zone of the patterns; default `UTC`. */
  timezone: string;
}

export const DEFAULT_DIGEST_SCHEDULES: DigestSchedules = {
  daily: '0 8 * * *',
  weekly: '0 8 * * 1',
  timezone: 'UTC',
};

export interface DigestSchedulerOptions {
  store: DigestStore;
  /** Sends one channel's summary (normally `deliverMessage(digestMessage(...), [channel], ...)`). */
  send: (channelId: string, cadence: Cadence, lines: DigestLine[]) => Promise<unknown>;
  schedules?: Partial<DigestSchedules>;
  now?: () => Date;
}

export class DigestScheduler {
  readonly #store: DigestStore;
  readonly #send: DigestSchedulerOptions['send'];
  readonly #schedules: DigestSchedules;
  readonly #now: () => Date;
  readonly #patterns: Record<Cadence, Cron>;
  #jobs: Cron[] = [];

  constructor(options: DigestSchedulerOptions) {
    this.#store = options.store;
    this.#send = options.send;
    this.#schedules = { ...DEFAULT_DIGEST_SCHEDULES, ...options.schedules };
    this.#now = options.now ?? (() => new Date());
    const tz = { timezone: this.#schedules.timezone, paused: true };
    // Paused patterns, only for computing due times (they throw on a malformed pattern).
    this.#patterns = {
      daily: new Cron(this.#schedules.daily, tz),
      weekly: new Cron(this.#schedules.weekly, tz),
    };
  }

  /** The flush time of `cadence` that follows `after`. */
  nextDue(cadence: Cadence, after: Date): Date {
    const next = this.#patterns[cadence].nextRun(after);
    if (!next) throw new Error('the digest schedule has no next run');
    return next;
  }

  /** Adds a notification to a channel's digest; resolves with its due time. */
  async add(channelId: string, cadence: Cadence, n: Notification): Promise<Date> {
    const m = toMessage(n);
    const dueAt = this.nextDue(cadence, this.#now());
    const entry: DigestEntry = {
      channelId,
      cadence,
      dueAt: dueAt.toISOString(),
      event: m.event as NotifyEvent,
      severity: m.severity as Severity,
      detail: m.detail,
      at: m.at,
    };
    if (m.jobId !== undefined) entry.jobId = m.jobId;
    if (m.jobName !== undefined) entry.jobName = m.jobName;
    await this.#store.add(entry);
    return dueAt;
  }

  /**
   * Takes every entry due at `now` (default the clock, plus one second of slack for a timer that
   * fires early) and sends one summary per channel, oldest line first. Resolves with the number of
   * summaries sent; never rejects (a failed send is the delivery's record, not an exception).
   */
  async flushDue(now?: Date): Promise<number> {
    let due: DigestEntry[];
    try {
      due = await this.#store.takeDue(now ?? new Date(this.#now().getTime() + 1000));
    } catch {
      return 0;
    }
    const byChannel = new Map<string, DigestEntry[]>();
    for (const e of due) byChannel.set(e.channelId, [...(byChannel.get(e.channelId) ?? []), e]);
    await Promise.all(
      [...byChannel].map(async ([channelId, entries]) => {
        entries.sort((a, b) => a.at.localeCompare(b.at));
        const cadence: Cadence = entries.some((e) => e.cadence === 'weekly') ? 'weekly' : 'daily';
        const lines: DigestLine[] = entries.map(({ channelId: _c, cadence: _k, dueAt: _d, ...line }) => line);
        try {
          await this.#send(channelId, cadence, lines);
        } catch {
          // never rejects
        }
      }),
    );
    return byChannel.size;
  }

  /** Sends what fell due while stopped, then flushes on each cron firing. */
  start(): void {
    if (this.#jobs.length > 0) return;
    void this.flushDue();
    const opts = { timezone: this.#schedules.timezone, unref: true, protect: true };
    for (const cadence of ['daily', 'weekly'] as const)
      this.#jobs.push(
        new Cron(this.#schedules[cadence], opts, async () => {
          await this.flushDue();
        }),
      );
  }

  stop(): void {
    for (const j of this.#jobs) j.stop();
    this.#jobs = [];
  }
}
