/**
 * What an OIDC or SAML sign-in does once the protocol has named the person: the group-to-role
 * mapping (docs/identity.md "Group-to-role mapping"), then the session cookie and the redirect.
 *
 * The mapping is evaluated on every sign-in from the live group snapshot and writes a role grant
 * marked `grantedBy: idp:<connection id>`; the engine still re-reads the subject's role on every
 * request, so a grant changed here or by hand takes effect at once. A grant an owner made by hand
 * always wins over the mapping (it is neither replaced nor removed), which is also why the mapping
 * can never demote an owner: owner is never a mapping's to give. When no row matches, a grant the
 * mapping made earlier is removed and the person is at the viewer floor.
 */
import { isRole } from '@coffer/authz';
import { csrfCookie, roleForGroups, sessionCookie } from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { StoredConnection } from './connections.ts';

export interface SignedInPerson {
  subject: string;
  email: string;
  groups: readonly string[];
}

export const mappingGrantor = (connectionId: string) => `idp:${connectionId}`;

/** Sign-in starts per client address per window: each stores a record or asks the provider. */
export const STARTS_PER_ADDRESS = 30;
export const START_WINDOW_MS = 10 * 60 * 1000;

/**
 * True when the client address has started more sign-ins than STARTS_PER_ADDRESS in the window
 * (shared by every replica through the state store). A SAML start writes a RelayState record and
 * an OIDC start may make the engine fetch discovery: an anonymous flood must not do either
 * without bound.
 */
export async function startLimited(app: FastifyInstance, request: FastifyRequest): Promise<boolean> {
  const hits = await app.state.rateLimits.hit(`sso-start:${request.ip}`, START_WINDOW_MS);
  return hits.count > STARTS_PER_ADDRESS;
}

/** Applies the connection's mapping to the person's grant; returns the role name now held, or null. */
export async function applyGroupMapping(
  app: FastifyInstance,
  request: FastifyRequest,
  connection: StoredConnection,
  person: SignedInPerson,
): Promise<string | null> {
  const roles = app.state.roles;
  const grantor = mappingGrantor(connection.id);
  const existing = await roles.get(person.subject);
  if (existing !== null && existing.grantedBy !== grantor) return existing.role;
  let wanted = roleForGroups(connection.groupRoleMapping, [...person.groups]);
  // A custom role deleted since the mapping was saved maps to nothing (never to an unknown name).
  if (wanted !== null && !isRole(wanted) && (await roles.getCustomRole(wanted)) === null) {
    request.log.warn({ sso: 'mapping', connection: connection.id }, 'group mapping names a missing role');
    wanted = null;
  }
  if (wanted === 'owner') wanted = null;
  const from = existing?.role ?? null;
  if (wanted === from) return from;
  if (wanted === null) await roles.remove(person.subject);
  else await roles.assign({ subject: person.subject, role: wanted, email: person.email, grantedBy: grantor });
  await app.audit.append({
    actor: { email: person.email, subject: person.subject, method: 'session' },
    role: wanted ?? 'viewer',
    sourceAddress: request.ip ?? null,
    action: 'idp-role-mapping',
    outcome: 'applied',
    target: person.subject,
    approver: null,
    detail: { connection: connection.id, from, to: wanted },
  });
  return wanted;
}

/** Maps the groups, mints the session (both cookies) and redirects to the console's landing page. */
export async function completeSignIn(
  app: FastifyInstance,
  request: FastifyRequest,
  reply: FastifyReply,
  connection: StoredConnection,
  person: SignedInPerson,
  extraCookies: string[] = [],
): Promise<FastifyReply> {
  await applyGroupMapping(app, request, connection, person);
  const minted = await app.sessions.mint({
    subject: person.subject,
    email: person.email,
    method: connection.kind,
  });
  reply.header('set-cookie', [
    ...extraCookies,
    sessionCookie(minted.token, minted.maxAge),
    csrfCookie(minted.csrfToken, minted.maxAge),
  ]);
  request.log.info(
    { sso: connection.kind, connection: connection.id },
    'signed in through identity provider',
  );
  return reply.redirect('/', 302);
}
