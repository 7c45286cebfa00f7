/**
 * Pending configuration changes (`GET /admin/config/changes`, docs/config-control.md "Pending
 * changes") and retention prunes held for a second person (`GET /admin/retention-prune/approvals`):
 * what each change is, who proposed it, which fields it changes, how old it is and when it
 * expires. Another person holding the change's capability approves or rejects it; the proposer
 * sees that it waits for a second person and may withdraw it, never approve it. A refused
 * approval is said in words (maker is checker, the job moved, expired, already decided).
 */
import { useQueryClient } from '@tanstack/react-query';
import { useId } from 'react';
import { Link } from 'wouter';
import { api } from '../../api/client.ts';
import { messageOf } from '../../api/errors.ts';
import type { Whoami } from '../../auth/session.tsx';
import { formatTime, Notice, useRunner } from '../../components/ui.tsx';
import { TableRegion } from '../admin/common.tsx';
import { fieldLabel } from '../jobs/model.ts';
import {
  type ApproveReply,
  CONFIG_KEY,
  type ConfigChange,
  decisionError,
  isOwn,
  kindText,
  mayApprove,
  mayReject,
  POLICY_TITLE,
  type PolicyName,
  type PruneApproval,
  personText,
  relative,
  requiredFor,
} from './types.ts';

function targetOf(c: ConfigChange) {
  if (c.kind === 'policy-disable') return POLICY_TITLE[c.target as PolicyName] ?? c.target;
  if (c.kind === 'job-delete' || c.kind === 'job-upsert')
    return <Link href={`/jobs/${encodeURIComponent(c.target)}`}>{c.target}</Link>;
  return c.target;
}

function changedText(c: ConfigChange): string {
  if (c.kind === 'job-delete') return 'the whole job (deleted)';
  if (c.kind === 'policy-disable') return 'turned off';
  if (c.kind === 'retention-prune') return 'runs pruned';
  if (c.baseRev === null) return 'a new job';
  return c.changedFields.length ? c.changedFields.map(fieldLabel).join(', ') : 'nothing (a rewrite)';
}

function requiredText(required: string): string {
  return required === 'owner' ? 'another owner' : `another person holding ${required}`;
}

/** The outcome of the last decision taken on this screen (kept above the lists: its row may leave them). */
export interface Decision {
  id: string;
  label: string;
  ok: boolean;
  text: string;
}

export function DecisionNotice({ decision }: { decision: Decision | null }) {
  if (!decision) return null;
  return decision.ok ? (
    <div data-decision={decision.id}>
      <Notice kind="ok">{decision.text}</Notice>
    </div>
  ) : (
    <div className="msg msg-error" role="alert" data-decision={decision.id}>
      {decision.label}: {decision.text}
    </div>
  );
}

type OnDecided = (d: Decision | null) => void;

/** Approve, reject or withdraw one change; the outcome or the refusal is reported in words. */
function Decide({
  change,
  who,
  label,
  onDecided,
}: {
  change: ConfigChange;
  who: Whoami;
  label: string;
  onDecided: OnDecided;
}) {
  const client = useQueryClient();
  const runner = useRunner<'approve' | 'reject'>();
  const own = isOwn(who, change);
  const setDone = (text: string | null) =>
    onDecided(text === null ? null : { id: change.id, label, ok: true, text });
  const decide = (what: 'approve' | 'reject') =>
    runner.run(async () => {
      setDone(null);
      try {
        const r = await api.post<ApproveReply | { ok: true; status: 'rejected' }>(
          `/admin/config/changes/${encodeURIComponent(change.id)}/${what}`,
        );
        if (r.status === 'applied')
          setDone(
            `Approved and applied: ${label}${r.version ? ` (configuration version ${r.version})` : ''}${
              r.pruned ? `: ${r.pruned.length} run${r.pruned.length === 1 ? '' : 's'} pruned` : ''
            }.`,
          );
        else setDone(own ? `Withdrawn: ${label}.` : `Rejected: ${label}; nothing was applied.`);
      } catch (err) {
        onDecided({
          id: change.id,
          label: `${what === 'approve' ? 'Not approved' : 'Not rejected'} (${label})`,
          ok: false,
          text: decisionError(err) ?? messageOf(err),
        });
      } finally {
        await client.invalidateQueries({ queryKey: CONFIG_KEY });
        await client.invalidateQueries({ queryKey: ['jobs'] });
      }
    }, what);
  return (
    <div className="cfg-decide">
      {own ? (
        <p className="cfg-waiting">
          <strong>Waiting for a second person</strong>: {requiredText(requiredFor(change))} approves it.
        </p>
      ) : null}
      <div className="row">
        {mayApprove(who, change) ? (
          <button
            type="button"
            className="primary"
            aria-label={`Approve ${label}`}
            disabled={runner.busy !== null}
            onClick={() => void decide('approve')}
          >
            {runner.busy === 'approve' ? 'Approving…' : 'Approve'}
          </button>
        ) : null}
        {mayReject(who, change) ? (
          <button
            type="button"
            aria-label={`${own ? 'Withdraw' : 'Reject'} ${label}`}
            disabled={runner.busy !== null}
            onClick={() => void decide('reject')}
          >
            {runner.busy === 'reject' ? (own ? 'Withdrawing…' : 'Rejecting…') : own ? 'Withdraw' : 'Reject'}
          </button>
        ) : null}
      </div>
      {!own && !mayApprove(who, change) ? (
        <p className="muted">Waiting for {requiredText(requiredFor(change))}.</p>
      ) : null}
    </div>
  );
}

export function PendingChanges({
  changes,
  who,
  onDecided,
}: {
  changes: ConfigChange[];
  who: Whoami;
  onDecided: OnDecided;
}) {
  const headingId = useId();
  const pending = changes.filter((c) => c.status === 'pending' && c.kind !== 'retention-prune');
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Pending changes ({pending.length})</h2>
      {pending.length === 0 ? (
        <p className="muted">No configuration change is waiting for a second person.</p>
      ) : (
        <TableRegion label="Pending configuration changes">
          <table className="cfg-table">
            <thead>
              <tr>
                <th scope="col">Change</th>
                <th scope="col">Proposed by</th>
                <th scope="col">Changes</th>
                <th scope="col">Age and expiry</th>
                <th scope="col">Decision</th>
              </tr>
            </thead>
            <tbody>
              {pending.map((c) => {
                const label = `${kindText(c.kind).toLowerCase()} of ${c.target}`;
                return (
                  <tr key={c.id} data-change-id={c.id} data-kind={c.kind} data-target={c.target}>
                    <th scope="row">
                      {kindText(c.kind)}: {targetOf(c)}
                      <div className="muted mono cfg-break">{c.id}</div>
                      {c.config && c.kind === 'job-upsert' ? (
                        <details>
                          <summary>Proposed configuration</summary>
                          <pre className="cfg-json">{JSON.stringify(c.config, null, 2)}</pre>
                        </details>
                      ) : null}
                    </th>
                    <td>{personText(c.proposedBy, who)}</td>
                    <td>
                      {changedText(c)}
                      {c.baseRev !== null ? (
                        <div className="muted">
                          from revision {c.baseRev}
                          {c.ifMatchRev !== undefined ? ' (only if it has not moved)' : ''}
                        </div>
                      ) : null}
                    </td>
                    <td>
                      proposed {relative(c.proposedAt)}
                      <div className="muted">
                        expires {relative(c.expiresAt)} ({formatTime(c.expiresAt)})
                      </div>
                    </td>
                    <td>
                      <Decide change={c} who={who} label={label} onDecided={onDecided} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableRegion>
      )}
    </section>
  );
}

export function RecentDecisions({ changes, who }: { changes: ConfigChange[]; who: Whoami }) {
  const headingId = useId();
  const decided = changes.filter((c) => c.status !== 'pending').slice(0, 10);
  if (decided.length === 0) return null;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Recently decided</h2>
      <TableRegion label="Recently decided configuration changes">
        <table className="cfg-table">
          <thead>
            <tr>
              <th scope="col">Change</th>
              <th scope="col">Proposed by</th>
              <th scope="col">Outcome</th>
              <th scope="col">Decided by</th>
            </tr>
          </thead>
          <tbody>
            {decided.map((c) => (
              <tr key={c.id} data-change-id={c.id} data-status={c.status}>
                <th scope="row">
                  {kindText(c.kind)}: {targetOf(c)}
                  <div className="muted mono cfg-break">{c.id}</div>
                </th>
                <td>{personText(c.proposedBy, who)}</td>
                <td>
                  {c.status}
                  {c.reason ? <span className="muted"> ({c.reason})</span> : null}
                  {c.version ? <div className="muted">version {c.version}</div> : null}
                </td>
                <td>
                  {c.decidedBy ? personText(c.decidedBy, who) : '–'}
                  <div className="muted">{formatTime(c.decidedAt)}</div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableRegion>
    </section>
  );
}

/** The retention prunes the pass holds; approval and rejection go through the change routes. */
export function PrunePanel({
  enabled,
  approvals,
  changes,
  who,
  onDecided,
}: {
  enabled: boolean;
  approvals: PruneApproval[];
  changes: ConfigChange[];
  who: Whoami;
  onDecided: OnDecided;
}) {
  const headingId = useId();
  const pending = approvals.filter((a) => a.status === 'pending');
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Retention prunes awaiting approval ({pending.length})</h2>
      {pending.length === 0 ? (
        <p className="muted">
          {enabled
            ? 'No retention prune is waiting: the retention pass holds what it would delete here.'
            : 'Retention-prune approval is off: the retention pass prunes by itself.'}
        </p>
      ) : (
        <TableRegion label="Retention prunes awaiting approval">
          <table className="cfg-table">
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">Runs that would be pruned</th>
                <th scope="col">Planned and expiry</th>
                <th scope="col">Decision</th>
              </tr>
            </thead>
            <tbody>
              {pending.map((a) => {
                const change: ConfigChange = changes.find((c) => c.id === a.id) ?? {
                  id: a.id,
                  kind: 'retention-prune',
                  target: a.job,
                  status: a.status,
                  proposedBy: { subject: null, email: null, method: 'engine' },
                  proposedAt: a.plannedAt,
                  expiresAt: a.expiresAt,
                  baseRev: null,
                  changedFields: [],
                  config: { destinations: a.destinations },
                  decidedBy: null,
                  decidedAt: null,
                  reason: null,
                  configRev: null,
                  version: null,
                };
                return (
                  <tr key={a.id} data-prune-id={a.id} data-job={a.job}>
                    <th scope="row">
                      <Link href={`/jobs/${encodeURIComponent(a.job)}`}>{a.job}</Link>
                      <div className="muted mono cfg-break">{a.id}</div>
                    </th>
                    <td>
                      {a.runs} run{a.runs === 1 ? '' : 's'}
                      <ul className="cfg-runs">
                        {Object.entries(a.destinations).map(([dest, runs]) => (
                          <li key={dest}>
                            {dest}: <span className="mono cfg-break">{runs.join(', ')}</span>
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td>
                      planned {relative(a.plannedAt)}
                      <div className="muted">expires {relative(a.expiresAt)}</div>
                    </td>
                    <td>
                      <Decide
                        change={change}
                        who={who}
                        label={`the retention prune of ${a.job}`}
                        onDecided={onDecided}
                      />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableRegion>
      )}
      {pending.length > 0 ? (
        <p className="muted">
          Approving re-plans first: only runs the plan named and that the retention rules still delete are
          pruned. Rejecting means “not now”: the next pass holds them again unless the job’s retention
          changes.
        </p>
      ) : null}
    </section>
  );
}
