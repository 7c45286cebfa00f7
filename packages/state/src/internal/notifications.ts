/** Notification channels, rules and the delivery ring (capped at 1000 entries). Minimal storage only. */
import type {
  NotificationChannel,
  NotificationDelivery,
  NotificationRule,
  NotificationsRepository,
} from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num } from './db.ts';
import { checkId, isPlainObject, parseStored, toStored } from './json.ts';
import { bumpCounter } from './runs.ts';
import type {
  NotificationChannelsTable,
  NotificationDeliveriesTable,
  NotificationRulesTable,
} from './schema.ts';

const DELIVERY_RING = 1000;

function toChannel(r: NotificationChannelsTable): NotificationChannel {
  return {
    id: r.id,
    kind: r.kind,
    name: r.name,
    enabled: r.enabled !== 0,
    config: parseStored<Record<string, unknown>>(r.config, 'channel config'),
    updatedAt: r.updated_at,
  };
}

function toRule(r: NotificationRulesTable): NotificationRule {
  return {
    id: r.id,
    scope: r.scope,
    rule: parseStored<Record<string, unknown>>(r.rule, 'rule'),
    updatedAt: r.updated_at,
  };
}

function toDelivery(r: NotificationDeliveriesTable): NotificationDelivery {
  return {
    seq: num(r.seq),
    at: r.at,
    event: r.event,
    severity: r.severity,
    channelKind: r.channel_kind,
    channelId: r.channel_id,
    detail: r.detail,
    accepted: r.accepted !== 0,
    test: r.test !== 0,
  };
}

function checkObject(v: unknown, what: string): Record<string, unknown> {
  if (!isPlainObject(v)) throw new StateError('ERR_STATE_INVALID', `${what} must be an object`);
  return v;
}

export function notificationsRepository(db: Db): NotificationsRepository {
  return {
    async listChannels() {
      const rows = await db.read('listing channels', (k) =>
        k.selectFrom('notification_channels').selectAll().orderBy('id').execute(),
      );
      return rows.map(toChannel);
    },
    async getChannel(id) {
      const row = await db.read('reading a channel', (k) =>
        k.selectFrom('notification_channels').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? toChannel(row) : null;
    },
    async putChannel(c) {
      const row: NotificationChannelsTable = {
        id: checkId(c.id, 'channel id'),
        kind: checkId(c.kind, 'channel kind'),
        name: String(c.name ?? ''),
        enabled: c.enabled ? 1 : 0,
        config: toStored(checkObject(c.config, 'channel config'), 'channel config'),
        updated_at: db.nowIso(),
      };
      const { id: _id, ...rest } = row;
      await db.write('saving a channel', (trx) =>
        trx
          .insertInto('notification_channels')
          .values(row)
          .onConflict((oc) => oc.column('id').doUpdateSet(rest))
          .execute(),
      );
      return toChannel(row);
    },
    async deleteChannel(id) {
      const r = await db.write('deleting a channel', (trx) =>
        trx.deleteFrom('notification_channels').where('id', '=', id).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
    async listRules() {
      const rows = await db.read('listing rules', (k) =>
        k.selectFrom('notification_rules').selectAll().orderBy('id').execute(),
      );
      return rows.map(toRule);
    },
    async putRule(r) {
      const row: NotificationRulesTable = {
        id: checkId(r.id, 'rule id'),
        scope: checkId(r.scope, 'rule scope'),
        rule: toStored(checkObject(r.rule, 'rule'), 'rule'),
        updated_at: db.nowIso(),
      };
      const { id: _id, ...rest } = row;
      await db.write('saving a rule', (trx) =>
        trx
          .insertInto('notification_rules')
          .values(row)
          .onConflict((oc) => oc.column('id').doUpdateSet(rest))
          .execute(),
      );
      return toRule(row);
    },
    async deleteRule(id) {
      const r = await db.write('deleting a rule', (trx) =>
        trx.deleteFrom('notification_rules').where('id', '=', id).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
    async recordDelivery(d) {
      return db.write(
        'recording a delivery',
        async (trx) => {
          const seq = await bumpCounter(trx, 'notifications.delivery', 1);
          const row: NotificationDeliveriesTable = {
            seq,
            at: d.at ?? db.nowIso(),
            event: String(d.event),
            severity: String(d.severity),
            channel_kind: String(d.channelKind),
            channel_id: d.channelId ?? null,
            detail: String(d.detail),
            accepted: d.accepted ? 1 : 0,
            test: d.test ? 1 : 0,
          };
          await trx.insertInto('notification_deliveries').values(row).execute();
          await trx
            .deleteFrom('notification_deliveries')
            .where('seq', '<=', seq - DELIVERY_RING)
            .execute();
          return toDelivery(row);
        },
        ['notifications:ring'],
      );
    },
    async listDeliveries(limit = DELIVERY_RING) {
      const n = Math.max(1, Math.min(Math.floor(limit), DELIVERY_RING));
      const rows = await db.read('listing deliveries', (k) =>
        k.selectFrom('notification_deliveries').selectAll().orderBy('seq', 'desc').limit(n).execute(),
      );
      return rows.map(toDelivery);
    },
  };
}
