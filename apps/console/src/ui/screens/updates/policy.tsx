/**
 * The update-approval policy (`GET` and `POST /admin/update/policy`, docs/updates.md "Approval
 * policy"): which live updates wait for a second owner, who set the policy and when, and the live
 * applies and ramps queued under it (not yet decided or expired). Anyone with `job.read` sees it;
 * an owner (the engine's gate is the owner role) changes it, with step-up asked for in place by the
 * API client. Raising the policy applies at once; lowering `all` to `migrations` is itself an owner
 * action (202) that another owner approves in the owner-action queue on Members, and until then
 * the policy stays `all`. An engine without the route (404) gets a quiet line, not an error.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useEffect, useId, useState } from 'react';
import { Link } from 'wouter';
import { api, isQueued } from '../../api/client.ts';
import { ApiError } from '../../api/errors.ts';
import type { Whoami } from '../../auth/session.tsx';
import { RadioChoice } from '../../components/form.tsx';
import { ErrorBox, formatTime, Loading, Notice } from '../../components/ui.tsx';
import { TableRegion } from '../admin/common.tsx';
import {
  COMPONENTS,
  type PendingUpdate,
  type PolicyQueued,
  type PolicySet,
  UPDATE_POLICY_KEY,
  type UpdateApproval,
  type UpdatePolicyView,
} from './types.ts';

/** Each policy in a few words (the choice) and in a sentence (what it means). */
const POLICY_NAME: Record<UpdateApproval, string> = {
  migrations: 'migrations only',
  all: 'every release',
};
const POLICY_TEXT: Record<UpdateApproval, string> = {
  migrations:
    'Only a release that migrates the state store waits for a second owner; every other release applies at once.',
  all: 'Every live apply and every live ramp waits for a second owner.',
};

function setByText(setBy: string, who: Whoami): ReactNode {
  if (setBy === 'admin-token') return 'the admin token';
  if (setBy === 'owner-action') return "a second owner's approval (owner action)";
  if (who.subject !== null && setBy === who.subject) return 'you';
  return <span className="mono">{setBy}</span>;
}

function pendingWhat(p: PendingUpdate): string {
  const to = COMPONENTS.filter((c) => p.to[c] !== undefined)
    .map((c) => `${c} ${p.to[c]}`)
    .join(', ');
  const target = to || p.version || 'the channel release';
  return p.kind === 'ramp' ? `Ramp to ${target} (${p.percentage ?? '?'}% of replicas)` : `Apply ${target}`;
}

function PendingUpdates({ pending }: { pending: PendingUpdate[] }) {
  const headingId = useId();
  return (
    <>
      <h3 id={headingId}>Waiting for a second owner ({pending.length})</h3>
      {pending.length === 0 ? (
        <p className="muted">No update is waiting for a second owner.</p>
      ) : (
        <TableRegion label="Updates waiting for a second owner">
          <table className="update-table" aria-labelledby={headingId}>
            <thead>
              <tr>
                <th scope="col">Update</th>
                <th scope="col">Requested by</th>
                <th scope="col">Requested</th>
                <th scope="col">Expires</th>
                <th scope="col">Owner action</th>
              </tr>
            </thead>
            <tbody>
              {pending.map((p) => (
                <tr key={p.id} data-pending-update={p.id}>
                  <th scope="row">
                    {pendingWhat(p)}
                    <div className="muted">channel sequence {p.channel.sequence}</div>
                  </th>
                  <td>{p.requestedByEmail ?? p.requestedBy ?? 'the admin token'}</td>
                  <td>{formatTime(p.requestedAt)}</td>
                  <td>{formatTime(p.expiresAt)}</td>
                  <td className="mono update-break">{p.id}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
    </>
  );
}

type Changed = { kind: 'set'; answer: PolicySet } | { kind: 'queued'; answer: PolicyQueued };

function ChangedNotice({ changed }: { changed: Changed }) {
  if (changed.kind === 'queued') {
    const a = changed.answer;
    return (
      <Notice kind="info">
        Not changed yet: a second owner must approve lowering the policy to {POLICY_NAME[a.requested]}. The
        change is queued as owner action <span className="mono update-break">{a.id}</span>
        {a.expiresAt ? ` until ${formatTime(a.expiresAt)}` : ''}; another owner approves it in the
        owner-action queue on the <Link href="/members">Members</Link> screen. Until then the policy stays{' '}
        {POLICY_NAME[a.approval]}.
      </Notice>
    );
  }
  const a = changed.answer;
  return (
    <Notice kind="ok">
      {a.previous === a.approval
        ? `The policy already was ${POLICY_NAME[a.approval]}: nothing changed.`
        : `The policy is now ${POLICY_NAME[a.approval]}. ${POLICY_TEXT[a.approval]}`}
    </Notice>
  );
}

function PolicyForm({ current }: { current: UpdateApproval }) {
  const client = useQueryClient();
  const [choice, setChoice] = useState<UpdateApproval>(current);
  const [changed, setChanged] = useState<Changed | null>(null);
  useEffect(() => setChoice(current), [current]);
  const save = useMutation({
    mutationFn: (approval: UpdateApproval) =>
      api.postMaybeQueued<PolicySet>('/admin/update/policy', { approval }),
    onMutate: () => setChanged(null),
    onSuccess: (r) => {
      if (isQueued(r)) {
        setChanged({ kind: 'queued', answer: r as PolicyQueued });
        // Nothing changed yet: the choice shows the policy in force again.
        setChoice(current);
      } else setChanged({ kind: 'set', answer: r as PolicySet });
    },
    onSettled: () => client.invalidateQueries({ queryKey: UPDATE_POLICY_KEY }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    save.mutate(choice);
  };
  return (
    <form onSubmit={submit} noValidate>
      <RadioChoice
        legend="Which live updates wait for a second owner"
        name="update-approval-policy"
        value={choice}
        options={[
          {
            value: 'migrations',
            label: 'Migrations only: a release that migrates the state store (the default)',
          },
          { value: 'all', label: 'Every release: every live apply and every live ramp' },
        ]}
        onChange={setChoice}
      />
      <p className="muted">
        Raising the policy applies at once. Lowering it to migrations only is itself an owner action: it waits
        until another owner approves it.
      </p>
      <ErrorBox error={save.error} />
      {changed ? <ChangedNotice changed={changed} /> : null}
      <div className="row">
        <button type="submit" className="primary" disabled={save.isPending || choice === current}>
          {save.isPending ? 'Changing…' : 'Change the policy'}
        </button>
      </div>
    </form>
  );
}

export function PolicyPanel({ who, mayChange }: { who: Whoami; mayChange: boolean }) {
  const headingId = useId();
  const policy = useQuery({
    queryKey: UPDATE_POLICY_KEY,
    queryFn: async (): Promise<UpdatePolicyView | null> => {
      try {
        return await api.get<UpdatePolicyView>('/admin/update/policy');
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }
    },
    retry: false,
    refetchOnWindowFocus: false,
  });
  const data = policy.data;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>Approval policy</h2>
      {policy.isPending ? <Loading what="Loading the approval policy" /> : null}
      <ErrorBox error={policy.error} onRetry={() => void policy.refetch()} />
      {data === null ? (
        <p className="muted">The update-approval policy is not available on this engine.</p>
      ) : null}
      {data ? (
        <div className="panel" data-policy={data.approval}>
          <p>{POLICY_TEXT[data.approval]}</p>
          <dl className="facts">
            <dt>Policy</dt>
            <dd>
              {POLICY_NAME[data.approval]} (<code>{data.approval}</code>)
            </dd>
            <dt>Set by</dt>
            <dd>
              {data.setBy === null ? (
                <span className="muted">nobody: this is the default</span>
              ) : (
                <>
                  {setByText(data.setBy, who)}, {formatTime(data.setAt)}
                </>
              )}
            </dd>
          </dl>
          <PendingUpdates pending={data.pending} />
          {mayChange ? (
            <PolicyForm current={data.approval} />
          ) : (
            <p className="muted">Only an owner changes the update-approval policy.</p>
          )}
        </div>
      ) : null}
    </section>
  );
}
