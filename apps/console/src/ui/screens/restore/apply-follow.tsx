/**
 * Following one apply to its end: polls `GET /admin/restore/applies?id=` every second while it
 * runs, shows its phase and counts, offers cancel (running or interrupted) and resume
 * (interrupted), and shows the receipt when it ends.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId } from 'react';
import { api } from '../../api/client.ts';
import { can, useSignedIn } from '../../auth/session.tsx';
import { ErrorBox, formatBytes, formatTime, Loading, Notice } from '../../components/ui.tsx';
import { explain, PlanHash, plural, StatusBadge } from './shared.tsx';
import type { ApplyStarted, ApplyView, CancelReply } from './types.ts';

export const applyKey = (id: string) => ['restore', 'apply', id] as const;

const PHASES: Record<string, string> = {
  verify: 'Phase one: verifying every record (nothing written yet)',
  write: 'Phase two: writing each record after checking it again',
  done: 'Finishing',
};

export function ApplyFollow({ applyId }: { applyId: string }) {
  const who = useSignedIn();
  const client = useQueryClient();
  const headingId = useId();
  const view = useQuery({
    queryKey: applyKey(applyId),
    queryFn: () => api.get<ApplyView>(`/admin/restore/applies?id=${encodeURIComponent(applyId)}`),
    refetchInterval: (q) => (q.state.data && q.state.data.status !== 'running' ? false : 1000),
  });
  const cancel = useMutation({
    mutationFn: () => api.post<CancelReply>('/admin/restore/cancel', { applyId }),
    onSettled: () => client.invalidateQueries({ queryKey: applyKey(applyId) }),
  });
  const resume = useMutation({
    mutationFn: () => api.post<ApplyStarted>('/admin/restore/resume', { applyId }),
    onSettled: () => client.invalidateQueries({ queryKey: applyKey(applyId) }),
  });
  const mayApply = can(who, 'restore.apply');
  const v = view.data;
  const p = v?.progress;
  const r = v?.receipt;
  return (
    <section className="panel" aria-labelledby={headingId} aria-busy={v?.status === 'running'}>
      <h3 id={headingId}>
        Apply <code>{applyId}</code>
      </h3>
      {view.isPending ? <Loading what="Reading the apply" /> : null}
      <ErrorBox error={view.error} onRetry={() => void view.refetch()} />
      {v ? (
        <>
          <p role="status" aria-live="polite" data-testid="apply-status">
            Status: <StatusBadge status={v.status} />
            {v.status === 'running' && p ? ` · ${PHASES[p.phase] ?? p.phase}` : ''}
          </p>
          {v.status === 'running' && p ? (
            <>
              <progress aria-label="Apply progress" max={Math.max(1, p.total)} value={p.done} />
              <p className="muted">
                {p.done} of {p.total} · {p.written} written · {p.skipped} skipped · {p.failed} failed ·{' '}
                {formatBytes(p.bytes)}
              </p>
            </>
          ) : null}
          {v.status === 'interrupted' ? (
            <Notice kind="warn">
              The engine stopped while this apply ran (interrupted at {formatTime(v.interruptedAt)});{' '}
              {plural(v.recordedWritten, 'record')} were written. It does not resume by itself: resume it
              (everything is verified again and only the rest is written), or cancel it.
            </Notice>
          ) : null}
          {v.status === 'error' ? (
            <Notice kind="warn">The apply failed: {v.error ?? 'no reason given'}.</Notice>
          ) : null}
          {r ? <Receipt view={v} /> : null}
          <dl className="facts">
            <dt>Plan hash</dt>
            <dd>
              <PlanHash hash={v.planHash} />
            </dd>
            <dt>Job and run</dt>
            <dd>
              {v.job ?? '–'} · <code>{v.runId}</code>
            </dd>
            <dt>Started</dt>
            <dd>{formatTime(v.startedAt)}</dd>
            {v.attempts > 1 ? (
              <>
                <dt>Attempts</dt>
                <dd>{v.attempts}</dd>
              </>
            ) : null}
          </dl>
          {mayApply && (v.status === 'running' || v.status === 'interrupted') ? (
            <div className="row">
              {v.status === 'interrupted' ? (
                <button
                  type="button"
                  className="primary"
                  disabled={resume.isPending}
                  onClick={() => resume.mutate()}
                >
                  Resume apply
                </button>
              ) : null}
              <button
                type="button"
                className="danger"
                disabled={cancel.isPending}
                onClick={() => cancel.mutate()}
              >
                Cancel apply
              </button>
              <small className="muted">Records already written stay in the target.</small>
            </div>
          ) : null}
          {cancel.data && cancel.data.status !== 'running' && cancel.data.status !== 'cancelled' ? (
            <Notice>The apply had already ended ({cancel.data.status}) when the cancel arrived.</Notice>
          ) : null}
          <ErrorBox error={explain(cancel.error)} />
          <ErrorBox error={explain(resume.error)} />
        </>
      ) : null}
    </section>
  );
}

function Receipt({ view }: { view: ApplyView }) {
  const r = view.receipt!;
  const failedId = useId();
  const kind = r.status === 'succeeded' ? 'ok' : 'warn';
  return (
    <>
      <Notice kind={kind}>
        {r.status === 'succeeded'
          ? `Restore finished: ${plural(r.written, 'record')} (${formatBytes(r.bytes)}) written to ${r.target.description}.`
          : r.status === 'cancelled'
            ? `Restore cancelled: ${plural(r.written, 'record')} had been written and stay in the target.`
            : r.status === 'aborted'
              ? `Restore aborted in phase ${r.failure?.phase === 'verify' ? 'one (verify): nothing was written' : 'two (write)'}: ${r.failure?.reason ?? 'no reason given'}${r.failure?.record ? ` (record ${r.failure.record})` : ''}.`
              : `Restore finished with ${plural(r.failedCount, 'failure')}: ${plural(r.written, 'record')} written.`}
      </Notice>
      <dl className="facts" data-testid="receipt">
        <dt>Written</dt>
        <dd>
          {r.written} of {r.plannedWrites}
          {r.alreadyDone > 0 ? ` (+${r.alreadyDone} by an earlier attempt)` : ''}
        </dd>
        <dt>Bytes written</dt>
        <dd>{formatBytes(r.bytes)}</dd>
        <dt>Skipped</dt>
        <dd>{r.skippedCount}</dd>
        <dt>Failed</dt>
        <dd>{r.failedCount}</dd>
        <dt>Verified first</dt>
        <dd>{plural(r.recordsVerified, 'record')}</dd>
        <dt>Finished</dt>
        <dd>{formatTime(r.finishedAt)}</dd>
      </dl>
      {r.failed.length > 0 ? (
        <div className="table-wrap">
          <table aria-labelledby={failedId}>
            <caption id={failedId}>Records that failed</caption>
            <thead>
              <tr>
                <th scope="col">Record</th>
                <th scope="col">Why</th>
              </tr>
            </thead>
            <tbody>
              {r.failed.map((f) => (
                <tr key={f.name}>
                  <td className="record-name">{f.name}</td>
                  <td>
                    {f.reason} <small className="muted">({f.code})</small>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}
