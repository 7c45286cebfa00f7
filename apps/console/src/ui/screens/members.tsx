/**
 * Members and roles (docs/identity.md "Roles", "Invites and revoking a passkey", "Ending
 * sessions"): who holds which role (`GET /admin/roles`); with `roles.write`, change or remove a
 * role and end a person's sessions; an owner invites people and sees the owner-action queue. A
 * write the dual-control gate holds answers 202 and is shown as queued for a second owner.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, isQueued } from '../api/client.ts';
import { can, isOwner, useSignedIn, WHOAMI_KEY, type Whoami } from '../auth/session.tsx';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ConfirmButton, TableRegion } from './admin/common.tsx';
import { InviteForm } from './admin/invite.tsx';
import { OWNER_ACTIONS_KEY, OwnerActions } from './admin/owner-actions.tsx';
import { useRoles } from './admin/roles.ts';
import type { AssignAnswer, Member, RemoveAnswer, RolesAnswer } from './admin/types.ts';

/** The roles `who` may hand out: an owner any; others not owner nor a role carrying roles.write. */
function grantable(who: Whoami, roles: RolesAnswer['roles']): string[] {
  return roles
    .filter((r) => isOwner(who) || (r.name !== 'owner' && !r.capabilities.includes('roles.write')))
    .map((r) => r.name);
}

function nameOf(m: Member): string {
  return m.email ?? m.subject;
}

function MemberRow({
  m,
  who,
  choices,
  onDone,
}: {
  m: Member;
  who: Whoami;
  choices: string[] | null;
  onDone: (message: string) => void;
}) {
  const client = useQueryClient();
  const [role, setRole] = useState(m.role);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const self = m.subject === who.subject;
  const name = nameOf(m);
  const target = m.email ? { email: m.email } : { subject: m.subject };

  const after = async () => {
    await client.invalidateQueries({ queryKey: ['roles'] });
    if (self) await client.invalidateQueries({ queryKey: WHOAMI_KEY });
  };

  const change = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await api.postMaybeQueued<AssignAnswer>('/admin/roles/assign', { ...target, role });
      if (isQueued(r)) {
        onDone(`Giving ${name} the ${role} role is queued for a second owner (owner action ${r.id}).`);
        await client.invalidateQueries({ queryKey: OWNER_ACTIONS_KEY });
      } else onDone(`${name} now has the ${r.role} role (was ${r.previous ?? 'none'}).`);
      await after();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <tr>
      <td>
        {name}
        {self ? <small className="muted"> (you)</small> : null}
        {m.email ? null : <small className="muted"> (not a passkey member)</small>}
      </td>
      <td className="mono">{m.subject}</td>
      <td>{m.role}</td>
      {choices ? (
        <td>
          <div className="cell-actions">
            <select
              aria-label={`New role for ${name}`}
              value={role}
              onChange={(e) => setRole(e.target.value)}
            >
              {(choices.includes(m.role) ? choices : [m.role, ...choices]).map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
            <button
              type="button"
              aria-label={`Change role of ${name}`}
              disabled={busy || role === m.role}
              onClick={() => void change()}
            >
              Change role
            </button>
            <ConfirmButton
              label="Remove role"
              accessibleLabel={`Remove role of ${name}`}
              title={`Remove the role of ${name}?`}
              confirmLabel="Remove role"
              danger
              action={async () => {
                const r = await api.post<RemoveAnswer>('/admin/roles/remove', target);
                onDone(r.removed ? `${name} no longer has a role.` : `${name} had no role to remove.`);
                await after();
              }}
            >
              <p>
                {name} falls back to the default role on their next request. Their passkey stays; invite them
                again or assign a role to restore access.
              </p>
            </ConfirmButton>
            <ConfirmButton
              label="End sessions"
              accessibleLabel={`End sessions of ${name}`}
              title={`End every session of ${name}?`}
              confirmLabel="End sessions"
              danger
              action={async () => {
                await api.post('/admin/sessions/terminate-user', { subject: m.subject });
                if (self) client.setQueryData(WHOAMI_KEY, null);
                else onDone(`Every session of ${name} has ended; they sign in again to continue.`);
              }}
            >
              <p>
                {name} is signed out on every device{self ? ', including this one' : ''}.
              </p>
            </ConfirmButton>
          </div>
          <ErrorBox error={error} />
        </td>
      ) : null}
    </tr>
  );
}

export function Members() {
  const who = useSignedIn();
  const client = useQueryClient();
  const roles = useRoles();
  const [message, setMessage] = useState<string | null>(null);
  const writer = can(who, 'roles.write');
  const owner = isOwner(who);
  const choices = roles.data && writer ? grantable(who, roles.data.roles) : null;

  return (
    <Page title="Members">
      {roles.isPending ? <Loading what="Loading members" /> : null}
      <ErrorBox error={roles.error} onRetry={() => void roles.refetch()} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {roles.data ? (
        <>
          {roles.data.members.length === 0 ? (
            <Notice>No members in the role table yet.</Notice>
          ) : (
            <TableRegion label="Members">
              <table>
                <caption className="sr-only">Members and their roles</caption>
                <thead>
                  <tr>
                    <th scope="col">Member</th>
                    <th scope="col">Subject</th>
                    <th scope="col">Role</th>
                    {choices ? <th scope="col">Actions</th> : null}
                  </tr>
                </thead>
                <tbody>
                  {roles.data.members.map((m) => (
                    <MemberRow
                      key={`${m.subject}:${m.role}`}
                      m={m}
                      who={who}
                      choices={choices}
                      onDone={setMessage}
                    />
                  ))}
                </tbody>
              </table>
            </TableRegion>
          )}
          {owner ? <InviteForm roles={roles.data.roles.map((r) => r.name)} /> : null}
          {owner ? <OwnerActions who={who} /> : null}
          {writer ? (
            <section className="panel" aria-labelledby="everyone-title">
              <h2 id="everyone-title">Everyone's sessions</h2>
              <p className="muted">
                Ends every session of every person, admin token sessions included. You are signed out too.
              </p>
              <ConfirmButton
                label="End every session"
                title="End every session of everyone?"
                confirmLabel="End every session"
                danger
                action={async () => {
                  await api.post('/admin/sessions/terminate-all', {});
                  client.removeQueries({ predicate: (q) => q.queryKey[0] !== WHOAMI_KEY[0] });
                  client.setQueryData(WHOAMI_KEY, null);
                }}
              >
                <p>Everyone, you included, must sign in again.</p>
              </ConfirmButton>
            </section>
          ) : null}
          <details className="panel">
            <summary>What each role can do</summary>
            <TableRegion label="Roles and capabilities">
              <table>
                <caption className="sr-only">Built-in roles and their capabilities</caption>
                <thead>
                  <tr>
                    <th scope="col">Role</th>
                    <th scope="col">Capabilities</th>
                  </tr>
                </thead>
                <tbody>
                  {roles.data.roles.map((r) => (
                    <tr key={r.name}>
                      <th scope="row">{r.name}</th>
                      <td>{r.capabilities.join(', ')}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableRegion>
          </details>
        </>
      ) : null}
    </Page>
  );
}
