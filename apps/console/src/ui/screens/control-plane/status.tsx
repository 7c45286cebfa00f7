/** The control-plane status in words (docs/control-plane.md "Status"). */
import { formatTime } from '../../components/ui.tsx';
import { type ControlPlaneStatus, REASONS } from './types.ts';

export function StatusView({ status }: { status: ControlPlaneStatus }) {
  return (
    <div className="cp-status">
      {status.recoveryNeeded ? (
        <div className="msg msg-warn" role="alert">
          <strong>Recovery needed.</strong>
          <ul>
            {status.reasons.map((r) => (
              <li key={r}>{REASONS[r] ?? r}</li>
            ))}
          </ul>
        </div>
      ) : (
        <div className="msg msg-ok" role="status">
          No recovery needed.
        </div>
      )}
      <dl className="facts">
        <dt>Engine state</dt>
        <dd>{status.empty ? 'Empty (no jobs, no members, no notification channels)' : 'Configured'}</dd>
        <dt>Jobs</dt>
        <dd>{status.counts.jobs}</dd>
        <dt>Members</dt>
        <dd>{status.counts.members}</dd>
        <dt>Notification channels</dt>
        <dd>{status.counts.channels}</dd>
        <dt>Signer</dt>
        <dd>
          <code className="cp-fp">{status.signerFingerprint}</code>
        </dd>
        <dt>Break-glass key</dt>
        <dd>{status.breakGlassKey ? 'Set (sealed exports are available)' : 'Not set'}</dd>
        <dt>Staged restore</dt>
        <dd>
          {status.staged
            ? `Staged ${formatTime(status.staged.stagedAt)} (${status.staged.sealed ? 'sealed' : 'signed'} export, ${status.staged.jobs} job(s), ${status.staged.members} member(s)) — waiting for "Apply the staged slices"`
            : 'None'}
        </dd>
      </dl>
    </div>
  );
}
