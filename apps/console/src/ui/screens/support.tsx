/**
 * Support (docs/pull-api.md, docs/support-bundle.md): the vendor sealing key and signer, each pull
 * scope's redacted credential state (`GET /admin/support`, never a secret); an owner mints a
 * scope's credential (the secret is shown once; minting again replaces it) or revokes it; anyone
 * with `posture.read` downloads a fresh support bundle.
 */
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, isQueued } from '../api/client.ts';
import { isOwner, useSignedIn } from '../auth/session.tsx';
import { ErrorBox, Field, formatTime, Loading, Notice, Page } from '../components/ui.tsx';
import { ConfirmButton, hoursToSeconds, ShownOnce, TableRegion, Tag } from './admin/common.tsx';
import { OWNER_ACTIONS_KEY } from './admin/owner-actions.tsx';
import {
  type CredentialView,
  type MintAnswer,
  PULL_SCOPES,
  type PullScope,
  SCOPE_HOURS,
  type SupportAnswer,
} from './admin/types.ts';

const SUPPORT_KEY = ['support'] as const;

const SCOPE_TEXT: Record<PullScope, string> = {
  diagnostics: 'GET /support/diagnostics: a support bundle on demand',
  'audit-feed': 'GET /support/audit-feed: the audit chain, paged',
  metrics: 'GET /metrics: Prometheus metrics',
};

function stateOf(c: CredentialView): { kind: string; text: string } {
  if (c.clientId === null) return { kind: 'none', text: 'none' };
  if (c.expired) return { kind: 'expired', text: 'expired' };
  return { kind: 'active', text: 'active' };
}

function hoursText(h: number): string {
  return h % 24 === 0 ? `${h / 24} days` : `${h} hours`;
}

function MintForm({ onMinted }: { onMinted: (m: MintAnswer) => void }) {
  const client = useQueryClient();
  const [scope, setScope] = useState<PullScope>('diagnostics');
  const [hours, setHours] = useState('');
  const [queued, setQueued] = useState<string | null>(null);
  const mint = useMutation({
    mutationFn: () => {
      const lifetimeSeconds = hoursToSeconds(hours);
      return api.postMaybeQueued<MintAnswer>('/admin/support/credentials', {
        scope,
        ...(lifetimeSeconds === undefined ? {} : { lifetimeSeconds }),
      });
    },
    onSuccess: (r) => {
      setHours('');
      if (isQueued(r)) {
        setQueued(`Minting the ${scope} credential is queued for a second owner (owner action ${r.id}).`);
        void client.invalidateQueries({ queryKey: OWNER_ACTIONS_KEY });
      } else {
        setQueued(null);
        onMinted(r);
      }
      void client.invalidateQueries({ queryKey: SUPPORT_KEY });
    },
  });
  const limits = SCOPE_HOURS[scope];
  return (
    <section className="panel" aria-labelledby="mint-title">
      <h2 id="mint-title">Mint a pull credential</h2>
      <p className="muted">
        One credential per scope: minting again replaces the scope's credential and the old one stops working.
      </p>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault();
          mint.mutate();
        }}
      >
        <Field label="Scope">
          {(id) => (
            <select id={id} value={scope} onChange={(e) => setScope(e.target.value as PullScope)}>
              {PULL_SCOPES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field
          label="Lifetime (hours)"
          hint={`Default ${hoursText(limits.default)}, at most ${hoursText(limits.max)}.`}
        >
          {(id, hint) => (
            <input
              id={id}
              aria-describedby={hint}
              type="number"
              min={1}
              max={limits.max}
              step="any"
              inputMode="decimal"
              placeholder={String(limits.default)}
              value={hours}
              onChange={(e) => setHours(e.target.value)}
            />
          )}
        </Field>
        <button type="submit" className="primary" disabled={mint.isPending}>
          Mint credential
        </button>
      </form>
      <p className="muted">{SCOPE_TEXT[scope]}</p>
      <ErrorBox error={mint.error} />
      {queued ? <Notice kind="ok">{queued}</Notice> : null}
    </section>
  );
}

export function Support() {
  const who = useSignedIn();
  const owner = isOwner(who);
  const client = useQueryClient();
  const support = useQuery({
    queryKey: SUPPORT_KEY,
    queryFn: () => api.get<SupportAnswer>('/admin/support'),
  });
  const [minted, setMinted] = useState<MintAnswer | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const bundle = useMutation({
    mutationFn: () => api.download('/admin/support/bundle', 'coffer-support-bundle.json'),
    onSuccess: () => setMessage('The support bundle was generated and downloaded.'),
  });

  return (
    <Page
      title="Support"
      actions={
        <button type="button" disabled={bundle.isPending} onClick={() => bundle.mutate()}>
          {bundle.isPending ? 'Generating…' : 'Download support bundle'}
        </button>
      }
    >
      <ErrorBox error={bundle.error} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {support.isPending ? <Loading /> : null}
      <ErrorBox error={support.error} onRetry={() => void support.refetch()} />
      {support.data ? (
        <>
          <dl className="facts">
            <dt>Support bundle</dt>
            <dd>
              {support.data.bundleKind === 'engine-support-bundle-sealed'
                ? 'sealed to the vendor key (only the vendor can open it)'
                : 'signed, not sealed (no vendor key configured; review it before sending)'}
            </dd>
            <dt>Vendor sealing key</dt>
            <dd>
              {support.data.vendorSealingKey.present ? (
                <span className="mono">{support.data.vendorSealingKey.fingerprint}</span>
              ) : (
                'not configured'
              )}
            </dd>
            <dt>Engine signer</dt>
            <dd>
              {support.data.signer.present ? (
                <span className="mono">{support.data.signer.fingerprint}</span>
              ) : (
                'missing'
              )}
            </dd>
          </dl>

          {minted ? (
            <ShownOnce label="Pull credential" value={minted.credential} onDone={() => setMinted(null)}>
              <p>
                The <strong>{minted.scope}</strong> credential, valid until {formatTime(minted.expiresAt)}
                {minted.replaced ? '; it replaced the previous one' : ''}. Present it as{' '}
                <code>Authorization: Bearer &lt;credential&gt;</code>.
              </p>
            </ShownOnce>
          ) : null}

          <h2>Pull credentials</h2>
          <TableRegion label="Pull credentials">
            <table>
              <caption className="sr-only">Pull credentials by scope (secrets are never shown here)</caption>
              <thead>
                <tr>
                  <th scope="col">Scope</th>
                  <th scope="col">State</th>
                  <th scope="col">Client id</th>
                  <th scope="col">Granted</th>
                  <th scope="col">Expires</th>
                  <th scope="col">Last pull</th>
                  {owner ? <th scope="col">Revoke</th> : null}
                </tr>
              </thead>
              <tbody>
                {support.data.credentials.map((c) => {
                  const st = stateOf(c);
                  return (
                    <tr key={c.scope}>
                      <th scope="row">{c.scope}</th>
                      <td>
                        <Tag kind={st.kind}>{st.text}</Tag>
                      </td>
                      <td className="mono">{c.clientId ?? '–'}</td>
                      <td>
                        {c.grantedAt
                          ? `${formatTime(c.grantedAt)}${c.grantedBy ? ` by ${c.grantedBy}` : ''}`
                          : '–'}
                      </td>
                      <td>{formatTime(c.expiresAt)}</td>
                      <td>
                        {formatTime(c.lastPullAt)}
                        {c.pulls.length > 0 ? (
                          <small className="muted"> ({c.pulls.length} recent)</small>
                        ) : null}
                      </td>
                      {owner ? (
                        <td>
                          {c.clientId ? (
                            <ConfirmButton
                              label="Revoke"
                              accessibleLabel={`Revoke the ${c.scope} credential`}
                              title={`Revoke the ${c.scope} credential?`}
                              confirmLabel="Revoke"
                              danger
                              action={async () => {
                                await api.post('/admin/support/credentials/delete', { scope: c.scope });
                                if (minted?.scope === c.scope) setMinted(null);
                                setMessage(`The ${c.scope} credential is revoked; it no longer works.`);
                                await client.invalidateQueries({ queryKey: SUPPORT_KEY });
                              }}
                            >
                              <p>
                                Whoever holds it can no longer pull. This cannot be undone; mint a new one if
                                needed.
                              </p>
                            </ConfirmButton>
                          ) : (
                            <span className="muted">–</span>
                          )}
                        </td>
                      ) : null}
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </TableRegion>
          {owner ? (
            <MintForm
              onMinted={(m) => {
                setMessage(null);
                setMinted(m);
              }}
            />
          ) : (
            <p className="muted">Only an owner mints or revokes pull credentials.</p>
          )}
        </>
      ) : null}
    </Page>
  );
}
