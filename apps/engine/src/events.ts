/**
 * The engine's notification events (issue 17): a closed set of 23 names, a typed event, and a
 * small in-process bus (`EngineEvents`, decorated as `app.events` by plugins/core.ts) that the
 * services and routes raise into from where the engine already knows a thing happened. The bus
 * sends nothing anywhere: a subscriber (the notify room, tests) decides what to do with an event.
 *
 * `raise` never throws, never awaits a subscriber and never blocks its caller: the event is copied
 * and frozen, queued, and delivered on a later turn of the event loop (`setImmediate`), to each
 * subscriber in the order the events were raised; a subscriber that throws (or whose promise
 * rejects) is logged and the others still get the event. An event is raised only after the write
 * that makes it true succeeded (a run's fenced outcome, an apply's settled row, an audit-chain
 * read, an applied role change), so a lost lease or a refused request raises nothing.
 *
 * `detail` holds redaction-safe facts only: ids, counts, reason codes, fingerprints, subjects or
 * emails of the people involved. Never a secret, a token, a URL with credentials, or data. As a
 * second line of defence `raise` keeps only string, number, boolean and null values, caps strings
 * at 256 characters and blanks any value that looks like a credential (a URL with user-info, a
 * pull-credential secret `dps_...`, a bearer/basic authorisation value).
 *
 * | Event | Raised from | When | `jobId` | `detail` |
 * |---|---|---|---|---|
 * | `run-succeeded` | runs/lifecycle.ts `settle` | a run's `ok` outcome was written (fenced) | job | runId, records, bytes, warnings, unchanged (bool), unchangedFrom |
 * | `run-failed` | runs/lifecycle.ts `settle` | a run's `failed` outcome was written (fenced) | job | runId, reason (closed list), code, causeDigest |
 * | `run-parked` | runs/lifecycle.ts `settle` | a throttled run was parked on the retry ladder (fenced) | job | runId, retryAt, parks, code, causeDigest |
 * | `run-abandoned` | runs/lifecycle.ts `abandon` | a running/parked run was moved to `abandoned` (strike budget, give-up age, job deleted) | job | runId, reason, why |
 * | `backup-stale` | runs/scheduler.ts tick (`checkStale`) | an enabled job's latest `ok` run is older than its stale threshold; once per episode | job | thresholdSeconds, cadenceSeconds, lastOkRunId, lastOkAt, ageSeconds |
 * | `restore-applied` | restores/applies.ts settle | an apply ended `succeeded` | job | applyId, runId, planHash (16 hex), written, failed, skipped, alreadyDone, status |
 * | `restore-fell-short` | restores/applies.ts settle / catch | an apply ended `completed-with-failures`, `aborted` or `error` | job | same as above (+ failure code when known) |
 * | `restore-cancelled` | restores/applies.ts settle / `cancel` | a live apply was cancelled, or an interrupted one cancelled for good | job | same as above |
 * | `restore-approval-requested` | restores/service.ts `requestApproval` | an approval request was recorded | job | approvalId, planHash (16 hex), runId, records, requestedBy, requestedByEmail, expiresAt |
 * | `restore-approved` | restores/service.ts `approve` | an approver approved a request | job | approvalId, planHash, requestedBy, approvedBy, approvedByEmail |
 * | `restore-rejected` | restores/service.ts `reject` | a request was rejected or withdrawn | job | approvalId, planHash, requestedBy, rejectedBy, rejectedByEmail, withdrawn |
 * | `drill-passed` | drills/scheduler.ts | a drill's evidence was recorded with verdict `pass` | job | drillId, runId, trigger, records, durationMs, verdict |
 * | `drill-failed` | drills/scheduler.ts | a drill's evidence was recorded with verdict `fail` or `error` | job | drillId, runId, trigger, records, mismatched, verdict, reason |
 * | `verify-failed` | restores/service.ts `verify` (`POST /admin/restore/verify`) | a verify read the run and found a problem (`ok: false`) | job | runId, records, recordsVerified, reason |
 * | `audit-chain-break` | routes/audit (`GET /admin/audit/verify`) | recomputing the chain found a break (each verify that finds one) | null | firstBadSeq, problem, anchored |
 * | `admin-token-retired` | routes/admin/policy.ts, owner-actions.ts approve | the admin token was retired (directly, or when a queued owner action was approved) | null | by, viaOwnerAction |
 * | `break-glass-key-set` | routes/admin/setup.ts | the break-glass public key was accepted and stored | null | fingerprint, by |
 * | `sessions-ended` | routes/admin/sessions.ts | terminate-all, terminate-user, or a passkey revoke that ended its holder's sessions | null | scope (`everyone` / `subject`), subject, by, cause |
 * | `role-changed` | routes/admin/roles.ts (assign, remove, invite with a role), owner-actions.ts approve (owner grant) | a role write was applied | null | subject, from, to, by, via |
 * | `credential-minted` | routes/support/index.ts, owner-actions.ts approve | a pull credential was minted (never the secret) | null | scope, clientId, expiresAt, lifetimeSeconds, replaced, by, viaOwnerAction |
 * | `update-available`, `update-applied`, `update-rolled-back` | nowhere yet | the engine has no update feature; the names are reserved | - | - |
 *
 * Stale rule (`backup-stale`): an enabled job (not `enabled: false`) whose cadence is C seconds
 * (`cadenceSeconds`, default 86 400) is stale when its latest `ok` run finished (or, never having
 * had one, the job was created) more than max(2 * C, C + 3600) seconds ago. The scheduler's tick
 * (leased, so one replica at a time) checks every job; the first tick that finds a job stale takes
 * the latch `runs.stale.<job>` in the state store (set-if-absent, so replicas and restarts never
 * repeat it) and raises the event once. The episode ends, and the latch is removed, when the next
 * `ok` run is written, when a tick finds the job fresh again, or when the job is deleted; a paused
 * job is neither raised nor cleared.
 */

export const ENGINE_EVENT_NAMES = [
  'run-failed',
  'run-parked',
  'run-abandoned',
  'run-succeeded',
  'backup-stale',
  'restore-applied',
  'restore-fell-short',
  'restore-cancelled',
  'restore-approval-requested',
  'restore-approved',
  'restore-rejected',
  'drill-failed',
  'drill-passed',
  'verify-failed',
  'audit-chain-break',
  'admin-token-retired',
  'break-glass-key-set',
  'sessions-ended',
  'role-changed',
  'credential-minted',
  'update-available',
  'update-applied',
  'update-rolled-back',
] as const;

export type EngineEventName = (typeof ENGINE_EVENT_NAMES)[number];

/**
 * The @coffer/notify event each engine event is delivered as (docs/notifications.md "Events";
 * the package's names came first and differ for seven events). `severity` is set where the engine
 * raises the package event above its default (a restore that fell short is `restore-applied` at
 * `warning`). The package's `notification-test` has no engine event (it is the test route's own).
 */
export const NOTIFY_EVENT_OF: Readonly<
  Record<EngineEventName, { event: string; severity?: 'info' | 'warning' | 'critical' }>
> = Object.freeze({
  'run-failed': { event: 'backup-failure' },
  'run-parked': { event: 'backup-parked' },
  'run-abandoned': { event: 'backup-abandoned' },
  'run-succeeded': { event: 'backup-success' },
  'backup-stale': { event: 'backup-stale' },
  'restore-applied': { event: 'restore-applied' },
  'restore-fell-short': { event: 'restore-applied', severity: 'warning' },
  'restore-cancelled': { event: 'restore-cancelled' },
  'restore-approval-requested': { event: 'restore-approval-requested' },
  'restore-approved': { event: 'restore-approved' },
  'restore-rejected': { event: 'restore-rejected' },
  'drill-failed': { event: 'drill-failed' },
  'drill-passed': { event: 'drill-passed' },
  'verify-failed': { event: 'verify-failed' },
  'audit-chain-break': { event: 'audit-chain-break' },
  'admin-token-retired': { event: 'admin-token-retired' },
  'break-glass-key-set': { event: 'break-glass-key-set' },
  'sessions-ended': { event: 'sessions-revoked' },
  'role-changed': { event: 'role-changed' },
  'credential-minted': { event: 'pull-credential-minted' },
  'update-available': { event: 'update-available' },
  'update-applied': { event: 'update-applied' },
  'update-rolled-back': { event: 'update-rolled-back' },
});

export type EventDetailValue = string | number | boolean | null;

export interface EngineEvent {
  name: EngineEventName;
  /** ISO time. */
  at: string;
  /** The job it concerns, when it concerns one. */
  jobId: string | null;
  /** Redaction-safe facts only (ids, counts, reason codes, fingerprints): never a secret, URL with credentials, token or data. */
  detail: Record<string, EventDetailValue>;
}

export type EngineEventInput = Omit<EngineEvent, 'at'> & { at?: string };

export type EngineEventSubscriber = (e: EngineEvent) => void | Promise<void>;

/** What the bus logs with (a pino/Fastify logger fits). */
export interface EventsLogger {
  warn(obj: Record<string, unknown>, msg: string): void;
  debug?(obj: Record<string, unknown>, msg: string): void;
}

export interface EngineEventsOptions {
  log?: EventsLogger;
  now?: () => Date;
}

const NAMES: ReadonlySet<string> = new Set(ENGINE_EVENT_NAMES);
const MAX_STRING = 256;
const MAX_KEYS = 32;
/** Values that look like a credential: blanked whatever key they come under. */
const CREDENTIAL_LIKE = [
  /[a-z][a-z0-9+.-]*:\/\/[^/\s@]*@/i, // a URL with user-info
  /\bdps_[A-Za-z0-9_-]{8,}/, // a pull-credential secret
  /^\s*(bearer|basic)\s+\S+/i, // an authorisation value
];

export function isEngineEventName(x: unknown): x is EngineEventName {
  return typeof x === 'string' && NAMES.has(x);
}

/** A plan hash shortened for an event (enough to tell plans apart, not a full digest). */
export function hashPrefix(hash: string | null | undefined): string | null {
  return typeof hash === 'string' ? hash.slice(0, 16) : null;
}

function safeDetail(detail: unknown): Record<string, EventDetailValue> {
  const out: Record<string, EventDetailValue> = {};
  if (typeof detail !== 'object' || detail === null) return out;
  let n = 0;
  for (const [k, v] of Object.entries(detail)) {
    if (n >= MAX_KEYS) break;
    if (typeof v === 'string') {
      out[k] = CREDENTIAL_LIKE.some((re) => re.test(v)) ? '[redacted]' : v.slice(0, MAX_STRING);
    } else if (typeof v === 'number') out[k] = Number.isFinite(v) ? v : null;
    else if (typeof v === 'boolean' || v === null) out[k] = v;
    else continue; // objects, arrays, undefined, functions: dropped
    n++;
  }
  return out;
}

interface Queued {
  event: EngineEvent;
  to: EngineEventSubscriber[];
}

/**
 * The in-process event bus. Subscribers get the events raised after they subscribed, in order,
 * each on a later turn of the event loop; an unsubscribed one gets nothing more (not even events
 * already queued).
 */
export class EngineEvents {
  private readonly subs = new Set<EngineEventSubscriber>();
  private readonly queue: Queued[] = [];
  private scheduled = false;
  private readonly o: EngineEventsOptions;

  constructor(options: EngineEventsOptions = {}) {
    this.o = options;
  }

  /** Raises an event: copied, checked, queued; returns at once. Never throws. */
  raise(e: EngineEventInput): void {
    try {
      if (!isEngineEventName(e?.name)) {
        this.o.log?.warn(
          { event: 'engine-event-refused', name: String(e?.name) },
          'unknown engine event name',
        );
        return;
      }
      const at =
        typeof e.at === 'string' && !Number.isNaN(Date.parse(e.at))
          ? e.at
          : (this.o.now?.() ?? new Date()).toISOString();
      const event: EngineEvent = Object.freeze({
        name: e.name,
        at,
        jobId: typeof e.jobId === 'string' ? e.jobId.slice(0, MAX_STRING) : null,
        detail: Object.freeze(safeDetail(e.detail)),
      });
      this.o.log?.debug?.({ event: 'engine-event', name: event.name, job: event.jobId }, 'engine event');
      if (this.subs.size === 0) return;
      this.queue.push({ event, to: [...this.subs] });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.drain());
      }
    } catch {
      // raise never throws: a broken event is dropped, the caller goes on
    }
  }

  /** Subscribes `fn` to every event raised from now on; returns the unsubscribe function. */
  subscribe(fn: EngineEventSubscriber): () => void {
    this.subs.add(fn);
    return () => {
      this.subs.delete(fn);
    };
  }

  /** Number of subscribers (for the notify wiring and tests). */
  get subscribers(): number {
    return this.subs.size;
  }

  private drain(): void {
    this.scheduled = false;
    // Events raised by a subscriber while draining are queued behind the current ones.
    const batch = this.queue.splice(0, this.queue.length);
    for (const { event, to } of batch) {
      for (const fn of to) {
        if (!this.subs.has(fn)) continue;
        try {
          const r = fn(event);
          if (r && typeof (r as Promise<void>).then === 'function')
            (r as Promise<void>).then(undefined, (err) => this.failed(event, err));
        } catch (err) {
          this.failed(event, err);
        }
      }
    }
  }

  private failed(event: EngineEvent, err: unknown): void {
    try {
      this.o.log?.warn(
        {
          event: 'engine-event-subscriber-failed',
          name: event.name,
          code: (err as { code?: unknown } | null)?.code ?? null,
        },
        'an engine event subscriber failed; the others still got the event',
      );
    } catch {
      // a broken logger is not the caller's problem either
    }
  }
}
