/**
 * Approvals (dual control of restores): the pending requests with their plan (what is written
 * where, how much, the plan hash, who asked, the deadline), approve or reject for approvers, the
 * requester's own withdrawal, the decided history, and for owners (`keys.ceremony`) the policy
 * itself. Actions a role cannot take are not shown.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useId, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api/client.ts';
import { can, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, Field, formatTime, Loading, Modal, Notice, Page } from '../components/ui.tsx';
import { ApprovalFacts, explain, person, plural, StatusBadge } from './restore/shared.tsx';
import type { ApprovalReply, ApprovalsReply, PolicyReply, RestoreApproval } from './restore/types.ts';
import { APPROVALS_KEY, useApprovals } from './restore/wizard.tsx';
import './restore/restore.css';

export function Approvals() {
  const who = useSignedIn();
  const approvals = useApprovals(5000);
  const data = approvals.data;
  const pending = (data?.approvals ?? []).filter((a) => a.status === 'pending');
  const decided = (data?.approvals ?? []).filter((a) => a.status !== 'pending');
  return (
    <Page title="Approvals">
      {approvals.isPending ? <Loading what="Loading approvals" /> : null}
      <ErrorBox error={approvals.error} onRetry={() => void approvals.refetch()} />
      {data ? (
        <>
          <PolicyPanel data={data} mayChange={can(who, 'keys.ceremony')} />
          <section aria-labelledby="pending-title">
            <h2 id="pending-title">Waiting for a decision ({pending.length})</h2>
            {pending.length === 0 ? (
              <p className="muted">
                No restore request is waiting. Requests are raised from a dry-run plan on the{' '}
                <Link href="/restore">Restore</Link> screen.
              </p>
            ) : (
              pending.map((a) => (
                <PendingRequest key={a.id} approval={a} minDelaySeconds={data.minDelaySeconds} />
              ))
            )}
          </section>
          <DecidedTable approvals={decided} />
        </>
      ) : null}
    </Page>
  );
}

function PolicyPanel({ data, mayChange }: { data: ApprovalsReply; mayChange: boolean }) {
  const client = useQueryClient();
  const [enabled, setEnabled] = useState(data.approvalRequired);
  const [delay, setDelay] = useState(String(data.minDelaySeconds));
  useEffect(() => {
    setEnabled(data.approvalRequired);
    setDelay(String(data.minDelaySeconds));
  }, [data.approvalRequired, data.minDelaySeconds]);
  const save = useMutation({
    mutationFn: (body: { enabled: boolean; minDelaySeconds: number }) =>
      api.post<PolicyReply>('/admin/restore/approval-policy', body),
    onSettled: () => client.invalidateQueries({ queryKey: APPROVALS_KEY }),
  });
  const delayNumber = Number(delay);
  const delayValid =
    delay.trim() !== '' && Number.isInteger(delayNumber) && delayNumber >= 0 && delayNumber <= 86_400;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (delayValid) save.mutate({ enabled, minDelaySeconds: delayNumber });
  };
  return (
    <section className="panel" aria-labelledby="policy-title">
      <h2 id="policy-title">Policy</h2>
      <p data-testid="policy-summary">
        {data.approvalRequired
          ? `Approval is on: every restore apply needs a second person to approve its plan first${data.minDelaySeconds > 0 ? `, at least ${plural(data.minDelaySeconds, 'second')} after the request` : ' (no minimum delay)'}.`
          : 'Approval is off: a person with restore.apply applies a reviewed plan directly.'}
      </p>
      {mayChange ? (
        <form onSubmit={submit}>
          <label className="check">
            <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} />
            Require approval for every restore apply
          </label>
          <Field
            label="Minimum delay before approving (seconds)"
            hint="0 to 86400. A delay stops one person requesting and approving in one breath with two sessions."
          >
            {(id, hint) => (
              <input
                id={id}
                type="number"
                min={0}
                max={86_400}
                step={1}
                inputMode="numeric"
                aria-describedby={hint}
                aria-invalid={!delayValid}
                value={delay}
                onChange={(e) => setDelay(e.target.value)}
              />
            )}
          </Field>
          <div className="row">
            <button type="submit" disabled={save.isPending || !delayValid}>
              Save policy
            </button>
            {save.isSuccess ? <span role="status">Saved.</span> : null}
          </div>
          <ErrorBox error={save.error} />
        </form>
      ) : null}
    </section>
  );
}

function PendingRequest({
  approval,
  minDelaySeconds,
}: {
  approval: RestoreApproval;
  minDelaySeconds: number;
}) {
  const who = useSignedIn();
  const client = useQueryClient();
  const headingId = useId();
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState('');
  const hash = approval.subjectHash ?? '';
  const refresh = () => client.invalidateQueries({ queryKey: APPROVALS_KEY });
  const approve = useMutation({
    mutationFn: () => api.post<ApprovalReply>('/admin/restore/approve', { planHash: hash }),
    onSettled: refresh,
  });
  const reject = useMutation({
    mutationFn: (why: string) =>
      api.post<ApprovalReply>('/admin/restore/reject', { planHash: hash, ...(why ? { reason: why } : {}) }),
    onSuccess: () => setRejecting(false),
    onSettled: refresh,
  });
  const own = approval.requestedBy !== null && approval.requestedBy === who.subject;
  const mayApprove = can(who, 'restore.approve');
  const openAt = Date.parse(approval.requestedAt) + minDelaySeconds * 1000;
  const d = approval.detail;
  return (
    <article className="panel approval" aria-labelledby={headingId}>
      <h3 id={headingId}>
        Restore {d.job ?? ''} from run <code>{d.runId ?? '?'}</code>
      </h3>
      <p>
        <StatusBadge status={approval.status} /> · requested by{' '}
        <strong>{person(approval.requestedByEmail, approval.requestedBy)}</strong>
      </p>
      <ApprovalFacts approval={approval} />
      {own ? (
        <Notice>You requested this restore: another person must approve it. You may withdraw it.</Notice>
      ) : null}
      {!own && mayApprove && openAt > Date.now() ? (
        <p className="muted">The policy allows approving it from {formatTime(openAt)}.</p>
      ) : null}
      <div className="row">
        {!own && mayApprove ? (
          <button
            type="button"
            className="primary"
            disabled={approve.isPending}
            onClick={() => approve.mutate()}
          >
            Approve
          </button>
        ) : null}
        {own || mayApprove ? (
          <button
            type="button"
            className="danger"
            disabled={reject.isPending}
            onClick={() => setRejecting(true)}
          >
            {own ? 'Withdraw…' : 'Reject…'}
          </button>
        ) : null}
      </div>
      <ErrorBox error={explain(approve.error)} />
      <ErrorBox error={explain(reject.error)} />
      <Modal
        open={rejecting}
        title={own ? 'Withdraw this restore request?' : 'Reject this restore request?'}
        onClose={() => setRejecting(false)}
      >
        <form
          onSubmit={(e) => {
            e.preventDefault();
            reject.mutate(reason.trim());
          }}
        >
          <Field label="Reason (optional)" hint="Shown to the requester; at most 500 characters.">
            {(id, hint) => (
              <textarea
                id={id}
                aria-describedby={hint}
                maxLength={500}
                value={reason}
                onChange={(e) => setReason(e.target.value)}
              />
            )}
          </Field>
          <div className="row">
            <button type="submit" className="danger" disabled={reject.isPending}>
              {own ? 'Withdraw request' : 'Reject request'}
            </button>
            <button type="button" onClick={() => setRejecting(false)}>
              Keep it
            </button>
          </div>
        </form>
      </Modal>
    </article>
  );
}

function DecidedTable({ approvals }: { approvals: RestoreApproval[] }) {
  if (approvals.length === 0) return null;
  return (
    <section aria-labelledby="decided-title">
      <h2 id="decided-title">Decided and past requests</h2>
      <div className="table-wrap">
        <table aria-labelledby="decided-title">
          <thead>
            <tr>
              <th scope="col">Status</th>
              <th scope="col">Job and run</th>
              <th scope="col">Written to</th>
              <th scope="col">Requested by</th>
              <th scope="col">Decided by</th>
              <th scope="col">Plan hash</th>
            </tr>
          </thead>
          <tbody>
            {approvals.slice(0, 100).map((a) => (
              <tr key={a.id}>
                <td>
                  <StatusBadge status={a.status} />
                  {typeof a.detail.rejectReason === 'string' ? (
                    <>
                      <br />
                      <small>{a.detail.rejectReason}</small>
                    </>
                  ) : null}
                </td>
                <td>
                  {a.detail.job ?? ''} <code>{a.detail.runId ?? ''}</code>
                </td>
                <td>{a.detail.target ?? '–'}</td>
                <td>
                  {person(a.requestedByEmail, a.requestedBy)}
                  <br />
                  <small className="muted">{formatTime(a.requestedAt)}</small>
                </td>
                <td>
                  {a.decidedAt ? (
                    <>
                      {person(a.decidedByEmail, a.decidedBy)}
                      <br />
                      <small className="muted">{formatTime(a.decidedAt)}</small>
                    </>
                  ) : (
                    '–'
                  )}
                </td>
                <td>
                  <code title={a.subjectHash ?? undefined}>
                    {a.subjectHash ? `${a.subjectHash.slice(0, 19)}…` : '–'}
                  </code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
