/**
 * Add or edit an identity-provider connection (`POST /admin/idp/connections`,
 * `/admin/idp/connections/update`). Adding starts from a preset (`GET /admin/idp/presets`), which
 * fixes the kind and fills the scopes, claim and attribute names. The fields follow the kind:
 * OIDC issuer, client id, client secret (write-only: blank on edit keeps it, a box clears it),
 * scopes and groups claim; SAML metadata as a URL or pasted XML, email and groups attributes. Both
 * have the allowed email domains and the group-to-role rows (any role the engine knows but owner,
 * which a group never confers). The engine is the validator: its 400 `{ error, field }` is shown
 * beside the field it names, and an edit sends `ifMatchRev` so a change made meanwhile is a 409.
 */
import { api } from '../../api/client.ts';
import {
  EditPanel,
  ErrorField,
  ErrorFieldset,
  RadioChoice,
  SecretInput,
  secretBody,
  splitList,
  TextAreaField,
  TextField,
  URL_INPUT,
  useFormState,
  useSave,
  VERBATIM,
} from '../../components/form.tsx';
import { ErrorBox } from '../../components/ui.tsx';
import { useRoles } from '../admin/roles.ts';
import type { RolesAnswer } from '../admin/types.ts';
import { type Connection, type GroupRole, IDP_KEY, type IdpKind, kindLabel, type Preset } from './types.ts';

interface FormState {
  preset: string;
  kind: IdpKind;
  id: string;
  displayName: string;
  enabled: boolean;
  domains: string;
  mapping: GroupRole[];
  issuer: string;
  clientId: string;
  clientSecret: string;
  clearSecret: boolean;
  scopes: string;
  groupsClaim: string;
  metadataFrom: 'url' | 'xml';
  metadataUrl: string;
  metadataXml: string;
  emailAttribute: string;
  groupsAttribute: string;
}

const METADATA_FROM = [
  { value: 'url', label: 'A metadata URL (re-read every ten minutes, so certificate rollover follows)' },
  { value: 'xml', label: 'Pasted metadata XML (kept as read)' },
] as const;

function fromPreset(p: Preset | undefined, before?: FormState, previous?: Preset): FormState {
  const kind = p?.kind ?? 'oidc';
  // The display name and id follow the preset until the person types their own.
  const followName = !before || before.displayName === '' || before.displayName === previous?.displayName;
  const followId = !before || before.id === '' || before.id === previous?.id;
  return {
    ...(before ?? {
      enabled: true,
      domains: '',
      mapping: [],
      issuer: '',
      clientId: '',
      clientSecret: '',
      clearSecret: false,
      metadataFrom: 'url',
      metadataUrl: '',
      metadataXml: '',
    }),
    preset: p?.id ?? '',
    kind,
    id: followId ? (p?.id ?? '') : (before?.id ?? ''),
    displayName: followName ? (p?.displayName ?? '') : (before?.displayName ?? ''),
    scopes: (p?.scopes ?? ['openid', 'email', 'profile']).join(' '),
    groupsClaim: p?.groupsClaim ?? '',
    emailAttribute: p?.emailAttribute ?? '',
    groupsAttribute: p?.groupsAttribute ?? '',
  } as FormState;
}

function fromConnection(c: Connection): FormState {
  return {
    preset: c.preset ?? '',
    kind: c.kind,
    id: c.id,
    displayName: c.displayName,
    enabled: c.enabled,
    domains: c.allowedEmailDomains.join('\n'),
    mapping: c.groupRoleMapping.map((r) => ({ ...r })),
    issuer: c.oidc?.issuer ?? '',
    clientId: c.oidc?.clientId ?? '',
    clientSecret: '',
    clearSecret: false,
    scopes: (c.oidc?.scopes ?? []).join(' '),
    groupsClaim: c.oidc?.groupsClaim ?? '',
    metadataFrom: c.saml?.idpMetadataUrl ? 'url' : 'xml',
    metadataUrl: c.saml?.idpMetadataUrl ?? '',
    metadataXml: '',
    emailAttribute: c.saml?.emailAttribute ?? '',
    groupsAttribute: c.saml?.groupsAttribute ?? '',
  };
}

/**
 * The roles a mapping row may name: the built-in roles and the custom roles (`GET /admin/roles`),
 * and any role this connection already names. A group never confers owner (the engine refuses
 * it): owner is not offered.
 */
function roleChoices(roles: RolesAnswer | undefined, editing: Connection | undefined): string[] {
  const names = [
    ...(roles?.roles ?? []).map((r) => r.name),
    ...(roles?.customRoles ?? []).map((r) => r.name),
    ...(editing?.groupRoleMapping ?? []).map((r) => r.role),
  ];
  return [...new Set(names)].filter((n) => n !== 'owner');
}

/** The request body: create sends everything; an edit leaves out what must not be re-sent. */
export function bodyOf(f: FormState, editing: Connection | undefined): Record<string, unknown> {
  const body: Record<string, unknown> = editing
    ? { id: editing.id, ifMatchRev: editing.rev }
    : { id: f.id.trim(), kind: f.kind, ...(f.preset ? { preset: f.preset } : {}) };
  body.displayName = f.displayName.trim();
  body.enabled = f.enabled;
  body.allowedEmailDomains = splitList(f.domains);
  body.groupRoleMapping = f.mapping.filter((r) => r.group.trim() !== '' || r.role !== '');
  if (f.kind === 'oidc') {
    const oidc: Record<string, unknown> = {
      issuer: f.issuer.trim(),
      clientId: f.clientId.trim(),
      scopes: f.scopes.split(/[\s,]+/).filter((s) => s !== ''),
      groupsClaim: f.groupsClaim.trim() === '' ? null : f.groupsClaim.trim(),
    };
    const secret = secretBody(f.clientSecret, f.clearSecret);
    if (secret.set) oidc.clientSecret = secret.value;
    body.oidc = oidc;
  } else {
    const saml: Record<string, unknown> = {
      emailAttribute: f.emailAttribute.trim() === '' ? null : f.emailAttribute.trim(),
      groupsAttribute: f.groupsAttribute.trim() === '' ? null : f.groupsAttribute.trim(),
    };
    // On edit, metadata left as it was is not sent (no re-read); blank pasted XML keeps it too.
    if (f.metadataFrom === 'url') {
      if (!editing || f.metadataUrl.trim() !== (editing.saml?.idpMetadataUrl ?? ''))
        saml.idpMetadataUrl = f.metadataUrl.trim();
    } else if (!editing || f.metadataXml.trim() !== '') saml.idpMetadataXml = f.metadataXml;
    body.saml = saml;
  }
  return body;
}

export function ConnectionForm({
  editing,
  presets,
  onSaved,
  onCancel,
}: {
  /** The connection being edited; absent to add one. */
  editing?: Connection;
  presets: Preset[];
  onSaved: (c: Connection) => void;
  onCancel: () => void;
}) {
  const roles = useRoles();
  const [form, set, setForm] = useFormState<FormState>(() =>
    editing
      ? fromConnection(editing)
      : fromPreset(presets.find((p) => p.id === 'generic-oidc') ?? presets[0]),
  );
  const preset = presets.find((p) => p.id === form.preset);

  const { save, errorAt } = useSave(
    (body) =>
      api.post<{ connection: Connection }>(
        editing ? '/admin/idp/connections/update' : '/admin/idp/connections',
        body,
      ),
    IDP_KEY,
    ({ connection }) => onSaved(connection),
  );
  const roleNames = roleChoices(roles.data, editing);

  const setRow = (i: number, row: Partial<GroupRole>) =>
    setForm((f) => ({ ...f, mapping: f.mapping.map((r, j) => (j === i ? { ...r, ...row } : r)) }));

  return (
    <EditPanel
      title={editing ? `Edit connection ${editing.displayName}` : 'Add a connection'}
      submitLabel={editing ? 'Save connection' : 'Add connection'}
      pending={save.isPending}
      error={save.error}
      onSubmit={() => save.mutate(bodyOf(form, editing))}
      onCancel={onCancel}
    >
      {editing ? (
        <p className="muted">
          {kindLabel(editing.kind)} connection <code>{editing.id}</code>. The kind and id cannot change.
        </p>
      ) : (
        <ErrorField label="Preset" error={errorAt('preset') ?? errorAt('kind')} hint={preset?.notes}>
          {(p) => (
            <select
              {...p}
              value={form.preset}
              onChange={(e) =>
                setForm((f) =>
                  fromPreset(
                    presets.find((x) => x.id === e.target.value),
                    f,
                    presets.find((x) => x.id === f.preset),
                  ),
                )
              }
            >
              {(['oidc', 'saml'] as const).map((kind) => (
                <optgroup key={kind} label={kindLabel(kind)}>
                  {presets
                    .filter((x) => x.kind === kind)
                    .map((x) => (
                      <option key={x.id} value={x.id}>
                        {x.displayName}
                      </option>
                    ))}
                </optgroup>
              ))}
            </select>
          )}
        </ErrorField>
      )}
      <div className="two-col">
        {editing ? null : (
          <TextField
            label="Connection id"
            error={errorAt('id')}
            hint="1 to 64 of a-z, 0-9 and -. It is part of the sign-in URLs and of each person's identity."
            {...VERBATIM}
            value={form.id}
            onChange={(v) => set('id', v)}
          />
        )}
        <TextField
          label="Display name"
          error={errorAt('displayName')}
          hint={'Shown on the sign-in button: "Sign in with …".'}
          maxLength={80}
          autoComplete="off"
          value={form.displayName}
          onChange={(v) => set('displayName', v)}
        />
      </div>

      {form.kind === 'oidc' ? (
        <>
          <TextField
            label="Issuer"
            error={errorAt('oidc.issuer') ?? errorAt('oidc')}
            hint={
              preset?.issuerHint
                ? `For ${preset.displayName}: ${preset.issuerHint}`
                : 'The issuer URL (https); its discovery document is read from /.well-known/openid-configuration.'
            }
            {...URL_INPUT}
            value={form.issuer}
            onChange={(v) => set('issuer', v)}
          />
          <div className="two-col">
            <TextField
              label="Client id"
              error={errorAt('oidc.clientId')}
              {...VERBATIM}
              value={form.clientId}
              onChange={(v) => set('clientId', v)}
            />
            <div>
              <SecretInput
                label="Client secret"
                isSet={editing?.oidc?.clientSecretSet ?? false}
                setText="A client secret is set."
                editing={editing !== undefined}
                value={form.clientSecret}
                clear={form.clearSecret}
                error={errorAt('oidc.clientSecret')}
                newHint="Write-only: sealed by the engine, never shown again. Leave blank for a public client."
                clearLabel="Clear the client secret (a public client)"
                onChange={(v) => set('clientSecret', v)}
                onClear={(v) => set('clearSecret', v)}
              />
            </div>
          </div>
          <div className="two-col">
            <TextField
              label="Scopes"
              error={errorAt('oidc.scopes')}
              hint="Separated by spaces; openid is always asked for."
              {...VERBATIM}
              value={form.scopes}
              onChange={(v) => set('scopes', v)}
            />
            <TextField
              label="Groups claim"
              error={errorAt('oidc.groupsClaim')}
              hint="The ID token or userinfo claim listing the person's groups; blank for none."
              {...VERBATIM}
              value={form.groupsClaim}
              onChange={(v) => set('groupsClaim', v)}
            />
          </div>
        </>
      ) : (
        <>
          <RadioChoice
            legend="IdP metadata from"
            name="metadata-from"
            value={form.metadataFrom}
            options={METADATA_FROM}
            onChange={(v) => set('metadataFrom', v)}
          />
          {form.metadataFrom === 'url' ? (
            <TextField
              label="Metadata URL"
              error={errorAt('saml.idpMetadataUrl') ?? errorAt('saml')}
              hint={
                preset?.metadataUrlHint
                  ? `For ${preset.displayName}: ${preset.metadataUrlHint}`
                  : 'https; the IdP entity id, sign-on URL and signing certificates are read from it.'
              }
              {...URL_INPUT}
              value={form.metadataUrl}
              onChange={(v) => set('metadataUrl', v)}
            />
          ) : (
            <TextAreaField
              label="Metadata XML"
              error={errorAt('saml.idpMetadataXml') ?? errorAt('saml')}
              hint={
                editing?.saml
                  ? 'Leave blank to keep the metadata read before.'
                  : 'The IdP metadata document (EntityDescriptor), at most 1 MiB.'
              }
              rows={6}
              value={form.metadataXml}
              onChange={(v) => set('metadataXml', v)}
            />
          )}
          <div className="two-col">
            <TextField
              label="Email attribute"
              error={errorAt('saml.emailAttribute')}
              hint="The assertion attribute carrying the email; blank to use the NameID."
              {...VERBATIM}
              value={form.emailAttribute}
              onChange={(v) => set('emailAttribute', v)}
            />
            <TextField
              label="Groups attribute"
              error={errorAt('saml.groupsAttribute')}
              hint="The assertion attribute listing the person's groups; blank for none."
              {...VERBATIM}
              value={form.groupsAttribute}
              onChange={(v) => set('groupsAttribute', v)}
            />
          </div>
        </>
      )}

      <TextAreaField
        label="Allowed email domains"
        error={errorAt('allowedEmailDomains')}
        hint="One per line or separated by commas. Only people with an address in these domains can sign in."
        rows={2}
        value={form.domains}
        onChange={(v) => set('domains', v)}
      />

      <ErrorFieldset legend="Group to role mapping" error={errorAt('groupRoleMapping')}>
        <p className="muted idp-hint">
          At each sign-in the first row whose group the person is in gives the role. With no match, a role
          given by this mapping is taken back (a role given by hand stays). A group never gives owner.
        </p>
        <ErrorBox error={roles.error} />
        {form.mapping.length === 0 ? <p className="muted idp-hint">No rows.</p> : null}
        <ol className="idp-mapping">
          {form.mapping.map((row, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows have no identity but their place
            <li key={i}>
              <label>
                <span className="sr-only">Group, row {i + 1}</span>
                <input
                  placeholder="group"
                  {...VERBATIM}
                  value={row.group}
                  onChange={(e) => setRow(i, { group: e.target.value })}
                />
              </label>
              <span aria-hidden="true">→</span>
              <label>
                <span className="sr-only">Role, row {i + 1}</span>
                <select value={row.role} onChange={(e) => setRow(i, { role: e.target.value })}>
                  {roleNames.includes(row.role) ? null : (
                    <option value={row.role}>{row.role || 'choose a role'}</option>
                  )}
                  {roleNames.map((r) => (
                    <option key={r} value={r}>
                      {r}
                    </option>
                  ))}
                </select>
              </label>
              <button
                type="button"
                aria-label={`Remove row ${i + 1}`}
                onClick={() => setForm((f) => ({ ...f, mapping: f.mapping.filter((_, j) => j !== i) }))}
              >
                Remove
              </button>
            </li>
          ))}
        </ol>
        <button
          type="button"
          onClick={() =>
            setForm((f) => ({
              ...f,
              mapping: [...f.mapping, { group: '', role: roleNames.includes('viewer') ? 'viewer' : '' }],
            }))
          }
        >
          Add a mapping row
        </button>
      </ErrorFieldset>

      <label className="check">
        <input type="checkbox" checked={form.enabled} onChange={(e) => set('enabled', e.target.checked)} />
        Enabled (shown on the sign-in screen)
      </label>
    </EditPanel>
  );
}
