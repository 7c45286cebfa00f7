/**
 * What the Identity providers screen reads and writes (docs/identity.md "Identity-provider
 * connections", the engine's apps/engine/src/routes/admin/idp.ts): presets, the connection read
 * shape (the OIDC client secret only as `clientSecretSet`), and the test answer.
 */

export type IdpKind = 'oidc' | 'saml';

/** `GET /admin/idp/presets`. */
export interface Preset {
  id: string;
  kind: IdpKind;
  displayName: string;
  issuerHint?: string;
  metadataUrlHint?: string;
  scopes?: string[];
  groupsClaim?: string;
  emailAttribute?: string;
  groupsAttribute?: string;
  notes: string;
}

export interface GroupRole {
  group: string;
  role: string;
}

/** One connection as `GET /admin/idp/connections` shows it. */
export interface Connection {
  id: string;
  kind: IdpKind;
  displayName: string;
  preset: string | null;
  enabled: boolean;
  allowedEmailDomains: string[];
  groupRoleMapping: GroupRole[];
  rev: number;
  updatedAt: string;
  updatedBy: string | null;
  startUrl: string;
  oidc?: {
    issuer: string;
    clientId: string;
    clientSecretSet: boolean;
    scopes: string[];
    groupsClaim: string | null;
    /** Null when the engine has no CONSOLE_ORIGIN. */
    redirectUri: string | null;
  };
  saml?: {
    idpEntityId: string;
    idpSsoUrl: string;
    idpMetadataUrl: string | null;
    certificateFingerprints: string[];
    emailAttribute: string | null;
    groupsAttribute: string | null;
    spEntityId: string | null;
    acsUrl: string | null;
    metadataUrl: string | null;
  };
}

/** `POST /admin/idp/connections/test`. */
export type TestAnswer = { ok: true } | { ok: false; reason: string };

export const IDP_KEY = ['idp', 'connections'] as const;
export const PRESETS_KEY = ['idp', 'presets'] as const;

export function kindLabel(kind: IdpKind): string {
  return kind === 'oidc' ? 'OpenID Connect' : 'SAML 2.0';
}

/** Test failure reasons (the engine's reason codes) in words; an unknown code is shown as is. */
export function testReasonText(reason: string): string {
  const known: Record<string, string> = {
    'provider-unreachable': 'the provider could not be reached (discovery document not read)',
    'metadata-unreachable': 'the IdP metadata URL could not be read',
    'metadata-invalid': "the provider's metadata is not usable (issuer, endpoints or keys)",
    unavailable: 'the provider could not be reached',
  };
  return known[reason] ? `${known[reason]} (${reason})` : reason;
}
