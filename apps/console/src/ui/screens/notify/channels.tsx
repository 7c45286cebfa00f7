/**
 * The channels table: kind, name, state, target (a URL's origin or the addresses; write-only
 * fields shown as "set"), and per channel: send the test line (`POST /admin/notify/test`, result
 * from its delivery record), edit, enable or disable, delete with confirmation.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox } from '../../components/ui.tsx';
import { ConfirmButton, TableRegion, Tag } from '../admin/common.tsx';
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
  const [busy, setBusy] = useState<'test' | 'toggle' | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [result, setResult] = useState<DeliveryRecord[] | null>(null);
  const usedBy = rules.filter((r) => r.channelIds.includes(c.id)).length;

  const sendTest = async () => {
    setBusy('test');
    setError(null);
    setResult(null);
    try {
      const { records } = await api.post<{ records: DeliveryRecord[] }>('/admin/notify/test', {
        channelId: c.id,
      });
      setResult(records);
      await client.invalidateQueries({ queryKey: HISTORY_KEY });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };

  const toggle = async () => {
    setBusy('toggle');
    setError(null);
    try {
      await api.post('/admin/notify/channels/update', { id: c.id, enabled: !c.enabled });
      await client.invalidateQueries({ queryKey: NOTIFY_KEY });
      onDone(`Channel ${c.name} is ${c.enabled ? 'disabled' : 'enabled'}.`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
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
        <div className="cell-actions">
          <button
            type="button"
            aria-label={`Send test to ${c.name}`}
            disabled={busy !== null}
            onClick={() => void sendTest()}
          >
            {busy === 'test' ? 'Sending…' : 'Send test'}
          </button>
          <button type="button" aria-label={`Edit ${c.name}`} onClick={onEdit}>
            Edit
          </button>
          <button
            type="button"
            aria-label={`${c.enabled ? 'Disable' : 'Enable'} ${c.name}`}
            disabled={busy !== null}
            onClick={() => void toggle()}
          >
            {c.enabled ? 'Disable' : 'Enable'}
          </button>
          <ConfirmButton
            label="Delete"
            accessibleLabel={`Delete ${c.name}`}
            title={`Delete the channel ${c.name}?`}
            confirmLabel="Delete channel"
            danger
            action={async () => {
              const r = await api.post<{ deleted: boolean }>('/admin/notify/channels/delete', { id: c.id });
              await client.invalidateQueries({ queryKey: NOTIFY_KEY });
              onDone(r.deleted ? `Channel ${c.name} was deleted.` : `Channel ${c.name} was already gone.`);
            }}
          >
            <p>
              Nothing more is sent to it.{' '}
              {usedBy > 0
                ? `The ${usedBy} rule${usedBy === 1 ? '' : 's'} naming it keep the id and skip it; a rule left without another channel delivers nowhere.`
                : null}
            </p>
          </ConfirmButton>
        </div>
        {result ? (
          <div className={`msg ${accepted ? 'msg-ok' : 'msg-error'} notify-test-result`} role="status">
            {result.length === 0
              ? 'The engine returned no delivery record.'
              : result.map((r) => <div key={r.id}>Test {outcomeText(r)}</div>)}
          </div>
        ) : null}
        <ErrorBox error={error} />
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
