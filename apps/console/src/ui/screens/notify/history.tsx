/**
 * The delivery history (`GET /admin/notify/history`, the engine's ring of 1000, newest first):
 * one row per attempt with event, severity, channel, accepted or not (the error code and message
 * when not), test flag, time and the redaction-safe detail line. Refreshed on demand, after a test
 * send, and every 15 seconds while the screen is open.
 */
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ListSection } from '../../components/list.tsx';
import { ErrorBox, formatTime, Loading } from '../../components/ui.tsx';
import { TableRegion, Tag } from '../admin/common.tsx';
import { type ChannelView, DELIVERY_ERRORS, HISTORY_KEY, type HistoryRow, partsOf } from './types.ts';

const PAGE = 50;

export function DeliveryHistory({ channels }: { channels: ChannelView[] }) {
  const [shown, setShown] = useState(PAGE);
  const history = useQuery({
    queryKey: HISTORY_KEY,
    queryFn: () => api.get<{ records: HistoryRow[] }>('/admin/notify/history'),
    refetchInterval: (q) => (q.state.status === 'error' ? false : 15_000),
  });
  const records = history.data?.records ?? [];
  const nameOf = (id: string | null) => (id === null ? undefined : channels.find((c) => c.id === id)?.name);

  return (
    <ListSection
      title="Delivery history"
      action={{
        label: history.isFetching && !history.isPending ? 'Refreshing…' : 'Refresh history',
        disabled: history.isFetching,
        onClick: () => void history.refetch(),
      }}
    >
      {history.isPending ? <Loading what="Loading deliveries" /> : null}
      <ErrorBox error={history.error} onRetry={() => void history.refetch()} />
      {history.data && records.length === 0 ? <p className="muted">Nothing has been sent yet.</p> : null}
      {records.length > 0 ? (
        <>
          <p className="muted">
            {records.length} attempt{records.length === 1 ? '' : 's'} kept (at most 1000), newest first.
          </p>
          <TableRegion label="Delivery history">
            <table className="notify-table">
              <caption className="sr-only">Notification deliveries, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Event</th>
                  <th scope="col">Severity</th>
                  <th scope="col">Channel</th>
                  <th scope="col">Result</th>
                  <th scope="col">Test</th>
                  <th scope="col">Detail</th>
                </tr>
              </thead>
              <tbody>
                {records.slice(0, shown).map((r, i) => {
                  const parts = partsOf(r);
                  const key = r.seq ?? r.id ?? `${r.at}-${i}`;
                  return (
                    <tr key={key} data-seq={r.seq} data-record-id={r.id}>
                      <th scope="row" className="notify-nowrap">
                        {formatTime(r.at)}
                      </th>
                      <td>{r.event}</td>
                      <td>
                        <Tag kind={`sev-${r.severity}`}>{r.severity}</Tag>
                      </td>
                      <td className="notify-break">
                        {nameOf(r.channelId) ?? <span className="mono">{r.channelId ?? '–'}</span>}
                        <div className="muted">{r.channelKind}</div>
                      </td>
                      <td>
                        {r.accepted ? (
                          <Tag kind="active">accepted</Tag>
                        ) : (
                          <Tag kind="refused">not accepted</Tag>
                        )}
                        {parts.status !== undefined ? <span className="muted"> {parts.status}</span> : null}
                        {parts.code ? (
                          <div>
                            <code>{parts.code}</code>
                            {DELIVERY_ERRORS[parts.code] ? (
                              <span className="muted"> {DELIVERY_ERRORS[parts.code]}</span>
                            ) : null}
                          </div>
                        ) : null}
                        {parts.attempt !== undefined && parts.attempt > 1 ? (
                          <div className="muted">attempt {parts.attempt}</div>
                        ) : null}
                        {parts.willRetry ? <div className="muted">will retry</div> : null}
                      </td>
                      <td>{r.test ? 'test' : <span className="muted">no</span>}</td>
                      <td className="notify-break notify-detail">
                        {parts.detail}
                        {r.error ? <div>{r.error.message}</div> : null}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableRegion>
          {records.length > shown ? (
            <button type="button" onClick={() => setShown((n) => n + PAGE)}>
              Show {Math.min(PAGE, records.length - shown)} more
            </button>
          ) : null}
        </>
      ) : null}
    </ListSection>
  );
}
