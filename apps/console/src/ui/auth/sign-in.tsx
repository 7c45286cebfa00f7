/**
 * Sign-in: a passkey (the usual way), a recovery code, or the admin token (exchanged at once for a
 * one-hour token session cookie; the token itself is never stored by the console). Links carrying
 * `#setup=` (the emailed first-owner link) or `#invite=` open the registration form instead.
 * Identity providers (`GET /admin/oidc/providers`, no session needed) are "Sign in with …" links:
 * a top-level navigation to the engine's start URL, so its redirects and cookies work as the
 * browser's own. A sign-in that came back as `?oidc=failed` or `?saml=failed` shows one message,
 * with no detail (the engine logs the reason).
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from '../api/client.ts';
import { AdminTokenField, ErrorBox, Field, Notice, useRunner } from '../components/ui.tsx';
import { RecoveryCodesShown } from './recovery-codes.tsx';
import { WHOAMI_KEY } from './session.tsx';
import { passkeysSupported, type Registered, registerPasskey, signInWithPasskey } from './webauthn.ts';

type Mode = 'passkey' | 'recovery' | 'token';

/** An identity provider to sign in with (`GET /admin/oidc/providers`). */
export interface SignInProvider {
  id: string;
  kind: 'oidc' | 'saml';
  displayName: string;
  startUrl: string;
}

export const SSO_FAILED_MESSAGE =
  'Sign-in through your identity provider did not complete. Try again or use a passkey.';

/** True when the page was opened by the engine after a failed identity-provider sign-in. */
export function ssoFailed(search: string): boolean {
  const q = new URLSearchParams(search);
  return q.get('oidc') === 'failed' || q.get('saml') === 'failed';
}

/** A start URL the engine gave: a path on this origin under /admin/ (never another site). */
function safeStart(url: string): string | null {
  return /^\/admin\/(oidc|saml)\/start\/[a-z0-9-]+$/.test(url) ? url : null;
}

function ProviderButtons() {
  const providers = useQuery({
    queryKey: ['sso-providers'],
    queryFn: () => api.get<{ providers: SignInProvider[] }>('/admin/oidc/providers', { quiet401: true }),
    // An engine without single sign-on, or one that cannot answer: the other methods still work.
    retry: false,
    staleTime: 60_000,
  });
  const list = (providers.data?.providers ?? []).filter((p) => safeStart(p.startUrl) !== null);
  if (list.length === 0) return null;
  return (
    <section className="sso" aria-label="Sign in with an identity provider">
      <ul className="sso-list">
        {list.map((p) => (
          <li key={p.id}>
            <a className="sso-button" href={safeStart(p.startUrl)!}>
              Sign in with {p.displayName}
            </a>
          </li>
        ))}
      </ul>
      <p className="sso-or muted">or</p>
    </section>
  );
}

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
  const { busy, error, setError, run } = useRunner();
  const [registered, setRegistered] = useState<Registered | null>(null);
  const [failed] = useState(() => ssoFailed(window.location.search));

  useEffect(() => {
    // The message stays on screen; a reload or bookmark of this address does not bring it back.
    if (failed) history.replaceState(null, '', window.location.pathname + window.location.hash);
  }, [failed]);

  const done = async () => {
    history.replaceState(null, '', window.location.pathname);
    await client.invalidateQueries({ queryKey: WHOAMI_KEY });
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
          <button type="submit" className="primary" disabled={busy !== null}>
            Create passkey
          </button>
        </form>
      </main>
    );

  return (
    <main className="center">
      <div className="card">
        <h1>Sign in to Coffer</h1>
        {failed ? (
          <div className="msg msg-error" role="alert">
            {SSO_FAILED_MESSAGE}
          </div>
        ) : null}
        <ProviderButtons />
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
            <button type="submit" className="primary" disabled={busy !== null}>
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
            <button type="submit" className="primary" disabled={busy !== null}>
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
            <AdminTokenField token={token} setToken={setToken} />
            <ErrorBox error={error} />
            <button type="submit" className="primary" disabled={busy !== null}>
              Sign in with admin token
            </button>
            <p className="muted">
              Engine state lost? <a href="/recover">Restore the control plane from an export</a>.
            </p>
          </form>
        )}
      </div>
    </main>
  );
}
