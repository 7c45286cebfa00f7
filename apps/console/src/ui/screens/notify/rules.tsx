/**
 * The rules table: scope, minimum severity, events, channels, digest, and a flag on each rule the
 * engine reports as delivering nowhere (`nowhere` of `GET /admin/notify/channels`: every channel
 * it names is deleted or disabled). Edit and delete (confirmed) per rule.
 */
import { ItemActions, TableRegion, Tag } from '../admin/common.tsx';
import { type ChannelView, NOTIFY_KEY, type Rule, scopeText } from './types.ts';

function channelNames(rule: Rule, channels: ChannelView[]): string {
  return rule.channelIds
    .map((id) => {
      const c = channels.find((x) => x.id === id);
      if (!c) return `${id} (deleted)`;
      return c.enabled ? c.name : `${c.name} (disabled)`;
    })
    .join(', ');
}

export function RulesTable({
  rules,
  channels,
  nowhere,
  onEdit,
  onDone,
}: {
  rules: Rule[];
  channels: ChannelView[];
  nowhere: string[];
  onEdit: (r: Rule) => void;
  onDone: (message: string) => void;
}) {
  return (
    <TableRegion label="Rules">
      <table className="notify-table">
        <caption className="sr-only">Notification rules</caption>
        <thead>
          <tr>
            <th scope="col">Rule</th>
            <th scope="col">Scope</th>
            <th scope="col">Min severity</th>
            <th scope="col">Events</th>
            <th scope="col">Channels</th>
            <th scope="col">Digest</th>
            <th scope="col">Delivery</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {rules.map((r) => (
            <tr key={r.id} data-rule-id={r.id}>
              <th scope="row" className="mono">
                {r.id}
              </th>
              <td>{scopeText(r.scope)}</td>
              <td>{r.minSeverity}</td>
              <td className="notify-break">{r.events === 'all' ? 'all' : r.events.join(', ')}</td>
              <td className="notify-break">{channelNames(r, channels)}</td>
              <td>{r.digest}</td>
              <td>
                {nowhere.includes(r.id) ? (
                  <Tag kind="refused">delivering nowhere</Tag>
                ) : (
                  <Tag kind="active">ok</Tag>
                )}
              </td>
              <td>
                <ItemActions
                  path="/admin/notify/rules"
                  queryKey={NOTIFY_KEY}
                  id={r.id}
                  name={`rule ${r.id}`}
                  subject={`Rule ${r.id}`}
                  deleteTitle={`Delete the rule ${r.id}?`}
                  confirmLabel="Delete rule"
                  onEdit={() => onEdit(r)}
                  onDone={onDone}
                >
                  <p>The events it selects are no longer sent to its channels by this rule.</p>
                </ItemActions>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableRegion>
  );
}
