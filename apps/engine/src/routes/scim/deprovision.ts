/**
 * What a SCIM user id names, and deprovisioning it (docs/scim.md "Matching" and "What
 * deprovisioning removes").
 *
 * A SCIM id `<id>` (already percent-decoded) names every engine subject that:
 * 1. holds a role grant and either is `<id>` exactly, or is an SSO subject
 *    (`oidc:<conn>:<issuer>#<sub>`, `saml:<conn>:<entityId>#<nameId>`) whose part after the first
 *    `#` is `<id>` (the provider's immutable user id), or has `<id>` as its email (both normalised);
 * 2. holds passkeys or recovery codes and is `<id>` exactly, or `passkey:<email>` for `<id>` an email.
 * Those are the **held** subjects: the answer is 404 when there are none.
 *
 * Cookie sessions are not stored per person (a subject's standing is), so a person signed in
 * through an identity provider without any grant (the viewer floor) cannot be found by a lookup.
 * Their sessions are ended anyway: for every stored connection the subject `<id>` would have
 * through it (`oidc:<conn>:<issuer>#<id>`, `saml:<conn>:<entityId>#<id>`), and for `<id>` itself
 * when it looks like a subject, the standing is moved. Ending a subject that never signed in is a
 * harmless write.
 *
 * Deprovisioning, for every held subject: the role grant, every passkey, every recovery code
 * (active and staged), pending invites bound to a passkey person's email, stored session rows,
 * and every cookie session (`sessions.endAll`: a live cookie is refused on its next request).
 * It refuses, changing nothing, when it would remove the last owner.
 */

import { normaliseEmail, passkeySubject } from '@coffer/identity';
import type { RoleAssignment as RoleRow } from '@coffer/state';
import type { FastifyInstance } from 'fastify';
import { SETTINGS_PREFIX } from '../../sso/connections.ts';

const PASSKEY_PREFIX = 'passkey:';

/** The provider's immutable user id inside an SSO subject (after the first `#`), else null. */
export function providerIdOf(subject: string): string | null {
  if (!subject.startsWith('oidc:') && !subject.startsWith('saml:')) return null;
  const hash = subject.indexOf('#');
  return hash === -1 ? null : subject.slice(hash + 1);
}

function emailOf(value: string | null): string | null {
  if (value === null || !value.includes('@')) return null;
  try {
    return normaliseEmail(value);
  } catch {
    return null;
  }
}

export interface DeprovisionPlan {
  /** Subjects holding a grant or a sign-in factor (the match). */
  held: string[];
  /** Further subjects whose sessions are ended (no grant or factor found). */
  sessionsOnly: string[];
  /** Held subjects' grants, by subject. */
  grants: Map<string, RoleRow>;
  /** Whether removing the held grants would leave no owner. */
  lastOwner: boolean;
}

/** The subjects `id` names (no writes). */
export async function planDeprovision(app: FastifyInstance, id: string): Promise<DeprovisionPlan> {
  const state = app.state;
  const email = emailOf(id);
  const grants = new Map<string, RoleRow>();
  for (const row of await state.roles.list()) {
    if (
      row.subject === id ||
      providerIdOf(row.subject) === id ||
      (email !== null && emailOf(row.email) === email)
    )
      grants.set(row.subject, row);
  }
  const held = new Set(grants.keys());
  const factorCandidates = new Set<string>([id]);
  if (email !== null) factorCandidates.add(passkeySubject(email));
  for (const subject of factorCandidates) {
    if (held.has(subject)) continue;
    const [passkeys, codes] = await Promise.all([
      state.identity.passkeysOf(subject),
      state.identity.recoveryCodes(subject),
    ]);
    if (passkeys.length > 0 || codes.length > 0) held.add(subject);
  }

  const sessionsOnly = new Set<string>();
  if (/^[a-z]+:/.test(id)) sessionsOnly.add(id);
  if (email !== null) sessionsOnly.add(passkeySubject(email));
  for (const { value } of await state.settings.list(SETTINGS_PREFIX)) {
    const c = value as {
      id?: unknown;
      kind?: unknown;
      oidc?: { issuer?: unknown };
      saml?: { idpEntityId?: unknown };
    } | null;
    if (c === null || typeof c !== 'object' || typeof c.id !== 'string') continue;
    if (c.kind === 'oidc' && typeof c.oidc?.issuer === 'string')
      sessionsOnly.add(`oidc:${c.id}:${c.oidc.issuer}#${id}`);
    if (c.kind === 'saml' && typeof c.saml?.idpEntityId === 'string')
      sessionsOnly.add(`saml:${c.id}:${c.saml.idpEntityId}#${id}`);
  }
  for (const subject of held) sessionsOnly.delete(subject);

  const ownersRemoved = [...grants.values()].filter((g) => g.role === 'owner').length;
  const lastOwner = ownersRemoved > 0 && (await state.roles.count('owner')) - ownersRemoved < 1;
  return { held: [...held], sessionsOnly: [...sessionsOnly], grants, lastOwner };
}

export interface DeprovisionCounts {
  subjects: number;
  roles: number;
  /** Subjects whose every session was ended (held and session-only). */
  sessions: number;
  /** Passkeys and recovery codes removed. */
  factors: number;
}

/** Carries out `plan`. The caller has checked `plan.lastOwner`. */
export async function deprovision(app: FastifyInstance, plan: DeprovisionPlan): Promise<DeprovisionCounts> {
  const state = app.state;
  const counts: DeprovisionCounts = { subjects: plan.held.length, roles: 0, sessions: 0, factors: 0 };
  for (const subject of plan.held) {
    // Sessions first: whatever else fails, the person is signed out.
    await endSessions(app, subject);
    counts.sessions++;
    if (plan.grants.has(subject) && (await state.roles.remove(subject))) counts.roles++;
    for (const p of await state.identity.passkeysOf(subject))
      if (await state.identity.removePasskey(p.id)) counts.factors++;
    for (const c of await state.identity.recoveryCodes(subject))
      if (await state.identity.useRecoveryCode(subject, c.selector)) counts.factors++;
    await state.identity.stageRecoveryCodes(subject, []);
    if (subject.startsWith(PASSKEY_PREFIX)) await dropInvites(app, subject.slice(PASSKEY_PREFIX.length));
  }
  for (const subject of plan.sessionsOnly) {
    await endSessions(app, subject);
    counts.sessions++;
  }
  return counts;
}

async function endSessions(app: FastifyInstance, subject: string): Promise<void> {
  await app.sessions.endAll(subject);
  await app.state.sessions.deleteForSubject(subject);
}

/**
 * Removes the pending invites bound to `email`: the store removes every other token of a purpose
 * and binding when one is stored with `replace`, so an already expired placeholder is stored that
 * way and then taken.
 */
async function dropInvites(app: FastifyInstance, email: string): Promise<void> {
  const id = `scim-${crypto.randomUUID()}`;
  await app.state.identity.putToken(
    { id, purpose: 'invite', boundTo: email, verifier: 'scim-deprovisioned', expiresAt: 0 },
    { replace: true },
  );
  await app.state.identity.takeToken(id, { purpose: 'invite', boundTo: email });
}
