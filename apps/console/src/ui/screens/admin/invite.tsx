/**
 * Invite a person (an owner; `POST /admin/roles/invite`, step-up): email and role in, a single-use
 * link out, shown once: `<origin>/#invite=<token>&email=<email>`, which the sign-in screen opens
 * as "Accept your invitation".
 */
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../../api/client.ts';
import { ErrorBox, Field, formatTime } from '../../components/ui.tsx';
import { ShownOnce } from './common.tsx';
import type { InviteAnswer } from './types.ts';

export function inviteLink(answer: InviteAnswer): string {
  return `${window.location.origin}/#invite=${encodeURIComponent(answer.inviteToken)}&email=${encodeURIComponent(answer.email)}`;
}

const LIFETIMES = [
  { label: '1 day', seconds: 86_400 },
  { label: '7 days', seconds: 7 * 86_400 },
  { label: '30 days', seconds: 30 * 86_400 },
];

export function InviteForm({ roles }: { roles: string[] }) {
  const client = useQueryClient();
  const [email, setEmail] = useState('');
  const [role, setRole] = useState(roles.includes('operator') ? 'operator' : (roles[0] ?? ''));
  const [ttl, setTtl] = useState(String(7 * 86_400));
  const invite = useMutation({
    mutationFn: () =>
      api.post<InviteAnswer>('/admin/roles/invite', {
        email: email.trim(),
        ...(role ? { role } : {}),
        ttlSeconds: Number(ttl),
      }),
    onSuccess: () => {
      setEmail('');
      void client.invalidateQueries({ queryKey: ['roles'] });
    },
  });

  return (
    <section className="panel" aria-labelledby="invite-title">
      <h2 id="invite-title">Invite a person</h2>
      {invite.data ? (
        <ShownOnce label="Invite link" value={inviteLink(invite.data)} onDone={() => invite.reset()}>
          <p>
            Send this link to <strong>{invite.data.email}</strong>. It works once, only for that address,
            until {formatTime(invite.data.expiresAt)}; they get the role{' '}
            <strong>{invite.data.role ?? 'viewer'}</strong> when they create their passkey.
          </p>
        </ShownOnce>
      ) : (
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault();
            invite.mutate();
          }}
        >
          <Field label="Email">
            {(id) => (
              <input
                id={id}
                type="email"
                autoComplete="off"
                value={email}
                onChange={(e) => setEmail(e.target.value)}
                required
              />
            )}
          </Field>
          <Field label="Role">
            {(id) => (
              <select id={id} value={role} onChange={(e) => setRole(e.target.value)}>
                {roles.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Link valid for">
            {(id) => (
              <select id={id} value={ttl} onChange={(e) => setTtl(e.target.value)}>
                {LIFETIMES.map((l) => (
                  <option key={l.seconds} value={String(l.seconds)}>
                    {l.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <button type="submit" className="primary" disabled={invite.isPending}>
            Create invite link
          </button>
        </form>
      )}
      <ErrorBox error={invite.error} />
    </section>
  );
}
