/**
 * The channels table: kind, name, state, target (a URL's origin or the addresses; write-only
 * fields shown as "set"), and per channel: send the test line (`POST /admin/notify/test`, result
 * from its delivery record), edit, enable or disable, delete with confirmation.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ItemActions, TableRegion, Tag } from '../admin/common.tsx';
import {
  type ChannelView,
  type DeliveryRecord,
  HISTORY_KEY,
  kindLabel,
  NOTIFY_KEY,
  outcomeText,
  type Rule,
} from './types.ts';

/** Where a channel sends, without anything secret. */
export function targetText(c: ChannelView): string {
  if (c.url) return c.url.origin;
  if (c.toAddresses?.length) return c.toAddresses.join(', ');
  if (c.kind === 'incident') return 'PagerDuty Events API';
  return '–';
}

function writeOnly(c: ChannelView): string[] {
  const out: string[] = [];
  if (c.url) out.push('URL path: set');
  if (c.username) out.push(`user: ${c.username}`);
  if (c.routingKey) out.push('routing key: set');
  if (c.apiKey) out.push('API key: set');
  if (c.kind === 'webhook') out.push(c.signingSecret ? 'signing secret: set' : 'unsigned');
  return out;
}

function ChannelRow({
  c,
  rules,
  onEdit,
  onDone,
}: {
  c: ChannelView;
  rules: Rule[];
  onEdit: () => void;
  onDone: (message: string) => void;
}) {
  const client = useQueryClient();
  const [result, setResult] = useState<DeliveryRecord[] | null>(null);
  const usedBy = rules.filter((r) => r.channelIds.includes(c.id)).length;

  const sendTest = async () => {
    setResult(null);
    const { records } = await api.post<{ records: DeliveryRecord[] }>('/admin/notify/test', {
      channelId: c.id,
    });
    setResult(records);
    await client.invalidateQueries({ queryKey: HISTORY_KEY });
  };

  const accepted = result?.some((r) => r.accepted) ?? false;
  return (
    <tr data-channel-id={c.id}>
      <th scope="row">
        {c.name}
        <div className="mono muted">{c.id}</div>
      </th>
      <td>{kindLabel(c.kind)}</td>
      <td>
        {c.enabled ? <Tag kind="active">enabled</Tag> : <Tag kind="none">disabled</Tag>}
        {c.allowPrivateTarget ? <div className="notify-warn-text">private target allowed</div> : null}
      </td>
      <td className="notify-break">
        {targetText(c)}
        <div className="muted">{writeOnly(c).join(' · ')}</div>
      </td>
      <td>
        {usedBy === 0 ? <span className="muted">no rule</span> : `${usedBy} rule${usedBy === 1 ? '' : 's'}`}
      </td>
      <td>
        <ItemActions
          path="/admin/notify/channels"
          queryKey={NOTIFY_KEY}
          id={c.id}
          name={c.name}
          subject={`Channel ${c.name}`}
          enabled={c.enabled}
          test={{
            label: 'Send test',
            busyLabel: 'Sending…',
            accessibleLabel: `Send test to ${c.name}`,
            run: sendTest,
          }}
          result={
            result ? (
              <div className={`msg ${accepted ? 'msg-ok' : 'msg-error'} notify-test-result`} role="status">
                {result.length === 0
                  ? 'The engine returned no delivery record.'
                  : result.map((r) => <div key={r.id}>Test {outcomeText(r)}</div>)}
              </div>
            ) : null
          }
          deleteTitle={`Delete the channel ${c.name}?`}
          confirmLabel="Delete channel"
          onEdit={onEdit}
          onDone={onDone}
        >
          <p>
            Nothing more is sent to it.{' '}
            {usedBy > 0
              ? `The ${usedBy} rule${usedBy === 1 ? '' : 's'} naming it keep the id and skip it; a rule left without another channel delivers nowhere.`
              : null}
          </p>
        </ItemActions>
      </td>
    </tr>
  );
}

export function ChannelsTable({
  channels,
  rules,
  onEdit,
  onDone,
}: {
  channels: ChannelView[];
  rules: Rule[];
  onEdit: (c: ChannelView) => void;
  onDone: (message: string) => void;
}) {
  return (
    <TableRegion label="Channels">
      <table className="notify-table">
        <caption className="sr-only">Notification channels</caption>
        <thead>
          <tr>
            <th scope="col">Channel</th>
            <th scope="col">Kind</th>
            <th scope="col">State</th>
            <th scope="col">Target</th>
            <th scope="col">Used by</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {channels.map((c) => (
            <ChannelRow key={c.id} c={c} rules={rules} onEdit={() => onEdit(c)} onDone={onDone} />
          ))}
        </tbody>
      </table>
    </TableRegion>
  );
}
