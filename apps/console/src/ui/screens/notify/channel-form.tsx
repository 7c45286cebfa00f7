/**
 * Add or edit a notification channel (`POST /admin/notify/channels`, `/channels/update`). The
 * fields follow the kind (docs/notifications.md "Channels"); the engine is the validator: its 400
 * `{ error, code, field }` is shown above the buttons and next to the field it names (a URL the
 * guard refuses, an invalid address, a short signing secret). On edit the kind is fixed and the
 * URL and secrets are write-only: left blank they are kept. The private-target switch is an
 * owner's (the engine refuses it from any other role), so only owners see it.
 */
import { useId } from 'react';
import { api } from '../../api/client.ts';
import { isOwner, useSignedIn } from '../../auth/session.tsx';
import {
  EditPanel,
  ErrorField,
  RadioChoice,
  SecretInput,
  secretBody,
  splitList,
  TextAreaField,
  TextField,
  URL_INPUT,
  useFormState,
  useSave,
} from '../../components/form.tsx';
import { type ChannelKind, type ChannelView, type CreateChannelAnswer, KINDS, NOTIFY_KEY } from './types.ts';

interface FormState {
  kind: ChannelKind;
  name: string;
  enabled: boolean;
  allowPrivateTarget: boolean;
  url: string;
  signingSecret: string;
  removeSigningSecret: boolean;
  toAddresses: string;
  connectorVia: 'url' | 'addresses';
  routingKey: string;
  apiKey: string;
  username: string;
}

const CONNECTOR_VIA = [
  { value: 'url', label: 'A webhook URL (Teams Workflows or incoming webhook, Google Chat space)' },
  { value: 'addresses', label: 'Email addresses (a Teams channel or Google group address)' },
] as const;

function stateOf(c: ChannelView | undefined): FormState {
  return {
    kind: c?.kind ?? 'webhook',
    name: c?.name ?? '',
    enabled: c?.enabled ?? true,
    allowPrivateTarget: c?.allowPrivateTarget ?? false,
    url: '',
    signingSecret: '',
    removeSigningSecret: false,
    toAddresses: (c?.toAddresses ?? []).join('\n'),
    connectorVia: c?.kind === 'chat-connector' && c.toAddresses ? 'addresses' : 'url',
    routingKey: '',
    apiKey: '',
    username: c?.username ?? '',
  };
}

/** Which transport inputs the form shows for a kind. */
function inputsOf(f: FormState): {
  url: boolean;
  signingSecret: boolean;
  toAddresses: boolean;
  routingKey: boolean;
  apiKey: boolean;
  username: boolean;
} {
  const k = f.kind;
  return {
    url:
      k === 'webhook' ||
      k === 'chat-webhook' ||
      k === 'alert-api' ||
      k === 'itsm-event' ||
      (k === 'chat-connector' && f.connectorVia === 'url'),
    signingSecret: k === 'webhook',
    toAddresses: k === 'email' || (k === 'chat-connector' && f.connectorVia === 'addresses'),
    routingKey: k === 'incident',
    apiKey: k === 'alert-api' || k === 'itsm-event',
    username: k === 'itsm-event',
  };
}

function bodyOf(f: FormState, editing: ChannelView | undefined, owner: boolean): Record<string, unknown> {
  const show = inputsOf(f);
  const body: Record<string, unknown> = editing ? { id: editing.id } : { kind: f.kind };
  if (f.name.trim() !== '') body.name = f.name.trim();
  body.enabled = f.enabled;
  if (owner) body.allowPrivateTarget = f.allowPrivateTarget;
  if (show.url && f.url.trim() !== '') body.url = f.url.trim();
  if (show.toAddresses) body.toAddresses = splitList(f.toAddresses);
  if (show.username) body.username = f.username;
  if (show.routingKey && f.routingKey !== '') body.routingKey = f.routingKey;
  if (show.apiKey && f.apiKey !== '') body.apiKey = f.apiKey;
  if (show.signingSecret) {
    const secret = secretBody(f.signingSecret, f.removeSigningSecret);
    if (secret.set) body.signingSecret = secret.value;
  }
  return body;
}

export function ChannelForm({
  editing,
  onSaved,
  onCancel,
}: {
  /** The channel being edited; absent to add one. */
  editing?: ChannelView;
  onSaved: (answer: { channel: ChannelView; rulesCreated?: CreateChannelAnswer['rulesCreated'] }) => void;
  onCancel: () => void;
}) {
  const who = useSignedIn();
  const owner = isOwner(who);
  const [form, set] = useFormState<FormState>(() => stateOf(editing));
  const warnId = useId();
  const show = inputsOf(form);

  const { save, errorAt } = useSave(
    (body): Promise<{ channel: ChannelView; rulesCreated?: CreateChannelAnswer['rulesCreated'] }> =>
      editing
        ? api.post<{ channel: ChannelView }>('/admin/notify/channels/update', body)
        : api.post<CreateChannelAnswer>('/admin/notify/channels', body),
    NOTIFY_KEY,
    onSaved,
  );

  const kept = editing ? 'Leave blank to keep the one stored.' : undefined;

  return (
    <EditPanel
      title={editing ? `Edit channel ${editing.name}` : 'Add a channel'}
      intro={
        editing ? (
          <p className="muted">
            The URL and secrets are never shown again once saved. Fields left blank keep what is stored.
          </p>
        ) : null
      }
      submitLabel={editing ? 'Save channel' : 'Add channel'}
      pending={save.isPending}
      error={save.error}
      onSubmit={() => save.mutate(bodyOf(form, editing, owner))}
      onCancel={onCancel}
    >
      <div className="two-col">
        <ErrorField
          label="Kind"
          error={errorAt('kind')}
          hint={editing ? 'The kind of a channel cannot change.' : undefined}
        >
          {(p) => (
            <select
              {...p}
              value={form.kind}
              disabled={editing !== undefined}
              onChange={(e) => set('kind', e.target.value as ChannelKind)}
            >
              {KINDS.map((k) => (
                <option key={k.kind} value={k.kind}>
                  {k.label}
                </option>
              ))}
            </select>
          )}
        </ErrorField>
        <TextField
          label="Name"
          error={errorAt('name')}
          hint="1 to 100 characters; defaults to the kind."
          maxLength={100}
          autoComplete="off"
          value={form.name}
          onChange={(v) => set('name', v)}
        />
      </div>

      {form.kind === 'chat-connector' ? (
        <RadioChoice
          legend="Send to"
          name="connector-via"
          value={form.connectorVia}
          options={CONNECTOR_VIA}
          onChange={(v) => set('connectorVia', v)}
        />
      ) : null}

      {show.url ? (
        <TextField
          label="URL"
          error={errorAt('url')}
          hint={
            editing?.url
              ? `Stored: ${editing.url.origin}/… ${kept}`
              : 'https only; no user name or password in it. The path is kept secret once saved.'
          }
          {...URL_INPUT}
          value={form.url}
          onChange={(v) => set('url', v)}
        />
      ) : null}
      {show.toAddresses ? (
        <TextAreaField
          label="Email addresses"
          error={errorAt('toAddresses')}
          hint="One per line or separated by commas; at most 20."
          rows={3}
          value={form.toAddresses}
          onChange={(v) => set('toAddresses', v)}
        />
      ) : null}
      {show.username ? (
        <TextField
          label="User name"
          error={errorAt('username')}
          hint="The HTTP Basic user; no colon."
          autoComplete="off"
          value={form.username}
          onChange={(v) => set('username', v)}
        />
      ) : null}
      {show.routingKey ? (
        <TextField
          label="Routing key"
          error={errorAt('routingKey')}
          hint={editing?.routingKey ? `A routing key is set. ${kept}` : 'The integration key of the service.'}
          type="password"
          autoComplete="new-password"
          value={form.routingKey}
          onChange={(v) => set('routingKey', v)}
        />
      ) : null}
      {show.apiKey ? (
        <TextField
          label={form.kind === 'itsm-event' ? 'Password (API key)' : 'API key'}
          error={errorAt('apiKey')}
          hint={editing?.apiKey ? `A key is set. ${kept}` : 'Write-only: sealed by the engine, never shown.'}
          type="password"
          autoComplete="new-password"
          value={form.apiKey}
          onChange={(v) => set('apiKey', v)}
        />
      ) : null}
      {show.signingSecret ? (
        <SecretInput
          label="Signing secret (optional)"
          isSet={!!editing?.signingSecret}
          setText="A signing secret is set."
          editing={editing !== undefined}
          value={form.signingSecret}
          clear={form.removeSigningSecret}
          error={errorAt('signingSecret')}
          newHint="16 to 1024 characters. Requests then carry x-coffer-signature (HMAC-SHA256) the receiver can verify."
          clearLabel="Remove the signing secret (send unsigned)"
          onChange={(v) => set('signingSecret', v)}
          onClear={(v) => set('removeSigningSecret', v)}
        />
      ) : null}

      <label className="check">
        <input type="checkbox" checked={form.enabled} onChange={(e) => set('enabled', e.target.checked)} />
        Enabled
      </label>
      {owner ? (
        <div className="notify-private">
          <label className="check">
            <input
              type="checkbox"
              aria-describedby={warnId}
              checked={form.allowPrivateTarget}
              onChange={(e) => set('allowPrivateTarget', e.target.checked)}
            />
            Allow a private target
          </label>
          <p id={warnId} className="msg msg-warn notify-warn">
            Owners only. Lets this channel reach private, loopback, link-local and cloud metadata addresses (a
            receiver on your own network). Whoever can change the channel can then point the engine at
            internal services. https, the no-credentials rule and the preview-domain block still apply.
          </p>
          {errorAt('allowPrivateTarget') ? (
            <small className="field-error">{errorAt('allowPrivateTarget')}</small>
          ) : null}
        </div>
      ) : null}
    </EditPanel>
  );
}
