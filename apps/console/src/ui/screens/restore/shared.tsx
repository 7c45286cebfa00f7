/**
 * Pieces the Restore wizard and the Approvals screen share: the plan as a person reviews it, an
 * approval's facts, status badges, and messages for the restore refusals the general table does
 * not word well (an approve sooner than the policy's minimum delay answers 429).
 */
import { useId } from 'react';
import { ApiError } from '../../api/errors.ts';
import { CopyButton, formatBytes, formatTime, Notice } from '../../components/ui.tsx';
import type { ApprovalStatus, RestoreApproval, RestorePlan } from './types.ts';

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export { plural };

/**
 * The error to show for a restore call: the engine's own sentence (ErrorBox words it), except a
 * too-early approve, whose 429 is not a rate limit but the approval policy's minimum delay.
 */
export function explain(err: unknown): unknown {
  if (err instanceof ApiError && err.status === 429) {
    const body = err.body as { error?: unknown; retryAfterSeconds?: unknown } | undefined;
    if (typeof body?.error === 'string' && /too early to approve/i.test(body.error)) {
      const wait = typeof body.retryAfterSeconds === 'number' ? body.retryAfterSeconds : err.retryAfter;
      return new Error(
        `Too early to approve: the approval policy asks for a delay after each request. Try again in ${plural(wait ?? 1, 'second')}.`,
      );
    }
  }
  return err;
}

const STATUS_WORDS: Record<string, string> = {
  pending: 'pending',
  approved: 'approved',
  rejected: 'rejected',
  consumed: 'used',
  void: 'void (plan changed)',
  expired: 'expired',
  running: 'running',
  interrupted: 'interrupted',
  succeeded: 'succeeded',
  'completed-with-failures': 'completed with failures',
  aborted: 'aborted',
  cancelled: 'cancelled',
  error: 'error',
};
const STATUS_CLASS: Record<string, string> = {
  pending: 'status-pending',
  approved: 'status-ok',
  consumed: 'status-ok',
  succeeded: 'status-ok',
  running: 'status-running',
  interrupted: 'status-pending',
  rejected: 'status-failed',
  aborted: 'status-failed',
  error: 'status-failed',
  'completed-with-failures': 'status-failed',
};

export function StatusBadge({ status }: { status: ApprovalStatus | string }) {
  return <span className={`status ${STATUS_CLASS[status] ?? ''}`}>{STATUS_WORDS[status] ?? status}</span>;
}

/** A plan hash in full (it is what people compare), breakable on a phone, with a copy button. */
export function PlanHash({ hash }: { hash: string }) {
  return (
    <span className="plan-hash">
      <code>{hash}</code> <CopyButton text={hash} label="Copy hash" />
    </span>
  );
}

/** The dry-run plan: counts, bytes, where, the hash and deadline, warnings, a sample, skipped records. */
export function PlanView({ plan }: { plan: RestorePlan }) {
  const sampleId = useId();
  const skippedId = useId();
  if (!plan.ok)
    return (
      <Notice kind="warn">
        The engine cannot plan this restore: {plan.reason ?? 'no reason given'}. Nothing can be applied from
        it.
      </Notice>
    );
  const oc = plan.overwriteCheck;
  // `namespace` of a sample row is where the record was archived from, not the target: not shown.
  const hasExists = plan.sample.some((r) => r.targetExists !== undefined);
  return (
    <div className="plan">
      {plan.result === 'record-not-found' ? (
        <Notice kind="warn">No record of the run has that exact name: this plan writes nothing.</Notice>
      ) : null}
      {plan.advisories.length > 0 ? (
        <div className="msg msg-error" role="alert">
          <strong>An apply of this plan would be refused:</strong>
          <ul>
            {plan.advisories.map((a) => (
              <li key={a.code + a.message}>
                {a.message} <small className="muted">({a.code})</small>
              </li>
            ))}
          </ul>
          Change the target and run the dry run again.
        </div>
      ) : null}
      <dl className="facts plan-facts">
        <dt>Records to write</dt>
        <dd data-testid="plan-writes">{plan.plannedWrites}</dd>
        <dt>Bytes</dt>
        <dd data-testid="plan-bytes">
          {formatBytes(plan.bytes)} ({plan.bytes.toLocaleString()} bytes)
        </dd>
        <dt>Verified in the dry run</dt>
        <dd>{plural(plan.recordsVerified, 'record')} read back and checked</dd>
        <dt>Not restored</dt>
        <dd>{plural(plan.skippedCount, 'record')}</dd>
        <dt>Written to</dt>
        <dd>{plan.target?.description ?? '–'}</dd>
        <dt>Existing records</dt>
        <dd>{plan.onExisting === 'skip' ? 'kept (skipped)' : 'overwritten'}</dd>
        {oc ? (
          <>
            <dt>Already in the target</dt>
            <dd>
              {oc.existing} of {oc.checked} checked
              {oc.unknown > 0 ? `, ${oc.unknown} could not be checked` : ''}
              {oc.complete ? '' : ` (only the first ${oc.limit} are checked)`}
            </dd>
          </>
        ) : null}
        <dt>Job and run</dt>
        <dd>
          {plan.job ?? '–'} · <code>{plan.runId}</code>
          {plan.isLatest ? ' (latest)' : ''}
          {plan.archiveRunId && plan.archiveRunId !== plan.runId ? (
            <>
              {' '}
              · archive of <code>{plan.archiveRunId}</code> (unchanged run)
            </>
          ) : null}
        </dd>
        <dt>Plan hash</dt>
        <dd data-testid="plan-hash">{plan.planHash ? <PlanHash hash={plan.planHash} /> : '–'}</dd>
        <dt>Planned at</dt>
        <dd>{formatTime(plan.plannedAt)}</dd>
        <dt>Apply before</dt>
        <dd>
          {formatTime(plan.applyDeadline)}{' '}
          <small className="muted">(24 h 30 min after the dry run; after it, run the dry run again)</small>
        </dd>
      </dl>
      {plan.dependencyWarnings.length > 0 ? (
        <Notice kind="warn">
          Tables restored without their parent tables:{' '}
          {plan.dependencyWarnings.map((w) => `${w.table} needs ${w.missingParent}`).join('; ')}.
        </Notice>
      ) : null}
      {plan.fidelityWarnings.map((w) => (
        <Notice kind="warn" key={w.name}>
          {w.name}: {w.reason}
          {w.expired ? ` · ${w.expired} expired (not written)` : ''}
          {w.expiringBeforeDeadline ? ` · ${w.expiringBeforeDeadline} expire before the deadline` : ''}
        </Notice>
      ))}
      {plan.sample.length > 0 ? (
        <>
          <h3 id={sampleId}>
            Sample{' '}
            <small className="muted">
              (first {plan.sample.length} of {plan.plannedWrites})
            </small>
          </h3>
          <div className="table-wrap">
            <table aria-labelledby={sampleId}>
              <thead>
                <tr>
                  <th scope="col">Record</th>
                  <th scope="col">Size</th>
                  {hasExists ? <th scope="col">In the target</th> : null}
                </tr>
              </thead>
              <tbody>
                {plan.sample.map((r) => (
                  <tr key={r.name}>
                    <td className="record-name">{r.name}</td>
                    <td>{formatBytes(r.plaintextSize)}</td>
                    {hasExists ? (
                      <td>{r.targetExists === undefined ? 'unknown' : r.targetExists ? 'yes' : 'no'}</td>
                    ) : null}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ) : null}
      {plan.skipped.length > 0 ? (
        <details>
          <summary id={skippedId}>Records not restored ({plan.skippedCount})</summary>
          <div className="table-wrap">
            <table aria-labelledby={skippedId}>
              <thead>
                <tr>
                  <th scope="col">Record</th>
                  <th scope="col">Why</th>
                </tr>
              </thead>
              <tbody>
                {plan.skipped.slice(0, 200).map((s) => (
                  <tr key={s.name}>
                    <td className="record-name">{s.name}</td>
                    <td>{s.reason}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {plan.skippedCount > 200 ? <p className="muted">Only the first 200 are listed.</p> : null}
        </details>
      ) : null}
    </div>
  );
}

/** Who asked: the email when the engine knows it, else the stable subject. */
export function person(email: string | null, subject: string | null): string {
  return email ?? subject ?? 'unknown';
}

/** What an approval is about, as an approver reviews it. */
export function ApprovalFacts({ approval }: { approval: RestoreApproval }) {
  const d = approval.detail;
  return (
    <dl className="facts">
      <dt>Written to</dt>
      <dd>{d.target ?? 'the job’s own source'}</dd>
      <dt>Records</dt>
      <dd>
        {d.plannedWrites ?? '–'} ({formatBytes(d.bytes)})
      </dd>
      <dt>Existing records</dt>
      <dd>{d.onExisting === 'skip' ? 'kept (skipped)' : 'overwritten'}</dd>
      <dt>Job and run</dt>
      <dd>
        {d.job ?? '–'} · <code>{d.runId ?? '–'}</code>
      </dd>
      <dt>Plan hash</dt>
      <dd>{approval.subjectHash ? <PlanHash hash={approval.subjectHash} /> : '–'}</dd>
      <dt>Requested by</dt>
      <dd>
        {person(approval.requestedByEmail, approval.requestedBy)} at {formatTime(approval.requestedAt)}
      </dd>
      <dt>Dry run at</dt>
      <dd>{formatTime(d.plannedAt)}</dd>
      <dt>Apply before</dt>
      <dd>{formatTime(d.applyDeadline)}</dd>
      <dt>Approval expires</dt>
      <dd>{formatTime(approval.expiresAt)}</dd>
      {approval.decidedAt ? (
        <>
          <dt>Decided by</dt>
          <dd>
            {person(approval.decidedByEmail, approval.decidedBy)} at {formatTime(approval.decidedAt)}
          </dd>
        </>
      ) : null}
      {typeof d.rejectReason === 'string' ? (
        <>
          <dt>Reason</dt>
          <dd>{d.rejectReason}</dd>
        </>
      ) : null}
    </dl>
  );
}
