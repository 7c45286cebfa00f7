/**
 * The closed set of 23 notification events, each with its default severity, its class and the one
 * line that says when the engine raises it (docs/notifications.md "Events" is generated from the
 * same table and a test keeps the two in step).
 *
 * Classes: `problem` (something needs a person), `success` (a run, restore or drill went well: off
 * by default, batched by a digest), `approval` (dual control asks or answers), `security`
 * (credentials, keys, roles, the audit chain), `update` (the engine's own version), `test` (the
 * fixed test line; never routed by a rule).
 */

export const SEVERITIES = ['info', 'warning', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

export const EVENT_CLASSES = ['problem', 'success', 'approval', 'security', 'update', 'test'] as const;
export type EventClass = (typeof EVENT_CLASSES)[number];

export interface EventInfo {
  severity: Severity;
  class: EventClass;
  /** One line: when the engine raises it. */
  firesWhen: string;
}

export const EVENT_INFO = {
  'backup-failure': {
    severity: 'critical',
    class: 'problem',
    firesWhen: 'A run settled as `failed` (its reason is one member of the run reason list).',
  },
  'backup-parked': {
    severity: 'warning',
    class: 'problem',
    firesWhen: 'A run was parked by a throttling destination or source and waits for its `retryAt`.',
  },
  'backup-abandoned': {
    severity: 'critical',
    class: 'problem',
    firesWhen:
      'A running or parked run was abandoned (strike budget spent, give-up age passed, job deleted).',
  },
  'backup-stale': {
    severity: 'warning',
    class: 'problem',
    firesWhen: 'A job has had no `ok` run for longer than its schedule allows.',
  },
  'backup-success': {
    severity: 'info',
    class: 'success',
    firesWhen: 'A run settled as `ok`: sealed on every destination and read back verified.',
  },
  'restore-applied': {
    severity: 'info',
    class: 'success',
    firesWhen:
      'A restore apply finished; raised to `warning` when it fell short (records failed or skipped on a check).',
  },
  'restore-cancelled': {
    severity: 'warning',
    class: 'problem',
    firesWhen: 'A restore apply was cancelled; the records already written stay in place.',
  },
  'restore-approval-requested': {
    severity: 'warning',
    class: 'approval',
    firesWhen: 'A restore apply was requested and waits for an approver (dual control).',
  },
  'restore-approved': {
    severity: 'info',
    class: 'approval',
    firesWhen: 'An approver approved a requested restore apply.',
  },
  'restore-rejected': {
    severity: 'info',
    class: 'approval',
    firesWhen: 'An approver rejected a requested restore apply.',
  },
  'drill-failed': {
    severity: 'critical',
    class: 'problem',
    firesWhen: 'A restore drill could not restore the latest run into its scratch target and check it.',
  },
  'drill-passed': {
    severity: 'info',
    class: 'success',
    firesWhen: 'A restore drill restored and checked the latest run.',
  },
  'verify-failed': {
    severity: 'critical',
    class: 'problem',
    firesWhen: 'A restore verify or a read-back found an archive tampered, corrupted or incomplete.',
  },
  'audit-chain-break': {
    severity: 'critical',
    class: 'security',
    firesWhen: 'Recomputing the audit hash chain found a break (`GET /admin/audit/verify`).',
  },
  'admin-token-retired': {
    severity: 'warning',
    class: 'security',
    firesWhen: 'The break-glass admin bearer token was retired; the token path is closed.',
  },
  'break-glass-key-set': {
    severity: 'warning',
    class: 'security',
    firesWhen: 'A break-glass public key was set or replaced by a key ceremony.',
  },
  'sessions-revoked': {
    severity: 'warning',
    class: 'security',
    firesWhen: 'A session-wide sign-out revoked every console session.',
  },
  'role-changed': {
    severity: 'warning',
    class: 'security',
    firesWhen: "A member's role was granted, changed or removed (including the owner role).",
  },
  'pull-credential-minted': {
    severity: 'warning',
    class: 'security',
    firesWhen: 'An owner minted a pull credential (diagnostics, audit feed or metrics scope).',
  },
  'update-available': {
    severity: 'info',
    class: 'update',
    firesWhen: 'The signed update channel recommends a version newer than the running engine.',
  },
  'update-applied': {
    severity: 'info',
    class: 'update',
    firesWhen: 'An engine update was applied and its verification passed.',
  },
  'update-rolled-back': {
    severity: 'warning',
    class: 'update',
    firesWhen: 'An engine update was rolled back to the previous version.',
  },
  'notification-test': {
    severity: 'info',
    class: 'test',
    firesWhen:
      'An operator sent the fixed test line to one channel (`POST /admin/notify/test`); never routed.',
  },
} as const satisfies Record<string, EventInfo>;

export type NotifyEvent = keyof typeof EVENT_INFO;

/** The 23 event names, in the order of `EVENT_INFO`. */
export const NOTIFY_EVENTS = Object.keys(EVENT_INFO) as NotifyEvent[];

export function isNotifyEvent(x: unknown): x is NotifyEvent {
  return typeof x === 'string' && Object.hasOwn(EVENT_INFO, x);
}

export function isSeverity(x: unknown): x is Severity {
  return typeof x === 'string' && (SEVERITIES as readonly string[]).includes(x);
}

/** Orders severities: `info` < `warning` < `critical`. */
export function severityRank(s: Severity): number {
  return SEVERITIES.indexOf(s);
}

/**
 * Problem events a success event recovers, for channel kinds that open incidents (incident,
 * alert-api, itsm-event): the recovery is sent as a resolve of the same dedup key.
 */
export const RECOVERY: Partial<Record<NotifyEvent, { family: string; recovers: readonly NotifyEvent[] }>> = {
  'backup-success': {
    family: 'backup',
    recovers: ['backup-failure', 'backup-abandoned', 'backup-stale', 'backup-parked'],
  },
  'drill-passed': { family: 'drill', recovers: ['drill-failed'] },
};

/** The dedup family of a problem event that a later success event resolves, if any. */
export function recoveryFamilyOf(event: NotifyEvent): string | undefined {
  for (const r of Object.values(RECOVERY)) if (r?.recovers.includes(event)) return r.family;
  return undefined;
}
