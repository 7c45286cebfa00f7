/**
 * Rules and routing (specification "Notification channel, rule and delivery record" and "Events /
 * Notifications"). `route` is pure: given an event, its job and severity, the rules and the
 * channels, it returns the channels to send to now, the channels whose digest takes it, and the
 * rules that would have delivered it but reach no channel.
 *
 * The routing algorithm, in order:
 * 1. A rule *selects* an event when its scope covers the event's job (`global`, or `{ job }` equal
 *    to the event's job) and its `events` covers the event: a listed event always; `all` covers
 *    every event except the success class (success events are off by default) and `notification-test`,
 *    and covers a success-class event when the rule has a digest or the event was raised to warning
 *    or above.
 * 2. If any per-job rule selects the event for its job, the global rules are set aside for this
 *    event on this job (the per-job rules win, even when their `minSeverity` then filters it out).
 * 3. Of the winning rules, those whose `minSeverity` the event's severity reaches deliver.
 * 4. A delivering rule's channels: a deleted or disabled channel id is skipped; a rule left with no
 *    reachable channel is reported in `nowhere`.
 * 5. A success-class event at `info` under a rule with a digest goes to that channel's digest;
 *    everything else (problem events, and a success event raised to warning) is sent now.
 * 6. Channels are deduplicated across the winning rules: a channel that is sent now is in no
 *    digest; a channel digested both daily and weekly is digested daily.
 * 7. A success event that recovers a problem (`backup-success` for the backup failures,
 *    `drill-passed` for `drill-failed`) is also sent now to the incident, alert-API and IT-event
 *    channels that would have been sent that problem for the job, so their incident is resolved.
 */
import { randomBytes } from 'node:crypto';
import type { StoredChannel } from './channels.ts';
import { NotifyError } from './errors.ts';
import {
  EVENT_INFO,
  isNotifyEvent,
  isSeverity,
  type NotifyEvent,
  RECOVERY,
  type Severity,
  severityRank,
} from './events.ts';
import { opensIncidents } from './payloads.ts';

export type Digest = 'off' | 'daily' | 'weekly';
export const DIGESTS: readonly Digest[] = ['off', 'daily', 'weekly'];

export interface Rule {
  id: string;
  scope: 'global' | { job: string };
  minSeverity: Severity;
  events: 'all' | NotifyEvent[];
  channelIds: string[];
  digest: Digest;
}

export interface RouteContext {
  jobId?: string;
  /** The event's severity when raised above (or below) its default. */
  severity?: Severity;
}

export interface RouteResult {
  /** Channel ids to send to now (deduplicated, in rule order). */
  now: string[];
  /** Channel ids whose digest takes the event, with the digest's cadence. */
  digest: { channelId: string; cadence: 'daily' | 'weekly' }[];
  /** Ids of rules that would deliver the event but reach no existing, enabled channel. */
  nowhere: string[];
}

function bad(field: string, message: string): never {
  throw new NotifyError('ERR_NOTIFY_INVALID_RULE', message, { field });
}

export interface NormaliseRuleOptions {
  /** The rule this input updates (its id is kept). */
  previous?: Rule;
  /** When given, every channel id must be one of these. */
  channelIds?: readonly string[];
  /** When given, a per-job scope must name one of these jobs. */
  jobIds?: readonly string[];
  newId?: () => string;
}

/**
 * Validates a rule input and returns the rule to store (defaults: `minSeverity` `info`, `digest`
 * `off`). Throws `ERR_NOTIFY_INVALID_RULE` (with `field`) or `ERR_NOTIFY_UNKNOWN_EVENT`.
 */
export function normaliseRule(input: unknown, options: NormaliseRuleOptions = {}): Rule {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) bad('', 'a rule is an object');
  const i = { ...options.previous, ...(input as Record<string, unknown>) } as Record<string, unknown>;
  const id =
    options.previous?.id ??
    i.id ??
    (options.newId ?? (() => `rule_${randomBytes(12).toString('base64url')}`))();
  if (typeof id !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(id))
    bad('id', 'id must be 1 to 64 of A-Z a-z 0-9 _ -');

  let scope: Rule['scope'];
  const s = i.scope ?? 'global';
  if (s === 'global') scope = 'global';
  else if (
    typeof s === 'object' &&
    s !== null &&
    typeof (s as { job?: unknown }).job === 'string' &&
    /^[A-Za-z0-9._:-]{1,128}$/.test((s as { job: string }).job)
  ) {
    scope = { job: (s as { job: string }).job };
    if (options.jobIds && !options.jobIds.includes(scope.job)) bad('scope', 'scope names no existing job');
  } else bad('scope', "scope is 'global' or { job: <job id> }");

  const minSeverity = i.minSeverity ?? 'info';
  if (!isSeverity(minSeverity)) bad('minSeverity', 'minSeverity is info, warning or critical');

  let events: Rule['events'];
  if (i.events === undefined || i.events === 'all') events = 'all';
  else if (Array.isArray(i.events) && i.events.length > 0) {
    const list: NotifyEvent[] = [];
    for (const e of i.events) {
      if (!isNotifyEvent(e))
        throw new NotifyError('ERR_NOTIFY_UNKNOWN_EVENT', 'events names an unknown event', {
          field: 'events',
        });
      if (e === 'notification-test') bad('events', 'notification-test is never routed by a rule');
      if (!list.includes(e)) list.push(e);
    }
    events = list;
  } else bad('events', "events is 'all' or a non-empty list of event names");

  const ids = i.channelIds;
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > 50)
    bad('channelIds', 'channelIds lists 1 to 50 ids');
  const channelIds: string[] = [];
  for (const c of ids) {
    if (typeof c !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(c))
      bad('channelIds', 'channelIds holds channel ids');
    if (options.channelIds && !options.channelIds.includes(c))
      bad('channelIds', 'channelIds names no existing channel');
    if (!channelIds.includes(c)) channelIds.push(c);
  }

  const digest = i.digest ?? 'off';
  if (typeof digest !== 'string' || !(DIGESTS as readonly string[]).includes(digest))
    bad('digest', 'digest is off, daily or weekly');
  return { id, scope, minSeverity, events, channelIds, digest: digest as Digest };
}

function selects(rule: Rule, event: NotifyEvent, severity: Severity, jobId: string | undefined): boolean {
  if (rule.scope !== 'global' && rule.scope.job !== jobId) return false;
  if (event === 'notification-test') return false;
  if (rule.events !== 'all') return rule.events.includes(event);
  if (EVENT_INFO[event].class !== 'success') return true;
  return rule.digest !== 'off' || severityRank(severity) >= severityRank('warning');
}

/** The winning rules for an event (steps 1 to 3). */
function winning(
  rules: readonly Rule[],
  event: NotifyEvent,
  severity: Severity,
  jobId: string | undefined,
): Rule[] {
  const selecting = rules.filter((r) => selects(r, event, severity, jobId));
  const perJob = selecting.filter((r) => r.scope !== 'global');
  const won = perJob.length > 0 ? perJob : selecting;
  return won.filter((r) => severityRank(severity) >= severityRank(r.minSeverity));
}

/** Routes one event (see the module comment for the algorithm). Pure; never throws. */
export function route(
  event: NotifyEvent,
  context: RouteContext,
  rules: readonly Rule[],
  channels: readonly StoredChannel[],
): RouteResult {
  const severity = context.severity ?? EVENT_INFO[event].severity;
  const byId = new Map(channels.filter((c) => c.enabled).map((c) => [c.id, c]));
  const now: string[] = [];
  const digest = new Map<string, 'daily' | 'weekly'>();
  const nowhere: string[] = [];
  const digestible =
    EVENT_INFO[event].class === 'success' && severityRank(severity) < severityRank('warning');
  for (const rule of winning(rules, event, severity, context.jobId)) {
    const reachable = rule.channelIds.filter((id) => byId.has(id));
    if (reachable.length === 0) {
      nowhere.push(rule.id);
      continue;
    }
    for (const id of reachable) {
      if (digestible && rule.digest !== 'off') {
        if (digest.get(id) !== 'daily') digest.set(id, rule.digest);
      } else if (!now.includes(id)) now.push(id);
    }
  }
  // Step 7: resolves to the incident-style channels that would have been sent the problem.
  const recovery = RECOVERY[event];
  if (recovery) {
    for (const problem of recovery.recovers) {
      for (const rule of winning(rules, problem, EVENT_INFO[problem].severity, context.jobId)) {
        for (const id of rule.channelIds) {
          const c = byId.get(id);
          if (c && opensIncidents(c.kind) && !now.includes(id)) now.push(id);
        }
      }
    }
  }
  for (const id of now) digest.delete(id);
  return { now, digest: [...digest].map(([channelId, cadence]) => ({ channelId, cadence })), nowhere };
}

/**
 * Rules that reach no existing, enabled channel at all (for the rules read: "delivering nowhere").
 */
export function rulesDeliveringNowhere(rules: readonly Rule[], channels: readonly StoredChannel[]): string[] {
  const live = new Set(channels.filter((c) => c.enabled).map((c) => c.id));
  return rules.filter((r) => !r.channelIds.some((id) => live.has(id))).map((r) => r.id);
}

/**
 * The rules to create when a channel is added: with no rule and no other channel, the global
 * `backup-failure` (critical) and `backup-stale` (warning) rules on the new channel; otherwise none.
 */
export function rulesForFirstChannel(
  channelId: string,
  existing: { rules: readonly Rule[]; channels: readonly { id: string }[] },
): Rule[] {
  if (existing.rules.length > 0 || existing.channels.some((c) => c.id !== channelId)) return [];
  return [
    {
      id: 'rule_backup-failure',
      scope: 'global',
      minSeverity: 'critical',
      events: ['backup-failure'],
      channelIds: [channelId],
      digest: 'off',
    },
    {
      id: 'rule_backup-stale',
      scope: 'global',
      minSeverity: 'warning',
      events: ['backup-stale'],
      channelIds: [channelId],
      digest: 'off',
    },
  ];
}
