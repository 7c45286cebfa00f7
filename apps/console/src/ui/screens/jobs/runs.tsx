/**
 * A job's runs: the history ring (`GET /admin/history?id=`) with status, failure reason, warnings
 * and each destination's copy state and verification; live progress of a run in flight (the
 * history query polls every second while a run is running or parked, and shows what the engine
 * records during a run: each destination's stage and shards stored); and the point-in-time lookup
 * (`GET /admin/runs/at`): the latest `ok` run at or before a time, or the miss with the window of
 * runs the engine still holds.
 */
import { useQuery } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useEffect, useId, useState } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox, Field, formatBytes, formatTime, Loading } from '../../components/ui.tsx';
import {
  elapsed,
  type RunAt,
  type RunDestination,
  type RunObject,
  runInFlight,
  useHistory,
} from './model.ts';

/**
 * A table that may scroll sideways (phone width): a named region people can focus and scroll with
 * the keyboard (axe `scrollable-region-focusable`).
 */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard
    <section className="table-wrap" aria-label={label} tabIndex={0}>
      {children}
    </section>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span className={`status status-${status}`}>{status}</span>;
}

const STAGES: Record<string, string> = {
  pending: 'waiting to start',
  writing: 'writing shards',
  written: 'sealed, reading back to verify',
  verified: 'verified (read back)',
  failed: 'failed',
  pruned: 'pruned by retention',
};

function DestinationStates({ run }: { run: RunObject }) {
  const entries = Object.entries(run.destinations);
  if (entries.length === 0) return <span className="muted">none yet</span>;
  return (
    <ul className="jobs-plain">
      {entries.map(([id, d]) => (
        <li key={id}>
          {id}: <span className={`status status-${d.state}`}>{d.state}</span>
          {d.state === 'verified' && d.verifiedAt ? (
            <span className="muted"> {formatTime(d.verifiedAt)}</span>
          ) : null}
          {d.reason ? <span> ({d.reason})</span> : null}
        </li>
      ))}
    </ul>
  );
}

function stageOf(d: RunDestination): string {
  const stage = STAGES[d.state] ?? d.state;
  const parts = [stage];
  if (typeof d.shards === 'number' && (d.state === 'writing' || d.state === 'written'))
    parts.push(`${d.shards} shard${d.shards === 1 ? '' : 's'} stored`);
  if (typeof d.bytes === 'number' && d.state !== 'pending') parts.push(formatBytes(d.bytes));
  return parts.join(' · ');
}

/** Re-renders every second while mounted (elapsed time of a run in flight). */
function useTick(active: boolean): void {
  const [, set] = useState(0);
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => set((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [active]);
}

export function LiveProgress({ run }: { run: RunObject }) {
  useTick(true);
  const dests = Object.entries(run.destinations);
  const done = dests.filter(([, d]) => d.state === 'verified').length;
  return (
    <section className="panel live-run" aria-labelledby="live-run-title">
      <h2 id="live-run-title">
        Run in progress: <StatusBadge status={run.status} />
      </h2>
      <p aria-live="polite">
        Started {formatTime(run.startedAt)} ({run.trigger}), running for {elapsed(run.startedAt)}.
        {run.status === 'parked' && run.retryAt
          ? ` Parked: a destination or the source asked to slow down; the next attempt is at ${formatTime(run.retryAt)}.`
          : ''}
        {run.strikes > 0
          ? ` Resumed after an interruption ${run.strikes} time${run.strikes === 1 ? '' : 's'}.`
          : ''}
      </p>
      {dests.length > 0 ? (
        <progress
          max={dests.length}
          value={done}
          aria-label={`Destinations verified: ${done} of ${dests.length}`}
        />
      ) : (
        <progress aria-label="Run starting" />
      )}
      <ul className="jobs-plain">
        {dests.map(([id, d]) => (
          <li key={id}>
            <strong>{id}</strong>: {stageOf(d)}
          </li>
        ))}
      </ul>
      <p className="muted">
        Records and bytes are counted when the archive is read back at the end of the run.
      </p>
    </section>
  );
}

export function RunHistory({ jobId }: { jobId: string }) {
  const history = useHistory(jobId);
  const runs = history.data?.runs ?? [];
  const live = runs.find((r) => runInFlight(r));
  return (
    <>
      {live ? <LiveProgress run={live} /> : null}
      <section aria-labelledby="history-title">
        <h2 id="history-title">Run history</h2>
        {history.isPending ? <Loading what="Loading runs" /> : null}
        <ErrorBox error={history.error} onRetry={() => void history.refetch()} />
        {history.data && runs.length === 0 ? <p className="muted">This job has not run yet.</p> : null}
        {runs.length > 0 ? (
          <>
            <TableWrap label="Run history table">
              <table className="runs-table">
                <caption className="jobs-sr-only">Runs of {jobId}, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Started</th>
                    <th scope="col">Status</th>
                    <th scope="col">Trigger</th>
                    <th scope="col">Duration</th>
                    <th scope="col">Records</th>
                    <th scope="col">Size</th>
                    <th scope="col">Warnings</th>
                    <th scope="col">Destinations</th>
                    <th scope="col">Failure</th>
                  </tr>
                </thead>
                <tbody>
                  {runs.map((r) => (
                    <tr key={r.runId} data-run-id={r.runId}>
                      <th scope="row">
                        {formatTime(r.startedAt)}
                        <br />
                        <code className="run-id">{r.runId}</code>
                      </th>
                      <td>
                        <StatusBadge status={r.status} />
                        {r.unchangedFrom ? (
                          <div className="muted">unchanged, data in {r.unchangedFrom}</div>
                        ) : null}
                        {r.prunedAt ? <div className="muted">pruned {formatTime(r.prunedAt)}</div> : null}
                      </td>
                      <td>{r.trigger}</td>
                      <td className="jobs-nowrap">
                        {r.finishedAt ? elapsed(r.startedAt, r.finishedAt) : 'in flight'}
                      </td>
                      <td>{r.finishedAt ? r.records : '–'}</td>
                      <td className="jobs-nowrap">{r.finishedAt ? formatBytes(r.bytes) : '–'}</td>
                      <td>{r.warnings}</td>
                      <td>
                        <DestinationStates run={r} />
                      </td>
                      <td>
                        {r.reason ? (
                          <>
                            {r.reason}
                            {r.causeDigest ? (
                              <div className="muted">
                                cause digest <code>{r.causeDigest}</code>
                              </div>
                            ) : null}
                          </>
                        ) : (
                          <span className="muted">–</span>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
            {history.data?.runsRolledOverCount ? (
              <p className="muted">
                {history.data.runsRolledOverCount} older run
                {history.data.runsRolledOverCount === 1 ? '' : 's'} rolled out of the history ring.
              </p>
            ) : null}
          </>
        ) : null}
      </section>
    </>
  );
}

/** A `datetime-local` value (local time) as RFC 3339 UTC, or null when it is not a time. */
function rfc3339(local: string): string | null {
  if (!local) return null;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

export function PointInTime({ jobId }: { jobId: string }) {
  const [value, setValue] = useState('');
  const [at, setAt] = useState<string | null>(null);
  const [invalid, setInvalid] = useState(false);
  const resultId = useId();
  const lookup = useQuery({
    queryKey: ['runs-at', jobId, at],
    queryFn: () =>
      api.get<RunAt>(`/admin/runs/at?job=${encodeURIComponent(jobId)}&at=${encodeURIComponent(at ?? '')}`),
    enabled: at !== null,
    staleTime: 0,
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const iso = rfc3339(value);
    setInvalid(iso === null);
    setAt(iso);
  };
  const data = lookup.data;
  return (
    <section aria-labelledby="pit-title">
      <h2 id="pit-title">Point in time</h2>
      <p className="muted">
        The latest successful run at or before a time: what a restore to that moment would use.
      </p>
      <form className="row pit-form" onSubmit={submit} noValidate>
        <Field label="Time (your local time)">
          {(id) => (
            <input
              id={id}
              type="datetime-local"
              step={1}
              value={value}
              aria-invalid={invalid || undefined}
              onChange={(e) => setValue(e.target.value)}
            />
          )}
        </Field>
        <button type="submit">Look up</button>
      </form>
      {invalid ? (
        <div className="msg msg-error" role="alert">
          Pick a date and time first.
        </div>
      ) : null}
      <ErrorBox error={lookup.error} onRetry={() => void lookup.refetch()} />
      {at && lookup.isFetching ? <Loading what="Looking up" /> : null}
      {data && !lookup.isFetching ? (
        <div id={resultId} className="panel pit-result" role="status">
          {data.found ? (
            <>
              <p>
                <strong>Found</strong>: run <code>{data.run.runId}</code> is the latest successful run at{' '}
                {formatTime(data.at)}.
              </p>
              <dl className="facts">
                <dt>Started</dt>
                <dd>{formatTime(data.run.startedAt)}</dd>
                <dt>Finished</dt>
                <dd>{formatTime(data.run.finishedAt)}</dd>
                <dt>Records</dt>
                <dd>{data.run.records}</dd>
                <dt>Size</dt>
                <dd>{formatBytes(data.run.bytes)}</dd>
                {data.run.unchangedFrom ? (
                  <>
                    <dt>Archive</dt>
                    <dd>
                      unchanged source: data in <code>{data.run.unchangedFrom}</code>
                    </dd>
                  </>
                ) : null}
                <dt>Destinations</dt>
                <dd>
                  <DestinationStates run={data.run} />
                </dd>
              </dl>
            </>
          ) : (
            <p>
              <strong>No successful run</strong> at or before {formatTime(data.at)}.{' '}
              {data.window
                ? `The engine holds ${data.window.count} run${data.window.count === 1 ? '' : 's'} of this job, started from ${formatTime(data.window.oldest)} to ${formatTime(data.window.newest)}.`
                : 'The engine holds no run of this job.'}
            </p>
          )}
        </div>
      ) : null}
    </section>
  );
}
