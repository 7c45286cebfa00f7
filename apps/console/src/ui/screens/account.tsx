/**
 * My account (docs/identity.md): who I am and how I am signed in; add another passkey (self-add);
 * my passkeys and revoking one (`POST /admin/signin-factors/revoke`); new recovery codes (shown
 * once, then confirmed); ending my other sessions, or all of them.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, setCsrfToken } from '../api/client.ts';
import { RecoveryCodesShown } from '../auth/recovery-codes.tsx';
import { useSignedIn, WHOAMI_KEY } from '../auth/session.tsx';
import { registerPasskey } from '../auth/webauthn.ts';
import { ErrorBox, formatTime, Notice, Page, useRunner } from '../components/ui.tsx';
import { ConfirmButton, TableRegion } from './admin/common.tsx';
import type { RegenerateAnswer, TerminateOthersAnswer } from './admin/types.ts';

const KIND_TEXT: Record<string, string> = {
  passkey: 'passkey',
  recovery: 'recovery code',
  token: 'admin token',
  oidc: 'OpenID Connect',
  saml: 'SAML',
};

interface PasskeyRef {
  id: string;
  transports: string[];
  createdAt: string;
  usedAt: string | null;
}

/** The caller's own passkeys (`GET /admin/signin-factors`). */
async function myPasskeys(): Promise<PasskeyRef[]> {
  return (await api.get<{ passkeys: PasskeyRef[] }>('/admin/signin-factors')).passkeys;
}

function useSignOutHere() {
  const client = useQueryClient();
  return () => {
    client.removeQueries({ predicate: (q) => q.queryKey[0] !== WHOAMI_KEY[0] });
    client.setQueryData(WHOAMI_KEY, null);
  };
}

function Passkeys({ email }: { email: string }) {
  const client = useQueryClient();
  const signedOut = useSignOutHere();
  const [codes, setCodes] = useState<string[] | null>(null);
  const [list, setList] = useState<PasskeyRef[] | null>(null);
  const runner = useRunner();
  const busy = runner.busy !== null;
  const [message, setMessage] = useState<string | null>(null);

  const run = (fn: () => Promise<void>) => {
    setMessage(null);
    return runner.run(fn);
  };

  return (
    <section className="panel" aria-labelledby="passkeys-title">
      <h2 id="passkeys-title">Passkeys</h2>
      {codes ? (
        <>
          <Notice kind="ok">
            The new passkey is saved. Adding a passkey also issues new recovery codes.
          </Notice>
          <RecoveryCodesShown
            codes={codes}
            onConfirmed={() => {
              setCodes(null);
              setMessage('The new recovery codes are active; the old ones no longer work.');
              void client.invalidateQueries({ queryKey: WHOAMI_KEY });
            }}
          />
        </>
      ) : (
        <>
          <p className="muted">
            Add a passkey on another device (or a security key) so losing one device does not lock you out.
          </p>
          <div className="row">
            <button
              type="button"
              disabled={busy}
              onClick={() =>
                void run(async () => {
                  const r = await registerPasskey(email);
                  setCodes(r.recoveryCodes);
                  setList(null);
                })
              }
            >
              Add another passkey
            </button>
            <button
              type="button"
              disabled={busy}
              onClick={() =>
                void run(async () => {
                  setList(await myPasskeys());
                })
              }
            >
              {list ? 'Refresh my passkeys' : 'Show my passkeys'}
            </button>
          </div>
        </>
      )}
      <ErrorBox error={runner.error} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {list && !codes ? (
        list.length === 0 ? (
          <p className="muted">No passkeys are registered for {email}.</p>
        ) : (
          <TableRegion label="My passkeys">
            <table>
              <caption className="sr-only">Passkeys registered for {email}</caption>
              <thead>
                <tr>
                  <th scope="col">Credential id</th>
                  <th scope="col">Transports</th>
                  <th scope="col">Added</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Revoke</th>
                </tr>
              </thead>
              <tbody>
                {list.map((p, i) => (
                  <tr key={p.id}>
                    <td className="mono">{p.id}</td>
                    <td>{p.transports.join(', ') || '–'}</td>
                    <td>{formatTime(p.createdAt)}</td>
                    <td>{p.usedAt ? formatTime(p.usedAt) : 'never'}</td>
                    <td>
                      <ConfirmButton
                        label="Revoke"
                        accessibleLabel={`Revoke passkey ${i + 1}`}
                        title="Revoke this passkey?"
                        confirmLabel="Revoke passkey"
                        danger
                        action={async () => {
                          await api.post('/admin/signin-factors/revoke', { credentialId: p.id });
                          // The engine ends every session of the holder: this one too.
                          signedOut();
                        }}
                      >
                        <p>
                          The passkey stops working and every session of yours ends, this one included. Sign
                          in again with another passkey or a recovery code.
                        </p>
                      </ConfirmButton>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableRegion>
        )
      ) : null}
    </section>
  );
}

function RecoveryCodes() {
  const [codes, setCodes] = useState<string[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  return (
    <section className="panel" aria-labelledby="codes-title">
      <h2 id="codes-title">Recovery codes</h2>
      {codes ? (
        <RecoveryCodesShown
          codes={codes}
          onConfirmed={() => {
            setCodes(null);
            setDone(true);
          }}
        />
      ) : (
        <>
          <p className="muted">
            New codes replace the old ones once you confirm you have kept them. Until then the old codes still
            work.
          </p>
          <button
            type="button"
            disabled={busy}
            onClick={() => {
              setBusy(true);
              setError(null);
              setDone(false);
              api
                .post<RegenerateAnswer>('/admin/auth/recovery-codes/regenerate', {})
                .then((r) => setCodes(r.recoveryCodes), setError)
                .finally(() => setBusy(false));
            }}
          >
            Regenerate recovery codes
          </button>
        </>
      )}
      <ErrorBox error={error} />
      {done ? (
        <Notice kind="ok">The new recovery codes are active; the old ones no longer work.</Notice>
      ) : null}
    </section>
  );
}

function Sessions({ person }: { person: boolean }) {
  const client = useQueryClient();
  const signedOut = useSignOutHere();
  const [message, setMessage] = useState<string | null>(null);
  return (
    <section className="panel" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Sessions</h2>
      {message ? <Notice kind="ok">{message}</Notice> : null}
      <div className="row">
        {person ? (
          <>
            <ConfirmButton
              label="Sign out other sessions"
              title="Sign out your other sessions?"
              confirmLabel="Sign out other sessions"
              action={async () => {
                const r = await api.post<TerminateOthersAnswer>('/admin/sessions/terminate-others', {});
                setCsrfToken(r.csrfToken);
                await client.invalidateQueries({ queryKey: WHOAMI_KEY });
                setMessage('Your other sessions have ended. This one continues.');
              }}
            >
              <p>Every other browser or device signed in as you is signed out. This one stays signed in.</p>
            </ConfirmButton>
            <ConfirmButton
              label="Sign out everywhere"
              title="Sign out everywhere?"
              confirmLabel="Sign out everywhere"
              danger
              action={async () => {
                await api
                  .post<TerminateOthersAnswer>('/admin/sessions/terminate-others', {})
                  .then((r) => setCsrfToken(r.csrfToken));
                await api.post('/admin/sessions/terminate', {}, { quiet401: true });
                signedOut();
              }}
            >
              <p>Every session of yours ends, this one included.</p>
            </ConfirmButton>
          </>
        ) : (
          <ConfirmButton
            label="End this session"
            title="End this session?"
            confirmLabel="End this session"
            action={async () => {
              await api.post('/admin/sessions/terminate', {}, { quiet401: true });
              signedOut();
            }}
          >
            <p>This admin token session ends; the token itself keeps working until it is retired.</p>
          </ConfirmButton>
        )}
      </div>
    </section>
  );
}

export function Account() {
  const who = useSignedIn();
  const kind = who.sessionKind;
  const person = who.email !== null && kind !== undefined && kind !== 'token';
  return (
    <Page title="Account">
      <dl className="facts">
        <dt>Email</dt>
        <dd>{who.email ?? 'none (not a person)'}</dd>
        <dt>Subject</dt>
        <dd className="mono">{who.subject ?? '–'}</dd>
        <dt>Role</dt>
        <dd>{who.role}</dd>
        <dt>Role source</dt>
        <dd>{who.roleSource}</dd>
        <dt>Signed in with</dt>
        <dd>{kind ? (KIND_TEXT[kind] ?? kind) : who.method}</dd>
        <dt>Session expires</dt>
        <dd>
          {who.sessionExpiresAt ? formatTime(who.sessionExpiresAt) : 'no console session (header-borne)'}
        </dd>
      </dl>
      <details className="panel">
        <summary>What your role can do ({who.capabilities.length} capabilities)</summary>
        <p>{who.capabilities.join(', ')}</p>
      </details>
      {person && who.email ? (
        <>
          <Passkeys email={who.email} />
          <RecoveryCodes />
        </>
      ) : (
        <Notice>
          Passkeys and recovery codes belong to a person's email; this session has none. Sign in with a
          passkey to manage them.
        </Notice>
      )}
      {kind !== undefined ? <Sessions person={person} /> : null}
    </Page>
  );
}
