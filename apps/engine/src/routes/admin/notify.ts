/**
 * Notification routes (docs/notifications.md "Routes"; the specification shows
 * `GET /admin/notify/channels` and `POST /admin/notify/test` and leaves the writes "not shown"):
 *
 * - `GET /admin/notify/channels` (`notify.config`): channels in their read shape (write-only
 *   fields as `{ set: true }`, a URL as its origin), the rules, and the rules delivering nowhere.
 * - `POST /admin/notify/channels`, `/channels/update`, `/channels/delete` and the same three for
 *   `rules` (`notify.config`, step-up): validated by @coffer/notify (foreign fields dropped, URLs
 *   checked by the URL guard, secrets sealed before the store sees them). The first channel added
 *   with no rule gets the global `backup-failure` and `backup-stale` rules. `allowPrivateTarget`
 *   (a receiver on a private, loopback or link-local address) is an owner's decision only: another
 *   role setting it, or changing the URL of a channel that has it, is 403 `required: owner`. Audited as `notify-channel-change` /
 *   `notify-rule-change` (applied, and refused for lack of `notify.config`), with the channel's id,
 *   name, kind and enabled flag only, never a URL, key or credential; deleting an id that does not
 *   exist writes no row.
 * - `GET /admin/notify/history` (`notify.config`): the delivery ring, newest first.
 * - `POST /admin/notify/test` `{ channelId }` (`notify.config`): the fixed info-severity test line
 *   to that channel, recorded as a test; audited `notify-test`.
 * - `POST /admin/email/test` (any authenticated person; body ignored): the test line by mail to the
 *   caller's own verified email; 400 for a caller without one (the admin token, a token session).
 */

import {
  channelSummary,
  isNotifyError,
  normaliseChannel,
  normaliseRule,
  rulesDeliveringNowhere,
  rulesForFirstChannel,
  viewChannel,
} from '@coffer/notify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  channelFromState,
  channelToState,
  loadNotifyConfig,
  ruleFromState,
  ruleToState,
} from '../../notify/store.ts';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden, sendStateUnavailable } from '../../plugins/replies.ts';

type Body = Record<string, unknown>;

function refusal(reply: FastifyReply, err: unknown): FastifyReply | null {
  if (!isNotifyError(err)) return null;
  return reply.code(400).send({
    error: err.message,
    code: err.code,
    ...(err.field ? { field: err.field } : {}),
    ...(err.refusal ? { refusal: err.refusal } : {}),
  });
}

export default async function notifyRoutes(app: FastifyInstance): Promise<void> {
  const read = {
    onRequest: app.requireCapability('notify.config'),
    config: { capability: 'notify.config' as const },
  };
  const write = (action: 'notify-channel-change' | 'notify-rule-change') => ({
    onRequest: [app.requireCapability('notify.config'), app.requireStepUp, app.rateLimitCaller],
    config: { capability: 'notify.config' as const, audit: { action } },
  });
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'notify'] },
  });
  const state = () => app.state.notifications;

  /** A non-owner may not point a channel at a private address (an SSRF switch is the owner's). */
  const privateTargetRefused = (request: FastifyRequest, reply: FastifyReply, wanted: unknown): boolean => {
    if (wanted !== true) return false;
    const caller = request.caller!;
    if (roleName(caller.role) === 'owner') return false;
    sendForbidden(reply, 'owner', roleName(caller.role));
    return true;
  };

  app.get(
    '/notify/channels',
    { ...read, ...meta('Notification channels and rules (secrets never shown)', 'getNotifyChannels') },
    async (_request, reply) => {
      try {
        const { channels, rules } = await loadNotifyConfig(app.state);
        return {
          channels: channels.map(viewChannel),
          rules,
          nowhere: rulesDeliveringNowhere(rules, channels),
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Body: Body }>(
    '/notify/channels',
    { ...write('notify-channel-change'), ...meta('Add a notification channel', 'postNotifyChannel') },
    async (request, reply) => {
      const body = (request.body ?? {}) as Body;
      if (privateTargetRefused(request, reply, body.allowPrivateTarget)) return reply;
      let channel: ReturnType<typeof normaliseChannel>;
      try {
        channel = normaliseChannel(body, { secrets: app.notify.secrets });
      } catch (err) {
        return refusal(reply, err) ?? reply.code(400).send({ error: 'invalid channel' });
      }
      const existing = await loadNotifyConfig(app.state);
      if (existing.channels.some((c) => c.id === channel.id))
        return reply
          .code(409)
          .send({ error: 'a channel with this id exists; update it instead', id: channel.id });
      await state().putChannel(channelToState(channel));
      const rulesCreated = rulesForFirstChannel(channel.id, existing);
      for (const r of rulesCreated) await state().putRule(ruleToState(r));
      await app.audit.forRequest(request, {
        action: 'notify-channel-change',
        outcome: 'applied',
        target: channel.id,
        detail: { change: 'create', ...channelSummary(channel), rulesCreated: rulesCreated.map((r) => r.id) },
      });
      return { channel: viewChannel(channel), rulesCreated };
    },
  );

  app.post<{ Body: Body }>(
    '/notify/channels/update',
    {
      ...write('notify-channel-change'),
      ...meta('Change a notification channel (omitted secrets kept)', 'postNotifyChannelUpdate'),
    },
    async (request, reply) => {
      const body = (request.body ?? {}) as Body;
      const id = typeof body.id === 'string' ? body.id : '';
      const stored = id === '' ? null : await state().getChannel(id);
      if (stored === null) return reply.code(404).send({ error: 'no such channel' });
      const previous = channelFromState(stored);
      // Turning the switch on, or pointing a channel that has it at another address, is the owner's.
      if (!previous.allowPrivateTarget && privateTargetRefused(request, reply, body.allowPrivateTarget))
        return reply;
      if (previous.allowPrivateTarget && body.url !== undefined && privateTargetRefused(request, reply, true))
        return reply;
      let channel: ReturnType<typeof normaliseChannel>;
      try {
        channel = normaliseChannel(body, { secrets: app.notify.secrets, previous });
      } catch (err) {
        return refusal(reply, err) ?? reply.code(400).send({ error: 'invalid channel' });
      }
      await state().putChannel(channelToState(channel));
      await app.audit.forRequest(request, {
        action: 'notify-channel-change',
        outcome: 'applied',
        target: channel.id,
        detail: { change: 'update', ...channelSummary(channel) },
      });
      return { channel: viewChannel(channel) };
    },
  );

  app.post<{ Body: Body }>(
    '/notify/channels/delete',
    {
      ...write('notify-channel-change'),
      ...meta('Delete a notification channel', 'postNotifyChannelDelete'),
    },
    async (request, reply) => {
      const id = typeof request.body?.id === 'string' ? request.body.id : '';
      if (id === '') return reply.code(400).send({ error: 'id is required' });
      const stored = await state().getChannel(id);
      const deleted = stored !== null && (await state().deleteChannel(id));
      if (deleted)
        await app.audit.forRequest(request, {
          action: 'notify-channel-change',
          outcome: 'applied',
          target: id,
          detail: { change: 'delete', ...channelSummary(channelFromState(stored)) },
        });
      return { ok: true, deleted };
    },
  );

  const ruleOptions = async () => {
    const [channels, jobs] = await Promise.all([state().listChannels(), app.state.jobs.list()]);
    return { channelIds: channels.map((c) => c.id), jobIds: jobs.map((j) => j.id) };
  };

  app.post<{ Body: Body }>(
    '/notify/rules',
    { ...write('notify-rule-change'), ...meta('Add a notification rule', 'postNotifyRule') },
    async (request, reply) => {
      let rule: ReturnType<typeof normaliseRule>;
      try {
        rule = normaliseRule(request.body ?? {}, await ruleOptions());
      } catch (err) {
        return refusal(reply, err) ?? reply.code(400).send({ error: 'invalid rule' });
      }
      if ((await state().listRules()).some((r) => r.id === rule.id))
        return reply.code(409).send({ error: 'a rule with this id exists; update it instead', id: rule.id });
      await state().putRule(ruleToState(rule));
      await app.audit.forRequest(request, {
        action: 'notify-rule-change',
        outcome: 'applied',
        target: rule.id,
        detail: {
          change: 'create',
          scope: rule.scope === 'global' ? 'global' : `job:${rule.scope.job}`,
          channels: rule.channelIds.length,
        },
      });
      return { rule };
    },
  );

  app.post<{ Body: Body }>(
    '/notify/rules/update',
    { ...write('notify-rule-change'), ...meta('Change a notification rule', 'postNotifyRuleUpdate') },
    async (request, reply) => {
      const id = typeof request.body?.id === 'string' ? request.body.id : '';
      const previous = (await state().listRules()).find((r) => r.id === id);
      if (!previous) return reply.code(404).send({ error: 'no such rule' });
      let rule: ReturnType<typeof normaliseRule>;
      try {
        rule = normaliseRule(request.body, { ...(await ruleOptions()), previous: ruleFromState(previous) });
      } catch (err) {
        return refusal(reply, err) ?? reply.code(400).send({ error: 'invalid rule' });
      }
      await state().putRule(ruleToState(rule));
      await app.audit.forRequest(request, {
        action: 'notify-rule-change',
        outcome: 'applied',
        target: rule.id,
        detail: {
          change: 'update',
          scope: rule.scope === 'global' ? 'global' : `job:${rule.scope.job}`,
          channels: rule.channelIds.length,
        },
      });
      return { rule };
    },
  );

  app.post<{ Body: Body }>(
    '/notify/rules/delete',
    { ...write('notify-rule-change'), ...meta('Delete a notification rule', 'postNotifyRuleDelete') },
    async (request, reply) => {
      const id = typeof request.body?.id === 'string' ? request.body.id : '';
      if (id === '') return reply.code(400).send({ error: 'id is required' });
      const deleted = await state().deleteRule(id);
      if (deleted)
        await app.audit.forRequest(request, {
          action: 'notify-rule-change',
          outcome: 'applied',
          target: id,
          detail: { change: 'delete' },
        });
      return { ok: true, deleted };
    },
  );

  app.get(
    '/notify/history',
    { ...read, ...meta('Notification deliveries, newest first (ring of 1000)', 'getNotifyHistory') },
    async (_request, reply) => {
      try {
        return { records: await state().listDeliveries(1000) };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Body: Body }>(
    '/notify/test',
    {
      onRequest: [app.requireCapability('notify.config'), app.rateLimitCaller],
      config: { capability: 'notify.config' as const, audit: { action: 'notify-test' as const } },
      ...meta('Send the fixed test line to one channel', 'postNotifyTest'),
    },
    async (request, reply) => {
      const id = typeof request.body?.channelId === 'string' ? request.body.channelId : '';
      const stored = id === '' ? null : await state().getChannel(id);
      if (stored === null) return reply.code(404).send({ error: 'no such channel' });
      const channel = channelFromState(stored);
      const records = await app.notify.test(channel);
      await app.audit.forRequest(request, {
        action: 'notify-test',
        outcome: 'applied',
        target: id,
        detail: { ...channelSummary(channel), accepted: records.some((r) => r.accepted) },
      });
      return { records };
    },
  );

  app.post(
    '/email/test',
    {
      onRequest: app.rateLimitCaller,
      ...meta("Send the test line to the caller's own verified email", 'postEmailTest'),
    },
    async (request, reply) => {
      const email = request.caller?.email;
      if (!email)
        return reply.code(400).send({ error: 'this caller has no verified email (sign in as a person)' });
      if (!app.config.mail)
        return reply.code(400).send({ error: 'no mail server is configured (ENGINE_SMTP_URL)' });
      const records = await app.notify.testEmail(email);
      await app.audit.forRequest(request, {
        action: 'notify-test',
        outcome: 'applied',
        target: 'email',
        detail: { kind: 'email', own: true, accepted: records.some((r) => r.accepted) },
      });
      return { records };
    },
  );
}
