/**
 * Identity providers (docs/identity.md "Identity-provider connections"): the OIDC and SAML
 * connections people sign in through, for owners (`keys.ceremony`). Add from a preset, edit (the
 * client secret is write-only), enable or disable, delete, test. Writes need step-up, which the API
 * client asks for in place, and carry the CSRF header like every other write.
 */
import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { api } from '../api/client.ts';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ConnectionForm } from './idp/connection-form.tsx';
import { ConnectionsList } from './idp/connections.tsx';
import { type Connection, IDP_KEY, PRESETS_KEY, type Preset } from './idp/types.ts';
import './idp/idp.css';

type Editor = { mode: 'add' } | { mode: 'edit'; connection: Connection } | null;

export function IdentityProviders() {
  const connections = useQuery({
    queryKey: IDP_KEY,
    queryFn: () => api.get<{ connections: Connection[] }>('/admin/idp/connections'),
  });
  const presets = useQuery({
    queryKey: PRESETS_KEY,
    queryFn: () => api.get<{ presets: Preset[] }>('/admin/idp/presets'),
    staleTime: Number.POSITIVE_INFINITY,
  });
  const [editor, setEditor] = useState<Editor>(null);
  const [message, setMessage] = useState<string | null>(null);
  const listId = useId();
  const list = connections.data?.connections;

  return (
    <Page title="Identity providers">
      <p className="muted idp-intro">
        Single sign-on through your organisation's identity provider (OpenID Connect or SAML 2.0). Each
        enabled connection is a "Sign in with …" button on the sign-in screen; people it signs in get the role
        their groups map to. Passkeys, recovery codes and the admin token keep working beside it.
      </p>
      {connections.isPending ? <Loading what="Loading connections" /> : null}
      <ErrorBox error={connections.error} onRetry={() => void connections.refetch()} />
      <ErrorBox error={presets.error} onRetry={() => void presets.refetch()} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {list ? (
        <section aria-labelledby={listId}>
          <div className="idp-section-head">
            <h2 id={listId}>Connections</h2>
            {editor === null ? (
              <button
                type="button"
                className="primary"
                disabled={!presets.data}
                onClick={() => {
                  setMessage(null);
                  setEditor({ mode: 'add' });
                }}
              >
                Add connection
              </button>
            ) : null}
          </div>
          {editor && presets.data ? (
            <ConnectionForm
              key={editor.mode === 'edit' ? editor.connection.id : 'add'}
              {...(editor.mode === 'edit' ? { editing: editor.connection } : {})}
              presets={presets.data.presets}
              onCancel={() => setEditor(null)}
              onSaved={(c) => {
                setEditor(null);
                setMessage(
                  editor.mode === 'edit' ? `${c.displayName} is saved.` : `${c.displayName} is added.`,
                );
              }}
            />
          ) : null}
          {list.length === 0 ? (
            <p className="muted">No connections yet: people sign in with passkeys only.</p>
          ) : (
            <ConnectionsList
              connections={list}
              onEdit={(connection) => {
                setMessage(null);
                setEditor({ mode: 'edit', connection });
              }}
              onDone={setMessage}
            />
          )}
        </section>
      ) : null}
    </Page>
  );
}
