/**
 * The connections list: per connection its kind, state, provider side (issuer or IdP entity id,
 * client id, the client secret only as "set" or "not set", scopes and claims or attributes), the
 * allowed domains, the group-to-role rows, and the URLs to copy into the provider (redirect URI;
 * SP entity id, ACS URL and SP metadata URL). Actions: test (`POST /admin/idp/connections/test`),
 * edit, enable or disable, delete with confirmation.
 */
import { useId, useState } from 'react';
import { api } from '../../api/client.ts';
import { CopyButton, formatTime } from '../../components/ui.tsx';
import { ItemActions, Tag } from '../admin/common.tsx';
import { type Connection, IDP_KEY, kindLabel, type TestAnswer, testReasonText } from './types.ts';

function CopyUrl({ label, url }: { label: string; url: string | null }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>
        {url === null ? (
          <span className="muted">not known: the engine has no CONSOLE_ORIGIN</span>
        ) : (
          <span className="idp-url">
            <code className="mono">{url}</code>
            <CopyButton text={url} label={`Copy ${label.toLowerCase()}`} />
          </span>
        )}
      </dd>
    </>
  );
}

function ConnectionCard({
  c,
  onEdit,
  onDone,
}: {
  c: Connection;
  onEdit: () => void;
  onDone: (message: string) => void;
}) {
  const titleId = useId();
  const [tested, setTested] = useState<TestAnswer | null>(null);

  return (
    <article className="panel idp-card" aria-labelledby={titleId} data-connection-id={c.id}>
      <header className="idp-card-head">
        <h3 id={titleId}>{c.displayName}</h3>
        <span>
          {kindLabel(c.kind)} · {c.enabled ? <Tag kind="ok">enabled</Tag> : <Tag kind="none">disabled</Tag>}
        </span>
      </header>
      <dl className="facts">
        <dt>Connection id</dt>
        <dd className="mono">{c.id}</dd>
        {c.oidc ? (
          <>
            <dt>Issuer</dt>
            <dd className="mono">{c.oidc.issuer}</dd>
            <dt>Client id</dt>
            <dd className="mono">{c.oidc.clientId}</dd>
            <dt>Client secret</dt>
            <dd>{c.oidc.clientSecretSet ? 'set' : 'not set'}</dd>
            <dt>Scopes</dt>
            <dd>{c.oidc.scopes.join(' ')}</dd>
            <dt>Groups claim</dt>
            <dd>{c.oidc.groupsClaim ?? <span className="muted">none</span>}</dd>
          </>
        ) : null}
        {c.saml ? (
          <>
            <dt>IdP entity id</dt>
            <dd className="mono">{c.saml.idpEntityId}</dd>
            <dt>IdP sign-on URL</dt>
            <dd className="mono">{c.saml.idpSsoUrl}</dd>
            <dt>Metadata</dt>
            <dd className="mono">{c.saml.idpMetadataUrl ?? 'pasted XML'}</dd>
            <dt>Signing certificates (SHA-256)</dt>
            <dd className="mono">
              {c.saml.certificateFingerprints.map((f) => (
                <div key={f}>{f}</div>
              ))}
            </dd>
            <dt>Email attribute</dt>
            <dd>{c.saml.emailAttribute ?? <span className="muted">the NameID</span>}</dd>
            <dt>Groups attribute</dt>
            <dd>{c.saml.groupsAttribute ?? <span className="muted">none</span>}</dd>
          </>
        ) : null}
        <dt>Allowed email domains</dt>
        <dd>{c.allowedEmailDomains.join(', ')}</dd>
        <dt>Group to role</dt>
        <dd>
          {c.groupRoleMapping.length === 0 ? (
            <span className="muted">no mapping: people get the default role</span>
          ) : (
            <ol className="idp-rows">
              {c.groupRoleMapping.map((r, i) => (
                // biome-ignore lint/suspicious/noArrayIndexKey: the same group may appear twice; order matters
                <li key={i}>
                  <code>{r.group}</code> → {r.role}
                </li>
              ))}
            </ol>
          )}
        </dd>
        {c.oidc ? <CopyUrl label="Redirect URI" url={c.oidc.redirectUri} /> : null}
        {c.saml ? (
          <>
            <CopyUrl label="SP entity id" url={c.saml.spEntityId} />
            <CopyUrl label="ACS URL" url={c.saml.acsUrl} />
            <CopyUrl label="SP metadata URL" url={c.saml.metadataUrl} />
          </>
        ) : null}
        <dt>Changed</dt>
        <dd>
          {formatTime(c.updatedAt)}
          {c.updatedBy ? ` by ${c.updatedBy}` : ''} (revision {c.rev})
        </dd>
      </dl>
      <ItemActions
        path="/admin/idp/connections"
        queryKey={IDP_KEY}
        id={c.id}
        name={c.displayName}
        subject={c.displayName}
        enabled={c.enabled}
        test={{
          label: 'Test connection',
          busyLabel: 'Testing…',
          accessibleLabel: `Test connection ${c.displayName}`,
          run: async () => {
            setTested(null);
            setTested(await api.post<TestAnswer>('/admin/idp/connections/test', { id: c.id }));
          },
        }}
        result={
          tested ? (
            <div className={`msg ${tested.ok ? 'msg-ok' : 'msg-error'}`} role="status">
              {tested.ok
                ? c.kind === 'oidc'
                  ? "Connection works: the provider's discovery document was read."
                  : "Connection works: the IdP's metadata was read."
                : `Test failed: ${testReasonText(tested.reason)}.`}
            </div>
          ) : null
        }
        deleteTitle={`Delete the connection ${c.displayName}?`}
        confirmLabel="Delete connection"
        onEdit={onEdit}
        onDone={onDone}
      >
        <p>
          Its sign-in button goes away and nobody can sign in through it. Roles its group mapping gave stay
          until an owner removes them on the Members screen.
        </p>
      </ItemActions>
    </article>
  );
}

export function ConnectionsList({
  connections,
  onEdit,
  onDone,
}: {
  connections: Connection[];
  onEdit: (c: Connection) => void;
  onDone: (message: string) => void;
}) {
  return (
    <div className="idp-cards">
      {connections.map((c) => (
        <ConnectionCard key={c.id} c={c} onEdit={() => onEdit(c)} onDone={onDone} />
      ))}
    </div>
  );
}
