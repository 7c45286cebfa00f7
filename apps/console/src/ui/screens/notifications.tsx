/**
 * Notifications (docs/notifications.md): the channels (seven kinds; add, edit with write-only
 * fields kept when left blank, enable or disable, delete, send the test line), the routing rules
 * (scope, minimum severity, events, channels, digest; those delivering nowhere flagged; add, edit,
 * delete) and the delivery history. Everything is gated on `notify.config`; the writes need
 * step-up, which the API client asks for in place. The first channel added gets two global rules
 * from the engine; they are shown once it answers.
 */
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client.ts';
import { editorKey, editorProps, ListSection, useEditor } from '../components/list.tsx';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ChannelForm } from './notify/channel-form.tsx';
import { ChannelsTable } from './notify/channels.tsx';
import { DeliveryHistory } from './notify/history.tsx';
import { RuleForm } from './notify/rule-form.tsx';
import { RulesTable } from './notify/rules.tsx';
import { type ChannelsAnswer, type ChannelView, NOTIFY_KEY, type Rule, scopeText } from './notify/types.ts';
import './notify/notify.css';

function eventsText(r: Rule): string {
  return r.events === 'all' ? 'all events' : r.events.join(', ');
}

export function Notifications() {
  const config = useQuery({
    queryKey: NOTIFY_KEY,
    queryFn: () => api.get<ChannelsAnswer>('/admin/notify/channels'),
  });
  const [message, setMessage] = useState<string | null>(null);
  const [autoRules, setAutoRules] = useState<{ channel: string; rules: Rule[] } | null>(null);
  const [channelEditor, openChannel, closeChannel] = useEditor<ChannelView>(() => setMessage(null));
  const [ruleEditor, openRule, closeRule] = useEditor<Rule>(() => setMessage(null));
  const data = config.data;
  const nowhere = data ? data.rules.filter((r) => data.nowhere.includes(r.id)) : [];

  return (
    <Page title="Notifications">
      <p className="muted screen-intro">
        Where the engine tells people that backups failed, went stale or need a decision. Channels are the
        receivers; rules pick which events go to which channels.
      </p>
      {config.isPending ? <Loading what="Loading channels and rules" /> : null}
      <ErrorBox error={config.error} onRetry={() => void config.refetch()} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {autoRules ? (
        <section className="msg msg-info notify-auto" aria-label="Rules created automatically">
          <p>
            <strong>{autoRules.channel}</strong> is the first channel, so the engine created these rules for
            it:
          </p>
          <ul>
            {autoRules.rules.map((r) => (
              <li key={r.id}>
                <code>{r.id}</code>: {eventsText(r)}, {scopeText(r.scope)}, {r.minSeverity} and above
              </li>
            ))}
          </ul>
          <button type="button" className="link" onClick={() => setAutoRules(null)}>
            Dismiss
          </button>
        </section>
      ) : null}

      {data ? (
        <>
          <ListSection
            title="Channels"
            action={
              channelEditor === null
                ? { label: 'Add channel', primary: true, onClick: () => openChannel({ mode: 'add' }) }
                : undefined
            }
          >
            {channelEditor ? (
              <ChannelForm
                key={editorKey(channelEditor)}
                {...editorProps(channelEditor)}
                onCancel={closeChannel}
                onSaved={({ channel, rulesCreated }) => {
                  closeChannel();
                  setMessage(
                    channelEditor.mode === 'edit'
                      ? `Channel ${channel.name} is saved.`
                      : `Channel ${channel.name} is added.`,
                  );
                  if (rulesCreated && rulesCreated.length > 0)
                    setAutoRules({ channel: channel.name, rules: rulesCreated });
                }}
              />
            ) : null}
            {data.channels.length === 0 ? (
              <p className="muted">
                No channels yet. The first one added gets the global backup-failure and backup-stale rules.
              </p>
            ) : (
              <ChannelsTable
                channels={data.channels}
                rules={data.rules}
                onEdit={(item) => openChannel({ mode: 'edit', item })}
                onDone={setMessage}
              />
            )}
          </ListSection>

          <ListSection
            title="Rules"
            action={
              ruleEditor === null
                ? {
                    label: 'Add rule',
                    disabled: data.channels.length === 0,
                    onClick: () => openRule({ mode: 'add' }),
                  }
                : undefined
            }
          >
            {nowhere.length > 0 ? (
              <Notice kind="warn">
                {nowhere.length === 1 ? 'One rule delivers' : `${nowhere.length} rules deliver`} nowhere:
                every channel {nowhere.length === 1 ? 'it names' : 'they name'} is deleted or disabled (
                {nowhere.map((r) => r.id).join(', ')}).
              </Notice>
            ) : null}
            {ruleEditor ? (
              <RuleForm
                key={editorKey(ruleEditor)}
                {...editorProps(ruleEditor)}
                channels={data.channels}
                onCancel={closeRule}
                onSaved={(rule) => {
                  closeRule();
                  setMessage(`Rule ${rule.id} is saved.`);
                }}
              />
            ) : null}
            {data.rules.length === 0 ? (
              <p className="muted">No rules: nothing is sent.</p>
            ) : (
              <RulesTable
                rules={data.rules}
                channels={data.channels}
                nowhere={data.nowhere}
                onEdit={(item) => openRule({ mode: 'edit', item })}
                onDone={setMessage}
              />
            )}
          </ListSection>

          <DeliveryHistory channels={data.channels} />
        </>
      ) : null}
    </Page>
  );
}
