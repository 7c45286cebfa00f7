/**
 * Identity-provider presets (`GET /admin/idp/presets`): the defaults a connection starts from for
 * the providers operators use most, so the console can ask only for what differs per tenant. A
 * preset is a starting point, never a trust decision: the connection still names its own issuer or
 * metadata, client, allowed email domains and group mapping, and the engine checks all of it.
 */

import type { ConnectionKind } from './connections.ts';

export interface IdpPreset {
  id: string;
  kind: ConnectionKind;
  displayName: string;
  /** The issuer shape with `{tenant}`-style placeholders the operator fills in (OIDC). */
  issuerHint?: string;
  /** Where the IdP publishes its SAML metadata, with placeholders (SAML). */
  metadataUrlHint?: string;
  scopes?: string[];
  /** The ID-token or userinfo claim carrying groups (OIDC). */
  groupsClaim?: string;
  /** The assertion attribute carrying the email (SAML). */
  emailAttribute?: string;
  /** The assertion attribute carrying groups (SAML). */
  groupsAttribute?: string;
  /** One line on what to set up at the provider. */
  notes: string;
}

const OIDC_SCOPES = ['openid', 'email', 'profile'];

export const IDP_PRESETS: readonly IdpPreset[] = Object.freeze([
  {
    id: 'okta',
    kind: 'oidc',
    displayName: 'Okta',
    issuerHint: 'https://{your-org}.okta.com',
    scopes: [...OIDC_SCOPES, 'groups'],
    groupsClaim: 'groups',
    notes: 'Create an OIDC Web Application; add a groups claim (filter) to the ID token.',
  },
  {
    id: 'entra',
    kind: 'oidc',
    displayName: 'Microsoft Entra ID',
    issuerHint: 'https://login.microsoftonline.com/{tenant-id}/v2.0',
    scopes: OIDC_SCOPES,
    groupsClaim: 'groups',
    notes:
      'Register a web application; under Token configuration add the groups claim (group object ids). Entra sends no email_verified: use a provider that does, or Okta/Google/Keycloak.',
  },
  {
    id: 'google',
    kind: 'oidc',
    displayName: 'Google Workspace',
    issuerHint: 'https://accounts.google.com',
    scopes: OIDC_SCOPES,
    notes: 'Create an OAuth client (Web application). Google sends no groups claim: map roles by hand.',
  },
  {
    id: 'auth0',
    kind: 'oidc',
    displayName: 'Auth0',
    issuerHint: 'https://{tenant}.auth0.com/',
    scopes: OIDC_SCOPES,
    groupsClaim: 'https://{your-namespace}/groups',
    notes: 'Create a Regular Web Application; add groups to the ID token with an Action (namespaced claim).',
  },
  {
    id: 'keycloak',
    kind: 'oidc',
    displayName: 'Keycloak',
    issuerHint: 'https://{host}/realms/{realm}',
    scopes: OIDC_SCOPES,
    groupsClaim: 'groups',
    notes: 'Create a confidential OpenID Connect client; add a Group Membership mapper named groups.',
  },
  {
    id: 'authentik',
    kind: 'oidc',
    displayName: 'authentik',
    issuerHint: 'https://{host}/application/o/{application-slug}/',
    scopes: OIDC_SCOPES,
    groupsClaim: 'groups',
    notes: 'Create an OAuth2/OpenID provider (confidential) and an application for it.',
  },
  {
    id: 'generic-oidc',
    kind: 'oidc',
    displayName: 'OpenID Connect',
    scopes: OIDC_SCOPES,
    notes: 'Any OpenID provider with discovery, the code flow and PKCE S256.',
  },
  {
    id: 'okta-saml',
    kind: 'saml',
    displayName: 'Okta (SAML)',
    metadataUrlHint: 'https://{your-org}.okta.com/app/{app-id}/sso/saml/metadata',
    emailAttribute: 'email',
    groupsAttribute: 'groups',
    notes: 'Create a SAML 2.0 app; Name ID format Persistent; attribute statements email and groups.',
  },
  {
    id: 'entra-saml',
    kind: 'saml',
    displayName: 'Microsoft Entra ID (SAML)',
    metadataUrlHint:
      'https://login.microsoftonline.com/{tenant-id}/federationmetadata/2007-06/federationmetadata.xml?appid={app-id}',
    emailAttribute: 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
    groupsAttribute: 'http://schemas.microsoft.com/ws/2008/06/identity/claims/groups',
    notes: 'Create an enterprise application with SAML; Name identifier: persistent (user.objectid).',
  },
  {
    id: 'generic-saml',
    kind: 'saml',
    displayName: 'SAML 2.0',
    emailAttribute: 'email',
    notes: 'Any SAML 2.0 IdP: signed assertions, HTTP-Redirect single sign-on, persistent Name ID.',
  },
] satisfies IdpPreset[]);

export function presetById(id: string): IdpPreset | undefined {
  return IDP_PRESETS.find((p) => p.id === id);
}
