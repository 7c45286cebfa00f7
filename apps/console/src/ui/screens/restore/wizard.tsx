/**
 * The restore wizard's steps: (1) a job and a run (from the history, or the latest successful run
 * at a time through `GET /admin/runs/at`), (2) selectors and the target, then the dry run
 * (`POST /admin/restore`), (3) the plan and what the approval policy needs next (apply, or request
 * approval and wait for it), (4) the apply followed to its end.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useId, useState } from 'react';
import { api } from '../../api/client.ts';
import { can, useSignedIn } from '../../auth/session.tsx';
import { ErrorBox, Field, formatBytes, formatTime, Loading, Modal, Notice } from '../../components/ui.tsx';
import { explain, PlanView, person, plural } from './shared.tsx';
import type {
  ApplyStarted,
  ApprovalReply,
  ApprovalsReply,
  JobHistory,
  JobRow,
  OnExisting,
  RestorePlan,
  RestoreRequestBody,
  RunAtReply,
  RunObject,
  StatusFacts,
} from './types.ts';

export const APPROVALS_KEY = ['restore', 'approvals'] as const;

export function useJobs() {
  return useQuery({ queryKey: ['jobs'], queryFn: () => api.get<{ jobs: JobRow[] }>('/admin/jobs') });
}

export function useApprovals(poll: number | false = false) {
  return useQuery({
    queryKey: APPROVALS_KEY,
    queryFn: () => api.get<ApprovalsReply>('/admin/restore/approvals'),
    refetchInterval: poll,
  });
}

const runLabel = (r: RunObject) =>
  `${formatTime(r.finishedAt ?? r.startedAt)} · ${plural(r.records, 'record')} · ${formatBytes(r.bytes)} · ${r.runId}`;

// ---------------------------------------------------------------------------------------------
// Step 1: job and run

export interface SourceChoice {
  job: string;
  sourceType: string;
  runId: string;
  /** How the run was chosen, for the summary line. */
  how: string;
}

export function SourceStep({
  initial,
  onNext,
}: {
  initial: SourceChoice | null;
  onNext: (choice: SourceChoice) => void;
}) {
  const jobs = useJobs();
  const [job, setJob] = useState(initial?.job ?? '');
  const [mode, setMode] = useState<'history' | 'time'>('history');
  const [runId, setRunId] = useState(initial?.runId ?? '');
  const [at, setAt] = useState('');
  const history = useQuery({
    queryKey: ['history', job],
    queryFn: () => api.get<JobHistory>(`/admin/history?id=${encodeURIComponent(job)}`),
    enabled: job !== '',
  });
  const runAt = useMutation({
    mutationFn: (iso: string) =>
      api.get<RunAtReply>(`/admin/runs/at?job=${encodeURIComponent(job)}&at=${encodeURIComponent(iso)}`),
    onSuccess: (r) => setRunId(r.found ? r.run.runId : ''),
  });
  const okRuns = (history.data?.runs ?? []).filter((r) => r.status === 'ok' && r.prunedAt === null);
  const jobRow = jobs.data?.jobs.find((j) => j.id === job);
  const modeName = useId();

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!jobRow || !runId) return;
    onNext({
      job,
      sourceType: jobRow.source.type,
      runId,
      how:
        mode === 'time' && runAt.data?.found
          ? `the latest successful run at ${formatTime(runAt.data.at)}`
          : 'chosen from the history',
    });
  };

  return (
    <form onSubmit={submit} aria-describedby={`${modeName}-intro`}>
      <p id={`${modeName}-intro`} className="muted">
        Choose the job to restore and the backup run to read it from.
      </p>
      {jobs.isPending ? <Loading what="Loading jobs" /> : null}
      <ErrorBox error={jobs.error} onRetry={() => void jobs.refetch()} />
      {jobs.data && jobs.data.jobs.length === 0 ? (
        <Notice>There are no jobs yet, so there is nothing to restore.</Notice>
      ) : null}
      {jobs.data && jobs.data.jobs.length > 0 ? (
        <Field label="Job">
          {(id) => (
            <select
              id={id}
              value={job}
              onChange={(e) => {
                setJob(e.target.value);
                setRunId('');
                runAt.reset();
              }}
            >
              <option value="">Choose a job</option>
              {jobs.data.jobs.map((j) => (
                <option key={j.id} value={j.id}>
                  {j.id} ({j.source.type})
                </option>
              ))}
            </select>
          )}
        </Field>
      ) : null}
      {job ? (
        <fieldset className="choice">
          <legend>Which point in time</legend>
          <label className="check">
            <input
              type="radio"
              name={modeName}
              checked={mode === 'history'}
              onChange={() => {
                setMode('history');
                setRunId('');
              }}
            />
            A run from the history
          </label>
          <label className="check">
            <input
              type="radio"
              name={modeName}
              checked={mode === 'time'}
              onChange={() => {
                setMode('time');
                setRunId('');
                runAt.reset();
              }}
            />
            The latest successful run at a time
          </label>
        </fieldset>
      ) : null}
      {job && mode === 'history' ? (
        <>
          {history.isPending ? <Loading what="Loading the run history" /> : null}
          <ErrorBox error={history.error} onRetry={() => void history.refetch()} />
          {history.data && okRuns.length === 0 ? (
            <Notice kind="warn">This job has no successful run to restore from yet.</Notice>
          ) : null}
          {okRuns.length > 0 ? (
            <Field label="Run" hint="Successful runs whose archives are still kept, newest first.">
              {(id, hint) => (
                <select
                  id={id}
                  aria-describedby={hint}
                  value={runId}
                  onChange={(e) => setRunId(e.target.value)}
                >
                  <option value="">Choose a run</option>
                  {okRuns.map((r) => (
                    <option key={r.runId} value={r.runId}>
                      {runLabel(r)}
                    </option>
                  ))}
                </select>
              )}
            </Field>
          ) : null}
        </>
      ) : null}
      {job && mode === 'time' ? (
        <>
          <Field
            label="Time"
            hint="Your local time; the engine picks the latest successful run at or before it."
          >
            {(id, hint) => (
              <input
                id={id}
                type="datetime-local"
                step={1}
                aria-describedby={hint}
                value={at}
                onChange={(e) => {
                  setAt(e.target.value);
                  setRunId('');
                  runAt.reset();
                }}
              />
            )}
          </Field>
          <div className="row">
            <button
              type="button"
              disabled={!at || runAt.isPending}
              onClick={() => {
                const d = new Date(at);
                if (!Number.isNaN(d.getTime())) runAt.mutate(d.toISOString());
              }}
            >
              Find the run
            </button>
          </div>
          <ErrorBox error={runAt.error} />
          {runAt.data?.found ? <Notice kind="ok">Found: {runLabel(runAt.data.run)}.</Notice> : null}
          {runAt.data && !runAt.data.found ? (
            <Notice kind="warn">
              No successful run at or before {formatTime(runAt.data.at)}.{' '}
              {runAt.data.window
                ? `The kept runs span ${formatTime(runAt.data.window.oldest)} to ${formatTime(runAt.data.window.newest)} (${plural(runAt.data.window.count, 'run')}).`
                : 'This job has no kept successful run.'}
            </Notice>
          ) : null}
        </>
      ) : null}
      <div className="row">
        <button type="submit" className="primary" disabled={!jobRow || !runId}>
          Next: what to restore
        </button>
      </div>
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// Step 2: selectors and target, then the dry run

export interface SelectionChoice {
  include: string;
  exclude: string;
  recordName: string;
  maxRecords: string;
  onExisting: OnExisting;
  namespaceId: string;
  bucketName: string;
  binding: string;
  destinationId: string;
  tables: string;
  createOnly: boolean;
}

export const EMPTY_SELECTION: SelectionChoice = {
  include: '',
  exclude: '',
  recordName: '',
  maxRecords: '',
  onExisting: 'overwrite',
  namespaceId: '',
  bucketName: '',
  binding: '',
  destinationId: '',
  tables: '',
  createOnly: false,
};

const lines = (s: string) =>
  s
    .split('\n')
    .map((x) => x.trim())
    .filter((x) => x !== '');

/** The RestoreRequest the choices make (only the fields set: the engine refuses unknown or empty ones). */
export function buildRequest(src: SourceChoice, sel: SelectionChoice): RestoreRequestBody {
  const req: RestoreRequestBody = { runId: src.runId, onExisting: sel.onExisting };
  if (sel.recordName.trim()) req.recordName = sel.recordName.trim();
  else {
    if (lines(sel.include).length) req.include = lines(sel.include);
    if (lines(sel.exclude).length) req.exclude = lines(sel.exclude);
  }
  const max = Number(sel.maxRecords);
  if (sel.maxRecords.trim() && Number.isInteger(max) && max >= 1) req.maxRecords = max;
  const target: NonNullable<RestoreRequestBody['target']> = {};
  if (sel.binding) target.binding = sel.binding;
  if (sel.namespaceId.trim()) target.namespaceId = sel.namespaceId.trim();
  if (src.sourceType === 's3' && sel.bucketName.trim()) target.bucketName = sel.bucketName.trim();
  if (Object.keys(target).length) req.target = target;
  if (sel.destinationId) req.destinationId = sel.destinationId;
  const tables = sel.tables
    .split(/[\s,]+/)
    .map((x) => x.trim())
    .filter(Boolean);
  if (src.sourceType === 'sqlite' && tables.length)
    req.d1Tables = { database: src.job, tables, createOnly: sel.createOnly };
  return req;
}

const TARGET_FIELD: Record<string, { label: string; hint: string }> = {
  files: {
    label: 'Target directory',
    hint: 'An absolute directory inside the engine’s restore roots (ENGINE_RESTORE_ROOTS). Empty: back into the job’s own source directory.',
  },
  sqlite: {
    label: 'Target database file',
    hint: 'A new database file inside the engine’s restore roots: a sqlite restore writes only into a database with no tables.',
  },
  redis: {
    label: 'Target database number',
    hint: 'A database number on the same server; the job’s key prefix is kept. Empty: the job’s own database.',
  },
  s3: { label: 'Target key prefix', hint: 'A key prefix in the bucket. Empty: the job’s own prefix.' },
};

export function SelectionStep({
  source,
  initial,
  onBack,
  onPlanned,
}: {
  source: SourceChoice;
  initial: SelectionChoice;
  onBack: () => void;
  onPlanned: (selection: SelectionChoice, request: RestoreRequestBody, plan: RestorePlan) => void;
}) {
  const [sel, setSel] = useState<SelectionChoice>(initial);
  const set = <K extends keyof SelectionChoice>(k: K, v: SelectionChoice[K]) =>
    setSel((s) => ({ ...s, [k]: v }));
  const jobs = useJobs();
  const status = useQuery({ queryKey: ['status'], queryFn: () => api.get<StatusFacts>('/admin/status') });
  const dryRun = useMutation({
    mutationFn: (req: RestoreRequestBody) => api.post<RestorePlan>('/admin/restore', req),
  });
  const onExistingName = useId();
  const type = source.sourceType;
  const targetField = TARGET_FIELD[type] ?? { label: 'Target namespace', hint: 'Empty: the job’s own.' };
  const sameType = (jobs.data?.jobs ?? []).filter((j) => j.source.type === type && j.id !== source.job);
  const destinations = status.data?.destinations ?? [];
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const req = buildRequest(source, sel);
    dryRun.mutate(req, { onSuccess: (plan) => onPlanned(sel, req, plan) });
  };
  return (
    <form onSubmit={submit}>
      <p className="muted">
        Restoring <strong>{source.job}</strong> ({type}) from run <code>{source.runId}</code>, {source.how}.
      </p>
      <fieldset>
        <legend>Which records</legend>
        <Field label="Include (prefixes, one per line)" hint="Empty: every record of the run.">
          {(id, hint) => (
            <textarea
              id={id}
              aria-describedby={hint}
              value={sel.include}
              onChange={(e) => set('include', e.target.value)}
            />
          )}
        </Field>
        <Field
          label="Exclude (prefixes, one per line)"
          hint="A record matching an exclude is never restored."
        >
          {(id, hint) => (
            <textarea
              id={id}
              aria-describedby={hint}
              value={sel.exclude}
              onChange={(e) => set('exclude', e.target.value)}
            />
          )}
        </Field>
        <Field label="One record by exact name" hint="When set, include and exclude are ignored.">
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              value={sel.recordName}
              onChange={(e) => set('recordName', e.target.value)}
            />
          )}
        </Field>
        <Field label="At most this many records" hint="Empty: no limit.">
          {(id, hint) => (
            <input
              id={id}
              type="number"
              min={1}
              step={1}
              inputMode="numeric"
              aria-describedby={hint}
              value={sel.maxRecords}
              onChange={(e) => set('maxRecords', e.target.value)}
            />
          )}
        </Field>
        {type === 'sqlite' ? (
          <>
            <Field label="Only these tables (comma separated)" hint="Empty: the whole database.">
              {(id, hint) => (
                <input
                  id={id}
                  aria-describedby={hint}
                  value={sel.tables}
                  onChange={(e) => set('tables', e.target.value)}
                />
              )}
            </Field>
            <label className="check">
              <input
                type="checkbox"
                checked={sel.createOnly}
                onChange={(e) => set('createOnly', e.target.checked)}
              />
              Create only these tables (otherwise the whole schema, rows of these tables only)
            </label>
          </>
        ) : null}
      </fieldset>
      <fieldset>
        <legend>Where to</legend>
        {(type === 'files' || type === 'sqlite') && status.data?.restoreRootsConfigured === false ? (
          <Notice kind="warn">
            This engine has no restore roots (ENGINE_RESTORE_ROOTS), so it refuses every {type} restore. An
            operator sets them on the engine.
          </Notice>
        ) : null}
        {sameType.length > 0 ? (
          <Field label="Into the source of" hint="Another job of the same type may receive the records.">
            {(id, hint) => (
              <select
                id={id}
                aria-describedby={hint}
                value={sel.binding}
                onChange={(e) => set('binding', e.target.value)}
              >
                <option value="">This job ({source.job})</option>
                {sameType.map((j) => (
                  <option key={j.id} value={j.id}>
                    {j.id}
                  </option>
                ))}
              </select>
            )}
          </Field>
        ) : null}
        <Field label={targetField.label} hint={targetField.hint}>
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              value={sel.namespaceId}
              inputMode={type === 'redis' ? 'numeric' : undefined}
              onChange={(e) => set('namespaceId', e.target.value)}
            />
          )}
        </Field>
        {type === 's3' ? (
          <Field
            label="Target bucket"
            hint="Same endpoint and credentials as the job. Empty: the job’s bucket."
          >
            {(id, hint) => (
              <input
                id={id}
                aria-describedby={hint}
                value={sel.bucketName}
                onChange={(e) => set('bucketName', e.target.value)}
              />
            )}
          </Field>
        ) : null}
        {destinations.length > 1 ? (
          <Field label="Read from destination">
            {(id) => (
              <select
                id={id}
                value={sel.destinationId}
                onChange={(e) => set('destinationId', e.target.value)}
              >
                <option value="">Default</option>
                {destinations.map((d) => (
                  <option key={d} value={d}>
                    {d}
                  </option>
                ))}
              </select>
            )}
          </Field>
        ) : null}
      </fieldset>
      <fieldset className="choice">
        <legend>Records already in the target</legend>
        <label className="check">
          <input
            type="radio"
            name={onExistingName}
            checked={sel.onExisting === 'overwrite'}
            onChange={() => set('onExisting', 'overwrite')}
          />
          Overwrite them
        </label>
        <label className="check">
          <input
            type="radio"
            name={onExistingName}
            checked={sel.onExisting === 'skip'}
            onChange={() => set('onExisting', 'skip')}
          />
          Keep them (skip those records)
        </label>
      </fieldset>
      <p className="muted">
        The dry run reads and checks every record in scope and writes nothing. It answers the plan an apply
        would carry out.
      </p>
      <ErrorBox error={explain(dryRun.error)} />
      <div className="row">
        <button type="button" onClick={onBack}>
          Back
        </button>
        <button type="submit" className="primary" disabled={dryRun.isPending}>
          {dryRun.isPending ? 'Running the dry run…' : 'Run the dry run'}
        </button>
      </div>
    </form>
  );
}

// ---------------------------------------------------------------------------------------------
// Step 3: the plan and what the approval policy needs

export function PlanStep({
  plan,
  request,
  onBack,
  onApplied,
}: {
  plan: RestorePlan;
  request: RestoreRequestBody;
  onBack: () => void;
  onApplied: (applyId: string) => void;
}) {
  return (
    <>
      <PlanView plan={plan} />
      <Decision plan={plan} request={request} onApplied={onApplied} />
      <div className="row">
        <button type="button" onClick={onBack}>
          Change the selection
        </button>
      </div>
    </>
  );
}

function Decision({
  plan,
  request,
  onApplied,
}: {
  plan: RestorePlan;
  request: RestoreRequestBody;
  onApplied: (applyId: string) => void;
}) {
  const who = useSignedIn();
  const client = useQueryClient();
  const headingId = useId();
  const [confirming, setConfirming] = useState(false);
  const hash = plan.planHash;
  // While a request for this plan waits for its approver, look again every 3 seconds.
  const approvals = useQuery({
    queryKey: APPROVALS_KEY,
    queryFn: () => api.get<ApprovalsReply>('/admin/restore/approvals'),
    refetchInterval: (q) =>
      q.state.data?.approvalRequired &&
      q.state.data.approvals.some((a) => a.subjectHash === hash && a.status === 'pending')
        ? 3000
        : false,
  });
  const mine = (approvals.data?.approvals ?? []).filter((a) => hash !== null && a.subjectHash === hash);
  const current = mine.find((a) => a.status === 'pending' || a.status === 'approved') ?? mine[0];

  const refresh = () => client.invalidateQueries({ queryKey: APPROVALS_KEY });
  const apply = useMutation({
    mutationFn: () =>
      api.post<ApplyStarted>('/admin/restore', { ...request, confirm: true, planHash: hash ?? undefined }),
    onSuccess: (r) => {
      setConfirming(false);
      void refresh();
      onApplied(r.applyId);
    },
    onError: () => setConfirming(false),
  });
  const ask = useMutation({
    mutationFn: () => api.post<ApprovalReply>('/admin/restore/request', request),
    onSettled: refresh,
  });
  const withdraw = useMutation({
    mutationFn: () =>
      api.post<ApprovalReply>('/admin/restore/reject', {
        planHash: hash,
        reason: 'withdrawn by the requester',
      }),
    onSettled: refresh,
  });

  const mayApply = can(who, 'restore.apply');
  const mayRequest = can(who, 'restore.request');
  const blocked = !plan.ok || hash === null || plan.advisories.length > 0;
  const cannotApply = (
    <p>
      Your role ({who.role}) cannot apply a restore: that needs the <code>restore.apply</code> capability.
    </p>
  );
  const applyButton = (
    <button type="button" className="primary" disabled={apply.isPending} onClick={() => setConfirming(true)}>
      Apply restore…
    </button>
  );

  let body: ReactNode;
  if (approvals.isPending) body = <Loading what="Reading the approval policy" />;
  else if (!approvals.data) body = null;
  else if (blocked)
    body = (
      <p>Nothing can be applied or requested from this plan: change the choices and run the dry run again.</p>
    );
  else if (!approvals.data.approvalRequired)
    body = (
      <>
        <p>
          Approval is off on this engine, so a person with <code>restore.apply</code> applies this plan
          directly. The apply checks every record again before writing it.
        </p>
        {mayApply ? <div className="row">{applyButton}</div> : cannotApply}
      </>
    );
  else {
    const policy = (
      <p>
        Approval is on: an owner requires a second person (with <code>restore.approve</code>) to approve this
        exact plan, by its hash, before it can be applied
        {approvals.data.minDelaySeconds > 0
          ? `, no sooner than ${plural(approvals.data.minDelaySeconds, 'second')} after the request`
          : ''}
        .
      </p>
    );
    const requestButton = mayRequest ? (
      <div className="row">
        <button type="button" className="primary" disabled={ask.isPending} onClick={() => ask.mutate()}>
          Request approval
        </button>
      </div>
    ) : (
      <p>
        Your role ({who.role}) cannot request a restore: that needs the <code>restore.request</code>{' '}
        capability.
      </p>
    );
    switch (current?.status) {
      case 'pending':
        body = (
          <>
            {policy}
            <Notice>
              Waiting for approval: requested by {person(current.requestedByEmail, current.requestedBy)} at{' '}
              {formatTime(current.requestedAt)}. An approver sees it on the Approvals screen; this page
              updates when they decide.
            </Notice>
            {current.requestedBy === who.subject ? (
              <div className="row">
                <button type="button" disabled={withdraw.isPending} onClick={() => withdraw.mutate()}>
                  Withdraw the request
                </button>
              </div>
            ) : null}
          </>
        );
        break;
      case 'approved':
        body = (
          <>
            <Notice kind="ok">
              Approved by {person(current.decidedByEmail, current.decidedBy)} at{' '}
              {formatTime(current.decidedAt)}. Apply before {formatTime(current.expiresAt)}.
            </Notice>
            {mayApply ? <div className="row">{applyButton}</div> : cannotApply}
          </>
        );
        break;
      default:
        body = (
          <>
            {policy}
            {current?.status === 'rejected' ? (
              <Notice kind="warn">
                {current.requestedBy === current.decidedBy ? 'Withdrawn' : 'Rejected'} by{' '}
                {person(current.decidedByEmail, current.decidedBy)} at {formatTime(current.decidedAt)}
                {typeof current.detail.rejectReason === 'string' ? `: ${current.detail.rejectReason}` : ''}.
                You can request approval again.
              </Notice>
            ) : null}
            {current?.status === 'consumed' ? (
              <Notice>
                Its approval was used by a successful apply; applying again needs a new approval.
              </Notice>
            ) : null}
            {current?.status === 'expired' ? (
              <Notice kind="warn">
                Its approval expired (24 hours after the dry run): run the dry run again.
              </Notice>
            ) : null}
            {requestButton}
          </>
        );
    }
  }

  return (
    <section className="panel" aria-labelledby={headingId}>
      <h3 id={headingId}>Next</h3>
      <ErrorBox error={approvals.error} onRetry={() => void approvals.refetch()} />
      {body}
      <ErrorBox error={explain(apply.error)} />
      <ErrorBox error={explain(ask.error)} />
      <ErrorBox error={explain(withdraw.error)} />
      <Modal open={confirming} title="Apply this restore?" onClose={() => setConfirming(false)}>
        <p>
          {plural(plan.plannedWrites, 'record')} ({formatBytes(plan.bytes)}) will be written to{' '}
          <strong>{plan.target?.description ?? 'the job’s source'}</strong>, existing records{' '}
          {plan.onExisting === 'skip' ? 'kept' : 'overwritten'}.
        </p>
        <div className="row">
          <button type="button" className="primary" disabled={apply.isPending} onClick={() => apply.mutate()}>
            Apply now
          </button>
          <button type="button" onClick={() => setConfirming(false)}>
            Not now
          </button>
        </div>
      </Modal>
    </section>
  );
}
