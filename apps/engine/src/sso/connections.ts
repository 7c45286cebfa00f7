/**
 * Identity-provider connections: their stored shape, the checks a write passes, and the read shape
 * (docs/identity.md "Identity-provider connections").
 *
 * A connection lives in the settings store under `idp.connection.<id>` (one JSON value, both state
 * backends, no table of its own). The OIDC client secret is sealed before it is stored (the
 * `cib1.` box under the operational key, see sso/service.ts) and never leaves the engine again: the
 * read shape says only `clientSecretSet`. A SAML connection keeps the IdP's entity id, single
 * sign-on URL and signing certificates as last read from pasted metadata or its metadata URL.
 *
 * Security-relevant choices: a group mapping never confers `owner` (owner is granted by an owner,
 * under the owner-action gate when armed, never by a claim an IdP administrator controls); every
 * connection names at least one allowed email domain; connection ids are a closed alphabet so they
 * can sit in a URL path and a subject.
 */
import { isRole } from '@coffer/authz';
import type { GroupRoleRule } from '@coffer/identity';

export type ConnectionKind = 'oidc' | 'saml';

export interface StoredOidc {
  issuer: string;
  clientId: string;
  /** `cib1.` sealed text, or null for a public client. */
  clientSecretSealed: string | null;
  scopes: string[];
  groupsClaim: string | null;
}

export interface StoredSaml {
  /** Where the metadata is re-read from (null: pasted XML, kept as read). */
  idpMetadataUrl: string | null;
  idpEntityId: string;
  idpSsoUrl: string;
  idpCertificates: string[];
  emailAttribute: string | null;
  groupsAttribute: string | null;
}

export interface StoredConnection {
  v: 1;
  id: string;
  kind: ConnectionKind;
  displayName: string;
  preset: string | null;
  enabled: boolean;
  allowedEmailDomains: string[];
  groupRoleMapping: GroupRoleRule[];
  oidc?: StoredOidc;
  saml?: StoredSaml;
  rev: number;
  updatedAt: string;
  updatedBy: string | null;
}

/** A refused write: 400 `{ error, field }` (the message names the field, never its value). */
export class ConnectionInputError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.field = field;
  }
}

export const SETTINGS_PREFIX = 'idp.connection.';
export const MAX_CONNECTIONS = 50;
export const MAX_MAPPING_ROWS = 100;
const CONNECTION_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;
const NAME_TOKEN = /^[!-~]{1,256}$/;

const bad = (field: string, message: string) => new ConnectionInputError(field, message);

export function checkConnectionId(value: unknown): string {
  if (typeof value !== 'string' || !CONNECTION_ID.test(value))
    throw bad('id', 'id must be 1 to 64 of a-z, 0-9 and -, starting with a letter or digit');
  return value;
}

export function checkDisplayName(value: unknown): string {
  if (typeof value !== 'string') throw bad('displayName', 'displayName must be text');
  const name = value.trim();
  if (name.length < 1 || name.length > 80 || CONTROL.test(name))
    throw bad('displayName', 'displayName must be 1 to 80 printable characters');
  return name;
}

export function checkDomains(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > 50)
    throw bad('allowedEmailDomains', 'allowedEmailDomains must list 1 to 50 domains');
  const out = value.map((d) => (typeof d === 'string' ? d.trim().toLowerCase() : ''));
  if (out.some((d) => d === '' || d.length > 253))
    throw bad('allowedEmailDomains', 'allowedEmailDomains must be domain names');
  return [...new Set(out)];
}

/** The mapping rows, each role a built-in role other than owner or an existing custom role. */
export async function checkMapping(
  value: unknown,
  customRoleExists: (name: string) => Promise<boolean>,
): Promise<GroupRoleRule[]> {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > MAX_MAPPING_ROWS)
    throw bad('groupRoleMapping', `groupRoleMapping must be a list of at most ${MAX_MAPPING_ROWS} rows`);
  const rows: GroupRoleRule[] = [];
  for (const row of value) {
    const r = row as { group?: unknown; role?: unknown } | null;
    if (r === null || typeof r !== 'object' || typeof r.group !== 'string' || typeof r.role !== 'string')
      throw bad('groupRoleMapping', 'each groupRoleMapping row needs a group and a role');
    const group = r.group.trim();
    if (group.length === 0 || group.length > 256 || CONTROL.test(group))
      throw bad('groupRoleMapping', 'a group must be 1 to 256 printable characters');
    if (r.role === 'owner')
      throw bad('groupRoleMapping', 'a group mapping cannot confer owner; an owner grants owner');
    if (!isRole(r.role) && !(await customRoleExists(r.role)))
      throw bad('groupRoleMapping', 'a group mapping names a role that does not exist');
    rows.push({ group, role: r.role });
  }
  return rows;
}

export function checkScopes(value: unknown): string[] {
  if (value === undefined || value === null) return ['openid', 'email', 'profile'];
  if (
    !Array.isArray(value) ||
    value.length > 20 ||
    value.some((s) => typeof s !== 'string' || !NAME_TOKEN.test(s))
  )
    throw bad('oidc.scopes', 'scopes must be a list of at most 20 scope names');
  const scopes = [...new Set(value as string[])];
  if (!scopes.includes('openid')) scopes.unshift('openid');
  return scopes;
}

/** An optional claim or attribute name: absent, null or '' means none. */
export function checkOptionalName(value: unknown, field: string): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || !NAME_TOKEN.test(value))
    throw bad(field, `${field} must be a claim or attribute name (printable, no spaces, at most 256)`);
  return value;
}

export function checkRequiredText(value: unknown, field: string, max = 2048): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max || CONTROL.test(value))
    throw bad(field, `${field} is required (printable text, at most ${max} characters)`);
  return value.trim();
}

/** The metadata URL: https, or http on a loopback host (a local test IdP). */
export function checkMetadataUrl(value: unknown): string {
  const text = checkRequiredText(value, 'saml.idpMetadataUrl');
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw bad('saml.idpMetadataUrl', 'saml.idpMetadataUrl is not a URL');
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
    throw bad('saml.idpMetadataUrl', 'saml.idpMetadataUrl must be https (http only on a loopback host)');
  if (url.username !== '' || url.password !== '' || url.hash !== '')
    throw bad('saml.idpMetadataUrl', 'saml.idpMetadataUrl must carry no credentials or fragment');
  return url.href;
}

export interface ConnectionUrls {
  startUrl: string;
  /** `${CONSOLE_ORIGIN}/admin/...`, or null without CONSOLE_ORIGIN. */
  redirectUri: string | null;
  spEntityId: string | null;
  acsUrl: string | null;
  metadataUrl: string | null;
}

export function connectionUrls(
  id: string,
  kind: ConnectionKind,
  consoleOrigin: string | undefined,
): ConnectionUrls {
  const at = (path: string) => (consoleOrigin === undefined ? null : `${consoleOrigin}${path}`);
  return {
    startUrl: `/admin/${kind}/start/${id}`,
    redirectUri: at(`/admin/oidc/callback/${id}`),
    spEntityId: at(`/admin/saml/metadata/${id}`),
    acsUrl: at(`/admin/saml/acs/${id}`),
    metadataUrl: at(`/admin/saml/metadata/${id}`),
  };
}

/** The read shape: everything an owner needs to set the provider up, never the secret. */
export function viewConnection(
  c: StoredConnection,
  consoleOrigin: string | undefined,
  fingerprint: (cert: string) => string,
) {
  const urls = connectionUrls(c.id, c.kind, consoleOrigin);
  return {
    id: c.id,
    kind: c.kind,
    displayName: c.displayName,
    preset: c.preset,
    enabled: c.enabled,
    allowedEmailDomains: c.allowedEmailDomains,
    groupRoleMapping: c.groupRoleMapping,
    rev: c.rev,
    updatedAt: c.updatedAt,
    updatedBy: c.updatedBy,
    startUrl: urls.startUrl,
    ...(c.oidc
      ? {
          oidc: {
            issuer: c.oidc.issuer,
            clientId: c.oidc.clientId,
            clientSecretSet: c.oidc.clientSecretSealed !== null,
            scopes: c.oidc.scopes,
            groupsClaim: c.oidc.groupsClaim,
            redirectUri: urls.redirectUri,
          },
        }
      : {}),
    ...(c.saml
      ? {
          saml: {
            idpEntityId: c.saml.idpEntityId,
            idpSsoUrl: c.saml.idpSsoUrl,
            idpMetadataUrl: c.saml.idpMetadataUrl,
            certificateFingerprints: c.saml.idpCertificates.map(fingerprint),
            emailAttribute: c.saml.emailAttribute,
            groupsAttribute: c.saml.groupsAttribute,
            spEntityId: urls.spEntityId,
            acsUrl: urls.acsUrl,
            metadataUrl: urls.metadataUrl,
          },
        }
      : {}),
  };
}

export type ConnectionView = ReturnType<typeof viewConnection>;

/** The names of the top-level and nested fields that differ (for the audit row: names only). */
export function changedFields(before: StoredConnection | null, after: StoredConnection): string[] {
  const out: string[] = [];
  const flat = (c: StoredConnection | null): Record<string, string> => {
    if (c === null) return {};
    const { rev: _r, updatedAt: _u, updatedBy: _b, oidc, saml, ...top } = c;
    const entries: Record<string, string> = {};
    for (const [k, v] of Object.entries(top)) entries[k] = JSON.stringify(v);
    for (const [k, v] of Object.entries(oidc ?? {})) entries[`oidc.${k}`] = JSON.stringify(v);
    for (const [k, v] of Object.entries(saml ?? {})) entries[`saml.${k}`] = JSON.stringify(v);
    return entries;
  };
  const a = flat(before);
  const b = flat(after);
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) if (a[k] !== b[k]) out.push(k);
  // The sealed text changes on every seal; name the secret field only when it was set or cleared or replaced.
  return out.map((k) => (k === 'oidc.clientSecretSealed' ? 'oidc.clientSecret' : k)).sort();
}
