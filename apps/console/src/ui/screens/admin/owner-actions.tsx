/**
 * Owner-action dual control (docs/identity.md "Owner-action dual control"; owners only): whether it
 * is armed (arm / disarm: disarming is itself queued), and the queue: pending actions a second
 * owner approves (the maker cannot) or any owner rejects. Approving a pull credential mint answers
 * its secret once, to the approver.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, isQueued } from '../../api/client.ts';
import type { Whoami } from '../../auth/session.tsx';
import { ErrorBox, formatTime, Loading, Notice } from '../../components/ui.tsx';
import { ConfirmButton, ShownOnce, TableRegion, Tag } from './common.tsx';
import type { ApproveAnswer, OwnerAction, OwnerActionsAnswer } from './types.ts';

export const OWNER_ACTIONS_KEY = ['owner-actions'] as const;

const ACTION_TEXT: Record<string, string> = {
  'credential-mint': 'Mint a pull credential',
  'owner-grant': 'Grant the owner role',
  'admin-token-retire': 'Retire the admin token',
  'gate-disarm': 'Disarm dual control',
  'update-apply': 'Apply an update (update-approval policy)',
  'update-policy': 'Lower the update-approval policy',
};

function statusKind(s: string): string {
  if (s === 'pending') return 'pending';
  if (s === 'consumed') return 'consumed';
  return 'rejected';
}

export function OwnerActions({ who }: { who: Whoami }) {
  const client = useQueryClient();
  const q = useQuery({
    queryKey: OWNER_ACTIONS_KEY,
    queryFn: () => api.get<OwnerActionsAnswer>('/admin/owner-actions'),
  });
  const [message, setMessage] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ credential: string; scope: string } | null>(null);
  const refresh = () => client.invalidateQueries({ queryKey: OWNER_ACTIONS_KEY });

  const gate = useMutation({
    mutationFn: (armed: boolean) =>
      api.postMaybeQueued<{ ok: true; armed: boolean }>('/admin/policy/owner-actions', { armed }),
    onSuccess: (r) => {
      setMessage(
        isQueued(r)
          ? 'Disarming is queued for a second owner to approve.'
          : r.armed
            ? 'Dual control is armed: owner actions now wait for a second owner.'
            : 'Dual control is off.',
      );
      void refresh();
    },
  });

  const decide = async (a: OwnerAction, verdict: 'approve' | 'reject') => {
    setMessage(null);
    const r = await api.post<ApproveAnswer | { ok: true; status: 'rejected' }>(
      `/admin/owner-actions/${encodeURIComponent(a.id)}/${verdict}`,
      {},
    );
    if ('result' in r && typeof r.result.credential === 'string')
      setSecret({ credential: r.result.credential, scope: String(r.result.scope ?? '') });
    setMessage(
      verdict === 'approve'
        ? `${ACTION_TEXT[a.action] ?? a.action}: carried out.`
        : 'The action was rejected.',
    );
    await refresh();
    await client.invalidateQueries({ queryKey: ['roles'] });
    await client.invalidateQueries({ queryKey: ['support'] });
  };

  const data = q.data;
  const pending = data?.actions.filter((a) => a.status === 'pending') ?? [];
  return (
    <section className="panel" aria-labelledby="owner-actions-title">
      <h2 id="owner-actions-title">Owner-action dual control</h2>
      {q.isPending ? <Loading /> : null}
      <ErrorBox error={q.error} onRetry={() => void q.refetch()} />
      {data ? (
        <>
          <p>
            {data.armed ? (
              <>
                <Tag kind="ok">Armed</Tag>: minting pull credentials, granting owner and retiring the admin
                token wait for a second owner.
              </>
            ) : (
              <>
                <Tag kind="none">Not armed</Tag>: owner actions apply at once. Arming needs a second owner.
              </>
            )}
          </p>
          <div className="row">
            <button type="button" disabled={gate.isPending} onClick={() => gate.mutate(!data.armed)}>
              {data.armed ? 'Disarm dual control' : 'Arm dual control'}
            </button>
          </div>
          <ErrorBox error={gate.error} />
          {message ? <Notice kind="ok">{message}</Notice> : null}
          {secret ? (
            <ShownOnce label="Pull credential" value={secret.credential} onDone={() => setSecret(null)}>
              <p>
                Hand this {secret.scope} credential to the person who asked for it. Use it as{' '}
                <code>Authorization: Bearer &lt;credential&gt;</code>.
              </p>
            </ShownOnce>
          ) : null}
          {data.actions.length === 0 ? (
            <p className="muted">No owner actions yet.</p>
          ) : (
            <TableRegion label="Owner actions">
              <table>
                <caption className="sr-only">Owner actions, newest first ({pending.length} pending)</caption>
                <thead>
                  <tr>
                    <th scope="col">Action</th>
                    <th scope="col">Status</th>
                    <th scope="col">Requested by</th>
                    <th scope="col">Requested</th>
                    <th scope="col">Decided</th>
                    <th scope="col">Decision</th>
                  </tr>
                </thead>
                <tbody>
                  {data.actions.map((a) => {
                    const name = ACTION_TEXT[a.action] ?? a.action;
                    const mine = a.requestedBy !== null && a.requestedBy === who.subject;
                    return (
                      <tr key={a.id}>
                        <td>
                          {name}
                          <br />
                          <small className="mono muted">{a.id}</small>
                        </td>
                        <td>
                          <Tag kind={statusKind(a.status)}>{a.status}</Tag>
                        </td>
                        <td>{a.requestedByEmail ?? a.requestedBy ?? 'admin token'}</td>
                        <td>{formatTime(a.requestedAt)}</td>
                        <td>
                          {a.decidedAt ? formatTime(a.decidedAt) : `expires ${formatTime(a.expiresAt)}`}
                        </td>
                        <td>
                          {a.status === 'pending' ? (
                            <div className="cell-actions">
                              {mine || who.subject === null ? (
                                <small className="muted">another owner approves</small>
                              ) : (
                                <ConfirmButton
                                  label="Approve"
                                  accessibleLabel={`Approve: ${name}`}
                                  title={`Approve: ${name}`}
                                  confirmLabel="Approve and carry out"
                                  action={() => decide(a, 'approve')}
                                >
                                  <p>
                                    Requested by {a.requestedByEmail ?? a.requestedBy ?? 'the admin token'}.
                                    It is carried out as soon as you approve.
                                  </p>
                                </ConfirmButton>
                              )}
                              <ConfirmButton
                                label={mine ? 'Withdraw' : 'Reject'}
                                accessibleLabel={`${mine ? 'Withdraw' : 'Reject'}: ${name}`}
                                title={`${mine ? 'Withdraw' : 'Reject'}: ${name}`}
                                confirmLabel={mine ? 'Withdraw' : 'Reject'}
                                danger
                                action={() => decide(a, 'reject')}
                              >
                                <p>The action will not be carried out.</p>
                              </ConfirmButton>
                            </div>
                          ) : (
                            <span className="muted">{a.decidedBy ?? '–'}</span>
                          )}
                        </td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </TableRegion>
          )}
        </>
      ) : null}
    </section>
  );
}
