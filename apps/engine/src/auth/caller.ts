/**
 * The authenticated caller of one request, as the auth plugin (plugins/auth.ts) sets it on
 * `request.caller` and as the audit log and the routes read it.
 */
import { type Caller, isCustomRole, type RoleAssignment } from '@coffer/authz';

export type AuthMethod = 'perimeter-access' | 'session' | 'admin-token';

/** The cookie session behind a `session` caller. */
export interface CallerSession {
  sid: string;
  /** How the session was made: `token` (the admin bearer exchanged), `passkey`, ... */
  kind: 'passkey' | 'recovery' | 'token' | 'oidc' | 'saml';
  /** Seconds since the epoch. */
  expiresAt: number;
  /** The double-submit token paired with this session (docs/identity.md). */
  csrfToken: string;
}

/** The authenticated caller of one request. */
export interface EngineCaller {
  method: AuthMethod;
  /** Stable subject (the authorisation key); null for the admin token. */
  subject: string | null;
  email: string | null;
  role: RoleAssignment;
  /** Where the role came from: the admin token, an assignment in the role table, or the viewer floor. */
  roleSource: 'admin-token' | 'assigned' | 'default';
  /** Seconds since the epoch of the underlying sign-in, when known. */
  authenticatedAt: number | null;
  /** The caller as @coffer/authz sees it. */
  authz: Caller;
  /** Set for a cookie session (method `session`). */
  session?: CallerSession;
}

/** The role's display name: a built-in name or the custom role's name. */
export function roleName(role: RoleAssignment): string {
  return isCustomRole(role) ? role.name : role;
}
