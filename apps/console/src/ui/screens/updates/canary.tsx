/**
 * The canary (`GET /admin/canary`): the overall verdict, the flight interval and per destination
 * its recent flights (trigger, times, verdict with its code, bytes, the engine version and
 * instance that flew). An engine without the route (404) gets a quiet line, not an error.
 */
import { useQuery } from '@tanstack/react-query';
import { useId } from 'react';
import { api } from '../../api/client.ts';
import { ApiError } from '../../api/errors.ts';
import { ErrorBox, formatBytes, formatTime, Loading } from '../../components/ui.tsx';
import { TableRegion, Tag } from '../admin/common.tsx';
import { CANARY_KEY, type CanaryView } from './types.ts';

function verdictKind(v: string | null): string {
  if (v === 'alive' || v === 'pass' || v === 'ok') return 'ok';
  if (v === 'dead' || v === 'fail' || v === 'failed') return 'refused';
  return 'pending';
}

function intervalText(s: number): string {
  if (s % 3600 === 0) return `${s / 3600} hour${s === 3600 ? '' : 's'}`;
  if (s % 60 === 0) return `${s / 60} minutes`;
  return `${s} seconds`;
}

export function CanaryPanel() {
  const headingId = useId();
  const canary = useQuery({
    queryKey: CANARY_KEY,
    queryFn: async (): Promise<CanaryView | null> => {
      try {
        return await api.get<CanaryView>('/admin/canary');
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    },
    retry: false,
  });
  const data = canary.data;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Canary</h2>
      {canary.isPending ? <Loading what="Loading the canary" /> : null}
      <ErrorBox error={canary.error} onRetry={() => void canary.refetch()} />
      {data === null ? <p className="muted">Canary not available on this engine.</p> : null}
      {data ? (
        <>
          <dl className="facts">
            <dt>Verdict</dt>
            <dd>
              {data.verdict ? (
                <Tag kind={verdictKind(data.verdict)}>{data.verdict}</Tag>
              ) : (
                <span className="muted">none yet</span>
              )}
            </dd>
            <dt>Flies every</dt>
            <dd>{intervalText(data.intervalSeconds)}</dd>
            <dt>Last flight</dt>
            <dd>{formatTime(data.lastFlightAt)}</dd>
          </dl>
          {data.destinations.length === 0 ? (
            <p className="muted">No destination to fly to yet.</p>
          ) : (
            data.destinations.map((d) => (
              <TableRegion key={d.destination} label={`Canary flights to ${d.destination}`}>
                <table className="update-table">
                  <caption>
                    Flights to <span className="mono">{d.destination}</span>
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">Started</th>
                      <th scope="col">Trigger</th>
                      <th scope="col">Verdict</th>
                      <th scope="col">Bytes</th>
                      <th scope="col">Engine</th>
                      <th scope="col">Finished</th>
                    </tr>
                  </thead>
                  <tbody>
                    {d.flights.length === 0 ? (
                      <tr>
                        <td colSpan={6} className="muted">
                          No flights yet.
                        </td>
                      </tr>
                    ) : (
                      d.flights.map((f) => (
                        <tr key={f.id} data-flight={f.id}>
                          <th scope="row">{formatTime(f.startedAt)}</th>
                          <td>{f.trigger}</td>
                          <td>
                            <Tag kind={verdictKind(f.verdict)}>{f.verdict}</Tag>
                            {f.code ? (
                              <>
                                {' '}
                                <code>{f.code}</code>
                              </>
                            ) : null}
                            {f.message ? <div className="muted update-break">{f.message}</div> : null}
                          </td>
                          <td>{formatBytes(f.bytes)}</td>
                          <td>
                            {f.engineVersion ?? '–'}
                            {f.instanceId ? <div className="muted mono">{f.instanceId}</div> : null}
                          </td>
                          <td>{formatTime(f.finishedAt)}</td>
                        </tr>
                      ))
                    )}
                  </tbody>
                </table>
              </TableRegion>
            ))
          )}
        </>
      ) : null}
    </section>
  );
}
