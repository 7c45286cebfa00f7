/**
 * Notifications (docs/notifications.md): the channels (seven kinds; add, edit with write-only
 * fields kept when left blank, enable or disable, delete, send the test line), the routing rules
 * (scope, minimum severity, events, channels, digest; those delivering nowhere flagged; add, edit,
 * delete) and the delivery history. Everything is gated on `notify.config`; the writes need
 * step-up, which the API client asks for in place. The first channel added gets two global rules
 * from the engine; they are shown once it answers.
 */
import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { api } from '../api/client.ts';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ChannelForm } from './notify/channel-form.tsx';
import { ChannelsTable } from './notify/channels.tsx';
import { DeliveryHistory } from './notify/history.tsx';
import { RuleForm } from './notify/rule-form.tsx';
import { RulesTable } from './notify/rules.tsx';
import { type ChannelsAnswer, type ChannelView, NOTIFY_KEY, type Rule, scopeText } from './notify/types.ts';
import './notify/notify.css';

type ChannelEditor = { mode: 'add' } | { mode: 'edit'; channel: ChannelView } | null;
type RuleEditor = { mode: 'add' } | { mode: 'edit'; rule: Rule } | null;

function eventsText(r: Rule): string {
  return r.events === 'all' ? 'all events' : r.events.join(', ');
}

export function Notifications() {
  const config = useQuery({
    queryKey: NOTIFY_KEY,
    queryFn: () => api.get<ChannelsAnswer>('/admin/notify/channels'),
  });
  const [channelEditor, setChannelEditor] = useState<ChannelEditor>(null);
  const [ruleEditor, setRuleEditor] = useState<RuleEditor>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [autoRules, setAutoRules] = useState<{ channel: string; rules: Rule[] } | null>(null);
  const channelsId = useId();
  const rulesId = useId();
  const data = config.data;
  const nowhere = data ? data.rules.filter((r) => data.nowhere.includes(r.id)) : [];

  return (
    <Page title="Notifications">
      <p className="muted notify-intro">
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
          <section aria-labelledby={channelsId}>
            <div className="notify-section-head">
              <h2 id={channelsId}>Channels</h2>
              {channelEditor === null ? (
                <button
                  type="button"
                  className="primary"
                  onClick={() => {
                    setMessage(null);
                    setChannelEditor({ mode: 'add' });
                  }}
                >
                  Add channel
                </button>
              ) : null}
            </div>
            {channelEditor ? (
              <ChannelForm
                key={channelEditor.mode === 'edit' ? channelEditor.channel.id : 'add'}
                {...(channelEditor.mode === 'edit' ? { editing: channelEditor.channel } : {})}
                onCancel={() => setChannelEditor(null)}
                onSaved={({ channel, rulesCreated }) => {
                  setChannelEditor(null);
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
                onEdit={(channel) => {
                  setMessage(null);
                  setChannelEditor({ mode: 'edit', channel });
                }}
                onDone={setMessage}
              />
            )}
          </section>

          <section aria-labelledby={rulesId}>
            <div className="notify-section-head">
              <h2 id={rulesId}>Rules</h2>
              {ruleEditor === null ? (
                <button
                  type="button"
                  disabled={data.channels.length === 0}
                  onClick={() => {
                    setMessage(null);
                    setRuleEditor({ mode: 'add' });
                  }}
                >
                  Add rule
                </button>
              ) : null}
            </div>
            {nowhere.length > 0 ? (
              <Notice kind="warn">
                {nowhere.length === 1 ? 'One rule delivers' : `${nowhere.length} rules deliver`} nowhere:
                every channel {nowhere.length === 1 ? 'it names' : 'they name'} is deleted or disabled (
                {nowhere.map((r) => r.id).join(', ')}).
              </Notice>
            ) : null}
            {ruleEditor ? (
              <RuleForm
                key={ruleEditor.mode === 'edit' ? ruleEditor.rule.id : 'add'}
                {...(ruleEditor.mode === 'edit' ? { editing: ruleEditor.rule } : {})}
                channels={data.channels}
                onCancel={() => setRuleEditor(null)}
                onSaved={(rule) => {
                  setRuleEditor(null);
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
                onEdit={(rule) => {
                  setMessage(null);
                  setRuleEditor({ mode: 'edit', rule });
                }}
                onDone={setMessage}
              />
            )}
          </section>

          <DeliveryHistory channels={data.channels} />
        </>
      ) : null}
    </Page>
  );
}
