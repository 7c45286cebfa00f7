/**
 * The jobs screens: the list (`GET /admin/jobs`, each job with its state and last run), a new job
 * (`POST /admin/jobs` with `ifMatchRev: null`), and one job's page: its settings, edit in place
 * (whole-object upsert with `ifMatchRev`), pause and resume (the job's `enabled` field, written the
 * same way), delete with confirmation (`POST /admin/jobs/delete`), run now (`POST /admin/trigger`),
 * its runs with live progress and the point-in-time lookup (jobs/runs.tsx). Buttons appear only
 * for a role holding their capability (`job.write`, `job.delete`, `run.trigger`). Under
 * configuration approval a save or delete answers 202 `{ pending: true, changeId }`: the page says
 * it waits for a second person and links to the Configuration screen (docs/config-control.md).
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useLocation } from 'wouter';
import { api } from '../api/client.ts';
import { messageOf } from '../api/errors.ts';
import { can, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, formatTime, Loading, Modal, Notice, Page } from '../components/ui.tsx';
import { JobForm } from './jobs/job-form.tsx';
import {
  configOf,
  type DeleteReply,
  describeSeconds,
  fieldLabel,
  historyKey,
  isPendingChange,
  JOBS_KEY,
  type JobRow,
  type JobSource,
  type PendingChangeReply,
  preconditionOf,
  runInFlight,
  type TriggerReply,
  type UpsertReply,
  useHistory,
  useJobs,
} from './jobs/model.ts';
import { PointInTime, RunHistory, StatusBadge, TableWrap } from './jobs/runs.tsx';
import './jobs/jobs.css';

function sourceText(s: JobSource): string {
  switch (s.type) {
    case 'files':
      return `files: ${s.path}`;
    case 'sqlite':
      return `sqlite: ${s.path}${s.tables?.length ? ` (tables ${s.tables.join(', ')})` : ''}`;
    case 'redis':
      return `redis: ${s.connection}${s.db !== undefined ? ` db ${s.db}` : ''}${s.keyPrefix ? ` prefix ${s.keyPrefix}` : ''}`;
    case 's3':
      return `s3: ${s.connection} ${s.bucket}${s.prefix ? `/${s.prefix}` : ''}`;
    default:
      return (s as { type: string }).type;
  }
}

/** A save or delete held for a second person (202 under configuration approval), with where to approve it. */
function PendingNotice({ reply }: { reply: PendingChangeReply }) {
  return (
    <Notice kind="info">
      <strong>Waiting for approval.</strong> {reply.kind === 'job-delete' ? 'Deleting' : 'This change to'} job{' '}
      <code>{reply.id}</code> is pending change <code>{reply.changeId}</code>: configuration approval is on,
      so a second person must approve it on the <Link href="/configuration">Configuration</Link> screen. Until
      then the job stays as it is (the request expires {formatTime(reply.expiresAt)}).
    </Notice>
  );
}

function StateBadge({ row }: { row: JobRow }) {
  return row.state.paused ? (
    <span className="status status-paused">paused</span>
  ) : (
    <span className="status status-active">active</span>
  );
}

export function Jobs() {
  const who = useSignedIn();
  const jobs = useJobs();
  const deleted = (window.history.state as { deletedJob?: string } | null)?.deletedJob;
  return (
    <Page
      title="Jobs"
      actions={
        can(who, 'job.write') ? (
          <Link href="/new-job" className="jobs-button-link">
            New job
          </Link>
        ) : null
      }
    >
      {deleted ? (
        <Notice kind="ok">Job {deleted} was deleted. Its archives stay in their destinations.</Notice>
      ) : null}
      {jobs.isPending ? <Loading what="Loading jobs" /> : null}
      <ErrorBox error={jobs.error} onRetry={() => void jobs.refetch()} />
      {jobs.data && jobs.data.jobs.length === 0 ? (
        <p className="muted">No jobs yet.{can(who, 'job.write') ? ' Create one to start backing up.' : ''}</p>
      ) : null}
      {jobs.data && jobs.data.jobs.length > 0 ? (
        <TableWrap label="Jobs table">
          <table className="jobs-table">
            <caption className="jobs-sr-only">Jobs with their state and last run</caption>
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">State</th>
                <th scope="col">Last run</th>
                <th scope="col">Cadence</th>
                <th scope="col">Source</th>
                <th scope="col">Destinations</th>
              </tr>
            </thead>
            <tbody>
              {jobs.data.jobs.map((row) => {
                const last = row.state.lastRun;
                return (
                  <tr key={row.id} data-job-id={row.id}>
                    <th scope="row">
                      <Link href={`/jobs/${encodeURIComponent(row.id)}`}>{row.name ?? row.id}</Link>
                      {row.name ? <div className="muted">{row.id}</div> : null}
                    </th>
                    <td>
                      <StateBadge row={row} />
                    </td>
                    <td>
                      {last ? (
                        <>
                          <StatusBadge status={last.status} />{' '}
                          <span className="muted">{formatTime(last.finishedAt ?? last.startedAt)}</span>
                          {last.reason ? <div>{last.reason}</div> : null}
                        </>
                      ) : (
                        <span className="muted">never run</span>
                      )}
                    </td>
                    <td>every {describeSeconds(row.cadenceSeconds)}</td>
                    <td className="jobs-break">{sourceText(row.source)}</td>
                    <td>{row.destinations.join(', ')}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
    </Page>
  );
}

export function NewJob() {
  const [, navigate] = useLocation();
  const [pending, setPending] = useState<PendingChangeReply | null>(null);
  return (
    <Page title="New job">
      {pending ? (
        <>
          <PendingNotice reply={pending} />
          <Link href="/jobs">Back to jobs</Link>
        </>
      ) : (
        <JobForm
          mode="create"
          onSaved={(reply) =>
            isPendingChange(reply) ? setPending(reply) : navigate(`/jobs/${encodeURIComponent(reply.id)}`)
          }
          onCancel={() => navigate('/jobs')}
        />
      )}
    </Page>
  );
}

function JobFacts({ row }: { row: JobRow }) {
  return (
    <dl className="facts">
      <dt>ID</dt>
      <dd>
        <code>{row.id}</code>
      </dd>
      <dt>State</dt>
      <dd>
        <StateBadge row={row} />
        {row.state.paused ? <span className="muted"> · no scheduled or manual runs</span> : null}
      </dd>
      <dt>Cadence</dt>
      <dd>every {describeSeconds(row.cadenceSeconds)}</dd>
      <dt>Source</dt>
      <dd className="jobs-break">
        {sourceText(row.source)}
        {row.source.type === 'files' && row.source.include?.length ? (
          <div className="muted">include {row.source.include.join(', ')}</div>
        ) : null}
        {row.source.type === 'files' && row.source.exclude?.length ? (
          <div className="muted">exclude {row.source.exclude.join(', ')}</div>
        ) : null}
      </dd>
      <dt>Destinations</dt>
      <dd>{row.destinations.join(', ')}</dd>
      <dt>Retention</dt>
      <dd>
        {row.retention && (row.retention.keepLast || row.retention.keepDays)
          ? [
              row.retention.keepLast ? `last ${row.retention.keepLast} runs` : null,
              row.retention.keepDays ? `${row.retention.keepDays} days` : null,
            ]
              .filter(Boolean)
              .join(' and ')
          : 'keep every run'}
      </dd>
      <dt>Listing cap</dt>
      <dd>{row.maxEntries ? `${row.maxEntries.toLocaleString()} entries` : 'default (2,000,000 entries)'}</dd>
      <dt>Skip unchanged</dt>
      <dd>{row.skipUnchanged ? 'yes' : 'no'}</dd>
      <dt>Restore test</dt>
      <dd>
        {row.restoreTestCadenceSeconds ? `every ${describeSeconds(row.restoreTestCadenceSeconds)}` : 'off'}
      </dd>
      <dt>Revision</dt>
      <dd>{row.configRev}</dd>
    </dl>
  );
}

/** A refusal of a quick action (pause, delete): the engine's message, and what changed on a 409. */
function ActionError({ error, onReload }: { error: unknown; onReload: () => void }) {
  const p = preconditionOf(error);
  if (!p) return <ErrorBox error={error} />;
  return (
    <div className="msg msg-error conflict" role="alert">
      <p>
        <strong>
          {p.reason === 'base-moved'
            ? 'This job was changed by someone else'
            : p.reason === 'deleted-under-you' || p.reason === 'already-deleted'
              ? 'This job was deleted by someone else'
              : 'The engine refused this change'}
        </strong>{' '}
        since this page loaded it. Nothing was changed.
      </p>
      {p.changedFields.length > 0 ? (
        <p>
          Changed: <span className="changed-fields">{p.changedFields.map(fieldLabel).join(', ')}</span>.
        </p>
      ) : null}
      <p className="muted">{messageOf(error)}</p>
      <button type="button" className="primary" onClick={onReload}>
        Reload the job
      </button>
    </div>
  );
}

export function JobDetail({ params }: { params: Record<string, string | undefined> }) {
  const id = params.id ?? '';
  const who = useSignedIn();
  const client = useQueryClient();
  const [, navigate] = useLocation();
  const jobs = useJobs();
  const history = useHistory(id);
  const row = jobs.data?.jobs.find((j) => j.id === id);
  const [editing, setEditing] = useState(false);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [pending, setPending] = useState<PendingChangeReply | null>(null);
  const clearMessages = () => {
    setNotice(null);
    setPending(null);
  };

  const refresh = () =>
    Promise.all([
      client.invalidateQueries({ queryKey: JOBS_KEY }),
      client.invalidateQueries({ queryKey: historyKey(id) }),
    ]);

  const trigger = useMutation({
    mutationFn: () => api.post<TriggerReply>('/admin/trigger', { id }),
    onMutate: clearMessages,
    onSuccess: async (reply) => {
      setNotice(`Run ${reply.runId} started.`);
      await refresh();
    },
  });

  const pause = useMutation({
    mutationFn: (target: JobRow) =>
      api.post<UpsertReply | PendingChangeReply>('/admin/jobs', {
        ...configOf(target),
        enabled: target.state.paused,
        ifMatchRev: target.configRev,
      }),
    onMutate: clearMessages,
    onSuccess: async (reply) => {
      if (isPendingChange(reply)) setPending(reply);
      else setNotice(reply.job.enabled ? 'The job is active again.' : 'The job is paused: it will not run.');
      await refresh();
    },
  });

  const remove = useMutation({
    mutationFn: (target: JobRow) =>
      api.post<DeleteReply | PendingChangeReply>('/admin/jobs/delete', {
        id: target.id,
        ifMatchRev: target.configRev,
      }),
    onSuccess: async (reply) => {
      setConfirmDelete(false);
      if (isPendingChange(reply)) {
        clearMessages();
        setPending(reply);
        return;
      }
      navigate('/jobs', { state: { deletedJob: reply.id } });
      client.removeQueries({ queryKey: historyKey(id) });
      await client.invalidateQueries({ queryKey: JOBS_KEY });
    },
  });

  const reloadAfterConflict = () => {
    pause.reset();
    remove.reset();
    void refresh();
  };

  if (jobs.isPending)
    return (
      <Page title={`Job ${id}`}>
        <Loading what="Loading the job" />
      </Page>
    );
  if (!row)
    return (
      <Page title={`Job ${id}`}>
        <ErrorBox error={jobs.error} onRetry={() => void jobs.refetch()} />
        {jobs.data ? (
          <>
            <p>There is no job with the id {id} (it may have been deleted).</p>
            <Link href="/jobs">Back to jobs</Link>
          </>
        ) : null}
      </Page>
    );

  const running = history.data?.runs.find((r) => runInFlight(r));
  const actions = editing ? null : (
    <>
      {can(who, 'run.trigger') ? (
        <button
          type="button"
          className="primary"
          disabled={trigger.isPending || row.state.paused || !!running}
          onClick={() => trigger.mutate()}
          aria-describedby={row.state.paused || running ? 'run-now-why' : undefined}
        >
          {trigger.isPending ? 'Starting…' : 'Run now'}
        </button>
      ) : null}
      {can(who, 'job.write') ? (
        <>
          <button type="button" onClick={() => setEditing(true)}>
            Edit
          </button>
          <button type="button" disabled={pause.isPending} onClick={() => pause.mutate(row)}>
            {row.state.paused ? 'Resume' : 'Pause'}
          </button>
        </>
      ) : null}
      {can(who, 'job.delete') ? (
        <button
          type="button"
          className="danger"
          onClick={() => {
            remove.reset();
            setConfirmDelete(true);
          }}
        >
          Delete
        </button>
      ) : null}
    </>
  );

  return (
    <Page title={editing ? `Edit ${row.name ?? row.id}` : (row.name ?? row.id)} actions={actions}>
      <p>
        <Link href="/jobs">← All jobs</Link>
      </p>
      {notice ? <Notice kind="ok">{notice}</Notice> : null}
      {pending ? <PendingNotice reply={pending} /> : null}
      {!editing && can(who, 'run.trigger') && (row.state.paused || running) ? (
        <p id="run-now-why" className="muted">
          {row.state.paused ? 'Run now is off while the job is paused.' : 'A run is in flight.'}
        </p>
      ) : null}
      <ErrorBox error={trigger.error} />
      {pause.error ? <ActionError error={pause.error} onReload={reloadAfterConflict} /> : null}
      {editing ? (
        <JobForm
          mode="edit"
          initial={configOf(row)}
          initialRev={row.configRev}
          onSaved={(reply) => {
            setEditing(false);
            clearMessages();
            if (isPendingChange(reply)) setPending(reply);
            else setNotice(`Saved (revision ${reply.configRev}).`);
          }}
          onCancel={() => setEditing(false)}
        />
      ) : (
        <>
          <section aria-labelledby="settings-title">
            <h2 id="settings-title">Settings</h2>
            <JobFacts row={row} />
          </section>
          <RunHistory jobId={row.id} />
          <PointInTime jobId={row.id} />
        </>
      )}
      <Modal open={confirmDelete} title={`Delete job ${row.id}?`} onClose={() => setConfirmDelete(false)}>
        <p>
          Its schedule stops and its run history is dropped. Archives already written stay in their
          destinations and can still be restored.
        </p>
        {remove.error ? <ActionError error={remove.error} onReload={reloadAfterConflict} /> : null}
        <div className="row">
          <button
            type="button"
            className="danger"
            disabled={remove.isPending}
            onClick={() => remove.mutate(row)}
          >
            {remove.isPending ? 'Deleting…' : 'Delete job'}
          </button>
          <button type="button" onClick={() => setConfirmDelete(false)}>
            Cancel
          </button>
        </div>
      </Modal>
    </Page>
  );
}
