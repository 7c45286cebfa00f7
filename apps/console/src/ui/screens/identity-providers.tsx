/**
 * Identity providers (docs/identity.md "Identity-provider connections"): the OIDC and SAML
 * connections people sign in through, for owners (`keys.ceremony`). Add from a preset, edit (the
 * client secret is write-only), enable or disable, delete, test. Writes need step-up, which the API
 * client asks for in place, and carry the CSRF header like every other write.
 */
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client.ts';
import { editorKey, editorProps, ListSection, useEditor } from '../components/list.tsx';
import { ErrorBox, Loading, Notice, Page } from '../components/ui.tsx';
import { ConnectionForm } from './idp/connection-form.tsx';
import { ConnectionsList } from './idp/connections.tsx';
import { type Connection, IDP_KEY, PRESETS_KEY, type Preset } from './idp/types.ts';
import './idp/idp.css';

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
  const [message, setMessage] = useState<string | null>(null);
  const [editor, open, close] = useEditor<Connection>(() => setMessage(null));
  const list = connections.data?.connections;

  return (
    <Page title="Identity providers">
      <p className="muted screen-intro">
        Single sign-on through your organisation's identity provider (OpenID Connect or SAML 2.0). Each
        enabled connection is a "Sign in with …" button on the sign-in screen; people it signs in get the role
        their groups map to. Passkeys, recovery codes and the admin token keep working beside it.
      </p>
      {connections.isPending ? <Loading what="Loading connections" /> : null}
      <ErrorBox error={connections.error} onRetry={() => void connections.refetch()} />
      <ErrorBox error={presets.error} onRetry={() => void presets.refetch()} />
      {message ? <Notice kind="ok">{message}</Notice> : null}
      {list ? (
        <ListSection
          title="Connections"
          action={
            editor === null
              ? {
                  label: 'Add connection',
                  primary: true,
                  disabled: !presets.data,
                  onClick: () => open({ mode: 'add' }),
                }
              : undefined
          }
        >
          {editor && presets.data ? (
            <ConnectionForm
              key={editorKey(editor)}
              {...editorProps(editor)}
              presets={presets.data.presets}
              onCancel={close}
              onSaved={(c) => {
                close();
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
              onEdit={(item) => open({ mode: 'edit', item })}
              onDone={setMessage}
            />
          )}
        </ListSection>
      ) : null}
    </Page>
  );
}
