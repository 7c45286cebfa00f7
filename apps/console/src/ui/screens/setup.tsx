/**
 * First-run set-up: where the installation stands (`GET /admin/setup-state`) as a checklist with
 * what to do for each open item, claiming the first owner (a passkey, proven by the admin token),
 * and the break-glass key made IN THIS BROWSER: the secret half is offered as a file and never sent;
 * only the public half goes to the engine (`POST /admin/setup/break-glass-key`). The preflight
 * probes and the set-up acknowledgement live on the Posture screen (screens/posture.tsx), which
 * anyone signed in can open at any time; the checklist's last item links there.
 */
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { Link } from 'wouter';
import { api, saveBlob } from '../api/client.ts';
import { RecoveryCodesShown } from '../auth/recovery-codes.tsx';
import { isOwner, useSignedIn, WHOAMI_KEY } from '../auth/session.tsx';
import { registerPasskey } from '../auth/webauthn.ts';
import { AdminTokenField, ErrorBox, Field, Loading, Notice, Page } from '../components/ui.tsx';

export interface SetupState {
  keysReady: boolean;
  missing: string[];
  keys: { signer: boolean; operational: boolean; breakGlass: boolean; support: boolean };
  fingerprints: { signer: string; operational: string; breakGlass: string | null; support: string | null };
  counts: { jobs: number; members: number; owners: number };
  acknowledged: boolean;
}

const SETUP_KEY = ['setup-state'] as const;

function Item({ done, title, children }: { done: boolean; title: string; children?: ReactNode }) {
  return (
    <li className="panel">
      <h2>
        <span aria-hidden="true">{done ? '✓ ' : '○ '}</span>
        {title}
        <span className="visually-hidden">{done ? ' (done)' : ' (to do)'}</span>
      </h2>
      {children}
    </li>
  );
}

function ClaimOwner({ onDone }: { onDone: () => void }) {
  const client = useQueryClient();
  const [email, setEmail] = useState('');
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [codes, setCodes] = useState<string[] | null>(null);
  if (codes)
    return (
      <RecoveryCodesShown
        codes={codes}
        onConfirmed={() => {
          setCodes(null);
          void client.invalidateQueries({ queryKey: WHOAMI_KEY });
          onDone();
        }}
      />
    );
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        registerPasskey(email.trim(), { adminToken: token.trim() })
          .then((r) => {
            setToken('');
            setCodes(r.recoveryCodes);
          }, setError)
          .finally(() => setBusy(false));
      }}
    >
      <p>
        The first owner signs in with a passkey on this device. The admin token proves you may claim it; it is
        sent once with this request and not kept.
      </p>
      <Field label="Owner email">
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
      <AdminTokenField token={token} setToken={setToken} />
      <ErrorBox error={error} />
      <button type="submit" className="primary" disabled={busy}>
        Claim first owner with a passkey
      </button>
    </form>
  );
}

interface Generated {
  secretText: string;
  publicText: string;
  fingerprint: string;
}

function BreakGlassKey({ onDone }: { onDone: () => void }) {
  const [generated, setGenerated] = useState<Generated | null>(null);
  const [saved, setSaved] = useState(false);
  const [pasted, setPasted] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [result, setResult] = useState<string | null>(null);

  const generate = async () => {
    setBusy(true);
    setError(null);
    try {
      // Loaded only here: the post-quantum code is not part of the first screen's bundle.
      const crypto = await import('@coffer/crypto');
      const pair = crypto.generateRecipient();
      setGenerated({
        secretText: crypto.encodeKeyFile('recipient-secret', pair.secretKey),
        publicText: crypto.encodeKeyFile('recipient-public', pair.publicKey),
        fingerprint: crypto.fingerprint(pair.publicKey),
      });
      pair.secretKey.fill(0);
      setSaved(false);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const send = async (publicKey: string) => {
    setBusy(true);
    setError(null);
    try {
      const r = await api.post<{ fingerprint: string }>('/admin/setup/break-glass-key', { publicKey });
      setResult(r.fingerprint);
      // The secret half leaves this page's memory once the public half is in place.
      setGenerated(null);
      onDone();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (result)
    return <Notice kind="ok">The engine now seals every run to the break-glass key {result}.</Notice>;

  return (
    <div>
      <p>
        The break-glass key opens every archive offline with <code>coffer-recover</code>, with no engine
        involved. It is made here, in your browser: the secret half is saved to a file for you to keep
        offline; only the public half is sent to the engine.
      </p>
      {generated ? (
        <div className="panel">
          <p>
            Fingerprint: <code>{generated.fingerprint}</code>
          </p>
          <ol>
            <li>
              Save the secret key file and keep it offline (for example on two USB sticks in separate safes,
              or in your password manager). Whoever holds it can read every backup; if it is lost, only the
              engine can restore.
            </li>
            <li>
              On your worst day:{' '}
              <code>
                coffer-recover extract --from BUCKET-COPY --run RUN-ID --key coffer-break-glass.key --to DIR
              </code>
            </li>
          </ol>
          <div className="row">
            <button
              type="button"
              className="primary"
              onClick={() => {
                saveBlob(new Blob([generated.secretText], { type: 'text/plain' }), 'coffer-break-glass.key');
                setSaved(true);
              }}
            >
              Download secret key file
            </button>
            <button
              type="button"
              onClick={() =>
                saveBlob(
                  new Blob([generated.publicText], { type: 'text/plain' }),
                  'coffer-break-glass.key.pub',
                )
              }
            >
              Download public key
            </button>
          </div>
          <label className="check">
            <input type="checkbox" checked={saved} onChange={(e) => setSaved(e.target.checked)} /> I have
            saved the secret key file somewhere safe
          </label>
          <button
            type="button"
            className="primary"
            disabled={!saved || busy}
            onClick={() => void send(generated.publicText)}
          >
            Send the public key to the engine
          </button>
        </div>
      ) : (
        <button type="button" className="primary" disabled={busy} onClick={() => void generate()}>
          Generate the break-glass key in this browser
        </button>
      )}
      <details>
        <summary>Use a key made with coffer-recover keygen instead</summary>
        <Field label="Public key (contents of the .pub file)">
          {(id) => (
            <textarea id={id} value={pasted} onChange={(e) => setPasted(e.target.value)} spellCheck={false} />
          )}
        </Field>
        <button
          type="button"
          disabled={busy || pasted.trim() === ''}
          onClick={() => void send(pasted.trim())}
        >
          Send this public key
        </button>
      </details>
      <ErrorBox error={error} />
    </div>
  );
}

export function Setup() {
  const who = useSignedIn();
  const client = useQueryClient();
  const state = useQuery({ queryKey: SETUP_KEY, queryFn: () => api.get<SetupState>('/admin/setup-state') });
  const refresh = () => {
    void client.invalidateQueries({ queryKey: SETUP_KEY });
    void client.invalidateQueries({ queryKey: ['status'] });
  };
  const s = state.data;
  return (
    <Page title="Set-up">
      {state.isPending ? <Loading /> : null}
      <ErrorBox error={state.error} onRetry={() => void state.refetch()} />
      {s ? (
        <>
          {s.keysReady && s.counts.owners > 0 ? (
            <Notice kind="ok">Set-up is complete: runs seal, and an owner signs in with a passkey.</Notice>
          ) : (
            <Notice kind="warn">Set-up is not complete: see the open items below.</Notice>
          )}
          <ol className="checklist">
            <Item done={s.counts.owners > 0} title="First owner">
              {s.counts.owners > 0 ? (
                <p>
                  {s.counts.owners} owner{s.counts.owners === 1 ? '' : 's'}, {s.counts.members} member
                  {s.counts.members === 1 ? '' : 's'} in all.
                </p>
              ) : isOwner(who) ? (
                <ClaimOwner onDone={refresh} />
              ) : (
                <p>An owner must claim the installation with the admin token.</p>
              )}
            </Item>
            <Item done={s.keys.breakGlass} title="Break-glass key">
              {s.keys.breakGlass ? (
                <p>
                  In force: <code>{s.fingerprints.breakGlass}</code>. Check that it matches the fingerprint of
                  the key file you keep.
                </p>
              ) : isOwner(who) ? (
                <BreakGlassKey onDone={refresh} />
              ) : (
                <p>Runs cannot seal until an owner sets the break-glass key.</p>
              )}
            </Item>
            <Item done title="Engine keys">
              <dl className="facts">
                <dt>Signer</dt>
                <dd>
                  <code>{s.fingerprints.signer}</code> (pin this in <code>coffer-recover --pin-signer</code>)
                </dd>
                <dt>Operational</dt>
                <dd>
                  <code>{s.fingerprints.operational}</code>
                </dd>
                <dt>Vendor support key</dt>
                <dd>
                  {s.fingerprints.support ? (
                    <code>{s.fingerprints.support}</code>
                  ) : (
                    'not configured (optional)'
                  )}
                </dd>
              </dl>
            </Item>
            <Item done={s.counts.jobs > 0} title="A first job">
              <p>
                {s.counts.jobs > 0
                  ? `${s.counts.jobs} job${s.counts.jobs === 1 ? '' : 's'} configured.`
                  : 'Create a job on the Jobs screen.'}
              </p>
            </Item>
            <Item done={s.acknowledged} title="Preflight and acknowledgement">
              <p>
                {s.acknowledged
                  ? 'An owner acknowledged the key set-up. '
                  : 'Once the keys are in place, an owner acknowledges the set-up. '}
                The <Link href="/posture">Posture</Link> screen runs the preflight probes (destinations, keys,
                clock, mail, sign-in providers, updates) and holds the acknowledgement.
              </p>
            </Item>
          </ol>
        </>
      ) : null}
    </Page>
  );
}
