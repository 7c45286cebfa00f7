/**
 * The step-up prompt: when the engine answers 401 `stepUpRequired`, the API client asks this
 * dialog for fresh proof and then retries the same request, so the person stays where they were.
 * Passkey sessions confirm with their passkey; a token session presents the admin token again
 * (`POST /admin/session/bootstrap` renews its proof); a perimeter caller is told to sign in at
 * the access provider again.
 */
import { useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useCallback, useEffect, useRef, useState } from 'react';
import { api, setStepUpHandler } from '../api/client.ts';
import { messageOf } from '../api/errors.ts';
import { AdminTokenField, Modal } from '../components/ui.tsx';
import { WHOAMI_KEY, type Whoami } from './session.tsx';
import { stepUpWithPasskey } from './webauthn.ts';

interface Pending {
  reauth: string | undefined;
  resolve: (headers: Record<string, string>) => void;
  reject: (err: Error) => void;
}

export class StepUpCancelled extends Error {
  constructor() {
    super('The action was not confirmed.');
    this.name = 'StepUpCancelled';
  }
}

/**
 * A token session cannot step up (it has no passkey): its proof is the admin token itself, so it
 * is exchanged again. The bearer is checked first without the cookie (a live cookie would take
 * precedence over it), then the old token session ends and a new one starts.
 */
async function renewTokenSession(token: string): Promise<void> {
  const authorization = { authorization: `Bearer ${token}` };
  const check = await fetch('/admin/whoami', { headers: authorization, credentials: 'omit' });
  if (!check.ok) throw new Error('That is not the admin token.');
  await api.post('/admin/auth/logout', {}, { quiet401: true });
  await api.post('/admin/session/bootstrap', {}, { headers: authorization, quiet401: true });
}

export function StepUpProvider({ children }: { children: ReactNode }) {
  const client = useQueryClient();
  const [pending, setPending] = useState<Pending | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [token, setToken] = useState('');
  const pendingRef = useRef<Pending | null>(null);
  pendingRef.current = pending;

  useEffect(() => {
    setStepUpHandler(
      (reauth) =>
        new Promise((resolve, reject) => {
          setError(null);
          setToken('');
          setPending({ reauth, resolve, reject });
        }),
    );
    return () => setStepUpHandler(undefined);
  }, []);

  const who = client.getQueryData<Whoami | null>(WHOAMI_KEY);
  const tokenSession = who?.sessionKind === 'token';

  const cancel = useCallback(() => {
    pendingRef.current?.reject(new StepUpCancelled());
    setPending(null);
  }, []);

  const confirm = async () => {
    if (!pending) return;
    setBusy(true);
    setError(null);
    try {
      let headers: Record<string, string> = {};
      if (tokenSession) await renewTokenSession(token.trim());
      else headers = await stepUpWithPasskey();
      await client.invalidateQueries({ queryKey: WHOAMI_KEY });
      pending.resolve(headers);
      setPending(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      {children}
      <Modal open={pending !== null} title="Confirm it is you" onClose={cancel}>
        {pending?.reauth === 'access' ? (
          <p>This action needs a fresh sign-in at your access provider. Sign in there again, then retry.</p>
        ) : tokenSession ? (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void confirm();
            }}
          >
            <p>This action needs fresh proof. Enter the admin token again.</p>
            <AdminTokenField token={token} setToken={setToken} />
            {error ? (
              <p className="msg msg-error" role="alert">
                {messageOf(error)}
              </p>
            ) : null}
            <div className="row">
              <button type="submit" className="primary" disabled={busy}>
                Confirm
              </button>
              <button type="button" onClick={cancel}>
                Cancel
              </button>
            </div>
          </form>
        ) : (
          <div>
            <p>
              This action needs fresh proof of presence. Confirm with your passkey; the action then continues.
            </p>
            {error ? (
              <p className="msg msg-error" role="alert">
                {messageOf(error)}
              </p>
            ) : null}
            <div className="row">
              <button type="button" className="primary" disabled={busy} onClick={() => void confirm()}>
                Confirm with passkey
              </button>
              <button type="button" onClick={cancel}>
                Cancel
              </button>
            </div>
          </div>
        )}
      </Modal>
    </>
  );
}
