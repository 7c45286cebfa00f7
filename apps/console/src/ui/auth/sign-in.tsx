/**
 * Sign-in: a passkey (the usual way), a recovery code, or the admin token (exchanged at once for a
 * one-hour token session cookie; the token itself is never stored by the console). Links carrying
 * `#setup=` (the emailed first-owner link) or `#invite=` open the registration form instead.
 */
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client.ts';
import { ErrorBox, Field, Notice } from '../components/ui.tsx';
import { RecoveryCodesShown } from './recovery-codes.tsx';
import { WHOAMI_KEY } from './session.tsx';
import { passkeysSupported, type Registered, registerPasskey, signInWithPasskey } from './webauthn.ts';

type Mode = 'passkey' | 'recovery' | 'token';

/** `#invite=<token>&email=<email>` or `#setup=<token>&email=<email>` from a link. */
export function linkFromHash(
  hash: string,
): { kind: 'invite' | 'setup'; token: string; email: string } | null {
  const params = new URLSearchParams(hash.replace(/^#/, ''));
  const email = params.get('email') ?? '';
  const invite = params.get('invite');
  if (invite) return { kind: 'invite', token: invite, email };
  const setup = params.get('setup');
  if (setup) return { kind: 'setup', token: setup, email };
  return null;
}

export function SignIn() {
  const client = useQueryClient();
  const link = linkFromHash(window.location.hash);
  const [mode, setMode] = useState<Mode>('passkey');
  const [email, setEmail] = useState(link?.email ?? '');
  const [code, setCode] = useState('');
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [registered, setRegistered] = useState<Registered | null>(null);

  const done = async () => {
    history.replaceState(null, '', window.location.pathname);
    await client.invalidateQueries({ queryKey: WHOAMI_KEY });
  };

  const run = async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (registered)
    return (
      <main className="center">
        <div className="card">
          <h1>Passkey saved</h1>
          <RecoveryCodesShown codes={registered.recoveryCodes} onConfirmed={() => void done()} />
        </div>
      </main>
    );

  if (link)
    return (
      <main className="center">
        <form
          className="card"
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              setRegistered(
                await registerPasskey(
                  email.trim(),
                  link.kind === 'invite' ? { inviteToken: link.token } : { setupToken: link.token },
                ),
              );
            });
          }}
        >
          <h1>{link.kind === 'invite' ? 'Accept your invitation' : 'Set up the first owner'}</h1>
          <p>Create a passkey for this address on this device. You will get recovery codes to keep.</p>
          <Field label="Email">
            {(id) => (
              <input
                id={id}
                type="email"
                autoComplete="username webauthn"
                value={email}
                onChange={(e) => setEmail(e.target.value)}
                required
              />
            )}
          </Field>
          <ErrorBox error={error} />
          <button type="submit" className="primary" disabled={busy}>
            Create passkey
          </button>
        </form>
      </main>
    );

  return (
    <main className="center">
      <div className="card">
        <h1>Sign in to Coffer</h1>
        <div className="tabs" role="tablist" aria-label="Sign-in method">
          {(
            [
              ['passkey', 'Passkey'],
              ['recovery', 'Recovery code'],
              ['token', 'Admin token'],
            ] as const
          ).map(([m, label]) => (
            <button
              key={m}
              type="button"
              role="tab"
              aria-selected={mode === m}
              className={mode === m ? 'tab active' : 'tab'}
              onClick={() => {
                setMode(m);
                setError(null);
              }}
            >
              {label}
            </button>
          ))}
        </div>
        {mode === 'passkey' ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void run(async () => {
                await signInWithPasskey(email.trim());
                await done();
              });
            }}
          >
            {passkeysSupported() ? null : (
              <Notice kind="warn">This browser does not support passkeys.</Notice>
            )}
            <Field label="Email">
              {(id) => (
                <input
                  id={id}
                  type="email"
                  autoComplete="username webauthn"
                  value={email}
                  onChange={(e) => setEmail(e.target.value)}
                  required
                />
              )}
            </Field>
            <ErrorBox error={error} />
            <button type="submit" className="primary" disabled={busy}>
              Sign in with passkey
            </button>
          </form>
        ) : mode === 'recovery' ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void run(async () => {
                await api.post(
                  '/admin/auth/recovery',
                  { email: email.trim(), code: code.trim() },
                  { quiet401: true },
                );
                await done();
              });
            }}
          >
            <Field label="Email">
              {(id) => (
                <input
                  id={id}
                  type="email"
                  autoComplete="username"
                  value={email}
                  onChange={(e) => setEmail(e.target.value)}
                  required
                />
              )}
            </Field>
            <Field
              label="Recovery code"
              hint="Each code works once. Register a new passkey after signing in."
            >
              {(id, hint) => (
                <input
                  id={id}
                  aria-describedby={hint}
                  autoComplete="one-time-code"
                  value={code}
                  onChange={(e) => setCode(e.target.value)}
                  required
                />
              )}
            </Field>
            <ErrorBox error={error} />
            <button type="submit" className="primary" disabled={busy}>
              Sign in with recovery code
            </button>
          </form>
        ) : (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void run(async () => {
                await api.post(
                  '/admin/session/bootstrap',
                  {},
                  { headers: { authorization: `Bearer ${token.trim()}` }, quiet401: true },
                );
                setToken('');
                await done();
              });
            }}
          >
            <p className="muted">
              For first-run set-up and emergencies. The token is exchanged for a one-hour session and is not
              kept by the console.
            </p>
            <Field label="Admin token">
              {(id) => (
                <input
                  id={id}
                  type="password"
                  autoComplete="off"
                  value={token}
                  onChange={(e) => setToken(e.target.value)}
                  required
                />
              )}
            </Field>
            <ErrorBox error={error} />
            <button type="submit" className="primary" disabled={busy}>
              Sign in with admin token
            </button>
          </form>
        )}
      </div>
    </main>
  );
}
