/**
 * @coffer/notify's channels, rules, digest queue and delivery records over the engine's state
 * store: channels and rules in `state.notifications` (the channel's transport fields, secrets
 * already sealed, in `config`), digest entries as settings under `notify.digest.` (so a restart or
 * another replica sends what fell due), delivery records in the store's ring of 1000.
 */
import type { DeliveryRecord, DigestEntry, DigestStore, Rule, StoredChannel } from '@coffer/notify';
import type { NotificationChannel, State } from '@coffer/state';

const DIGEST_PREFIX = 'notify.digest.';

export function channelFromState(c: NotificationChannel): StoredChannel {
  const config = c.config as Omit<StoredChannel, 'id' | 'name' | 'kind' | 'enabled'>;
  return { ...config, id: c.id, name: c.name, kind: c.kind as StoredChannel['kind'], enabled: c.enabled };
}

export function channelToState(c: StoredChannel): Omit<NotificationChannel, 'updatedAt'> {
  const { id, name, kind, enabled, ...config } = c;
  return { id, name, kind, enabled, config: config as Record<string, unknown> };
}

export function ruleFromState(r: { id: string; rule: Record<string, unknown> }): Rule {
  return { ...(r.rule as unknown as Omit<Rule, 'id'>), id: r.id };
}

export function ruleToState(r: Rule): { id: string; scope: string; rule: Record<string, unknown> } {
  const { id, ...rule } = r;
  return {
    id,
    scope: r.scope === 'global' ? 'global' : r.scope.job,
    rule: rule as unknown as Record<string, unknown>,
  };
}

export async function loadNotifyConfig(state: State): Promise<{ channels: StoredChannel[]; rules: Rule[] }> {
  const [channels, rules] = await Promise.all([
    state.notifications.listChannels(),
    state.notifications.listRules(),
  ]);
  return { channels: channels.map(channelFromState), rules: rules.map(ruleFromState) };
}

/** Digest entries kept as settings, keyed by due time so `takeDue` reads only what is due. */
export function stateDigestStore(state: State): DigestStore {
  return {
    async add(entry: DigestEntry) {
      const key = `${DIGEST_PREFIX}${new Date(entry.dueAt).toISOString()}.${crypto.randomUUID()}`;
      await state.settings.set(key, entry);
    },
    async takeDue(now: Date) {
      const due: DigestEntry[] = [];
      for (const row of await state.settings.list(DIGEST_PREFIX)) {
        const entry = row.value as DigestEntry;
        if (new Date(entry.dueAt).getTime() > now.getTime()) continue;
        // Only the process that removes it sends it: two replicas never send one entry twice.
        if (await state.settings.delete(row.key)) due.push(entry);
      }
      return due;
    },
  };
}

/** The store's delivery row for one attempt (the record's redaction-safe fields only). */
export function deliveryRow(rec: DeliveryRecord) {
  const outcome = rec.accepted
    ? `accepted${rec.status === undefined ? '' : ` (${rec.status})`}`
    : `${rec.error?.code ?? 'failed'}${rec.status === undefined ? '' : ` (${rec.status})`}${rec.willRetry ? ', will retry' : ''}`;
  return {
    at: rec.at,
    event: rec.event,
    severity: rec.severity,
    channelKind: rec.channelKind,
    channelId: rec.channelId,
    detail: `attempt ${rec.attempt}: ${outcome}; ${rec.detail}`.slice(0, 500),
    accepted: rec.accepted,
    test: rec.test,
  };
}
