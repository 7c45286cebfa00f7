/**
 * The two approval policies (docs/config-control.md "Policies"): configuration approval (job
 * writes and deletes wait for a second person; the bulk cap drops to 10) and retention-prune
 * approval (the retention pass holds what it would delete). Everyone sees their state; an owner
 * turns them on or off through step-up (asked for in place by the API client). Turning one on
 * applies at once; turning it off is itself a pending `policy-disable` change that another owner
 * approves in the pending list below, and until then the policy stays on.
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useId, useState } from 'react';
import { api } from '../../api/client.ts';
import { ApiError } from '../../api/errors.ts';
import type { Whoami } from '../../auth/session.tsx';
import { ErrorBox, formatTime, Notice } from '../../components/ui.tsx';
import {
  CONFIG_KEY,
  type ConfigChange,
  POLICY_PATH,
  POLICY_TITLE,
  type PolicyName,
  type PolicyReply,
  type PolicyState,
  type PolicyView,
  personText,
} from './types.ts';

const POLICY_TEXT: Record<PolicyName, { on: string; off: string }> = {
  'config-approval': {
    on: 'Every job change and deletion waits until a second person approves it; a bulk write takes at most 10 jobs.',
    off: 'Job changes and deletions apply at once.',
  },
  'retention-prune-approval': {
    on: 'The retention pass deletes nothing by itself: what it would prune waits until a second person approves it.',
    off: 'The retention pass prunes old runs by itself.',
  },
};

function setByText(setBy: string | null | undefined, who: Whoami): ReactNode {
  if (!setBy) return null;
  if (setBy === 'admin-token') return 'the admin token';
  if (who.subject !== null && setBy === who.subject) return 'you';
  return <span className="mono cfg-break">{setBy}</span>;
}

function PolicyRow({
  name,
  state,
  lowering,
  who,
  mayChange,
}: {
  name: PolicyName;
  state: PolicyState;
  lowering: ConfigChange | undefined;
  who: Whoami;
  mayChange: boolean;
}) {
  const client = useQueryClient();
  const headingId = useId();
  const [answer, setAnswer] = useState<PolicyReply | null>(null);
  const save = useMutation({
    mutationFn: (enabled: boolean) => api.post<PolicyReply>(POLICY_PATH[name], { enabled }),
    onMutate: () => setAnswer(null),
    onSuccess: (r) => setAnswer(r),
    onSettled: () => client.invalidateQueries({ queryKey: CONFIG_KEY }),
  });
  const writers =
    save.error instanceof ApiError ? (save.error.body as { writers?: number })?.writers : undefined;
  const setBy = setByText(state.setBy, who);
  return (
    <section className="panel cfg-policy" aria-labelledby={headingId} data-policy={name}>
      <h3 id={headingId}>
        {POLICY_TITLE[name]}:{' '}
        <span className={`status ${state.enabled ? 'status-ok' : 'cfg-off'}`}>
          {state.enabled ? 'on' : 'off'}
        </span>
      </h3>
      <p>{state.enabled ? POLICY_TEXT[name].on : POLICY_TEXT[name].off}</p>
      {setBy ? (
        <p className="muted">
          Set by {setBy}, {formatTime(state.setAt)}.
        </p>
      ) : (
        <p className="muted">Nobody has set it: off is the default.</p>
      )}
      {lowering ? (
        <Notice kind="info">
          Turning it off is waiting for another owner: proposed by {personText(lowering.proposedBy, who)}{' '}
          {formatTime(lowering.proposedAt)} (change <span className="mono">{lowering.id}</span>, until{' '}
          {formatTime(lowering.expiresAt)}). Until another owner approves it below, the policy stays on.
        </Notice>
      ) : null}
      {answer?.pending ? (
        <Notice kind="ok">
          Not turned off yet: another owner must approve turning {POLICY_TITLE[name].toLowerCase()} off
          (change <span className="mono">{answer.changeId}</span>).
        </Notice>
      ) : answer ? (
        <Notice kind="ok">
          {answer.changed
            ? `${POLICY_TITLE[name]} is now ${answer.enabled ? 'on' : 'off'}.`
            : `${POLICY_TITLE[name]} already was ${answer.enabled ? 'on' : 'off'}: nothing changed.`}
        </Notice>
      ) : null}
      {writers !== undefined ? (
        <div className="msg msg-error" role="alert">
          Configuration approval needs at least two people who may write jobs (owners or operators); there
          {writers === 1 ? ' is 1' : ` are ${writers}`}. Invite a second person on the Members screen first.
        </div>
      ) : (
        <ErrorBox error={save.error} />
      )}
      {mayChange ? (
        <div className="row">
          {state.enabled ? (
            <button
              type="button"
              disabled={save.isPending || lowering !== undefined}
              onClick={() => save.mutate(false)}
            >
              {save.isPending ? 'Asking…' : `Turn ${POLICY_TITLE[name].toLowerCase()} off`}
            </button>
          ) : (
            <button
              type="button"
              className="primary"
              disabled={save.isPending}
              onClick={() => save.mutate(true)}
            >
              {save.isPending ? 'Turning on…' : `Turn ${POLICY_TITLE[name].toLowerCase()} on`}
            </button>
          )}
        </div>
      ) : null}
    </section>
  );
}

export function PoliciesPanel({
  view,
  who,
  mayChange,
}: {
  view: PolicyView;
  who: Whoami;
  mayChange: boolean;
}) {
  const headingId = useId();
  const lowering = (name: PolicyName) =>
    view.pending.find((c) => c.status === 'pending' && c.target === name && c.kind === 'policy-disable');
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Approval policies</h2>
      <PolicyRow
        name="config-approval"
        state={view.configApproval}
        lowering={lowering('config-approval')}
        who={who}
        mayChange={mayChange}
      />
      <PolicyRow
        name="retention-prune-approval"
        state={view.retentionPruneApproval}
        lowering={lowering('retention-prune-approval')}
        who={who}
        mayChange={mayChange}
      />
      {mayChange ? (
        <p className="muted">
          Turning a policy on applies at once. Turning it off waits until another owner approves it.
        </p>
      ) : (
        <p className="muted">Only an owner turns these policies on or off.</p>
      )}
    </section>
  );
}
