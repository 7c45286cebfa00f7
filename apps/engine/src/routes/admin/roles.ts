/**
 * Role changes (docs/identity.md "Roles"): `POST /admin/roles/assign` `{ subject | email, role }`
 * and `POST /admin/roles/remove` `{ subject | email }`, both `roles.write` and step-up gated, with
 * the rules of @coffer/authz: only an owner grants or removes `owner` (or a role carrying
 * `roles.write`); the admin token never grants `owner`; custom roles only add. The last owner can
 * be neither removed nor given another role (409). `email` names a passkey person
 * (`passkey:<email>`); other sign-in methods are named by their subject. Audited as `role-change`.
 * `POST /admin/roles/invite` `{ email, role?, ttlSeconds? }` (an owner, step-up): assigns the role
 * (if given) to `passkey:<email>` and mints a single-use invite bound to that email (7 days by
 * default; a new invite for the same email replaces the previous one).
 * Every applied role write (assign, remove, an invite with a role; an owner grant approved under
 * dual control, owner-actions.ts) raises the `role-changed` notification event (src/events.ts).
 */
import {
  AuthzForbiddenError,
  assertCanGrantRole,
  assertCanRemoveRole,
  defineCustomRole,
  isOwner,
  isRole,
  type RoleAssignment,
} from '@coffer/authz';
import { mintOneTimeToken, normaliseEmail, passkeySubject } from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { roleName } from '../../plugins/auth.ts';
import { sendBadRequest, sendForbidden, sendStateUnavailable } from '../../plugins/replies.ts';
import { roleOfSubject } from '../../state/index.ts';
import { ownerGateArmed } from '../../state/owner-actions.ts';
import { queuedIfArmed } from './owner-actions.ts';

interface Who {
  subject: string;
  email: string | null;
}

export default async function roleRoutes(app: FastifyInstance): Promise<void> {
  /** The member named by `{ subject }` or `{ email }`, or null after a 400. */
  const member = (body: { subject?: unknown; email?: unknown }, reply: FastifyReply): Who | null => {
    if (typeof body.subject === 'string' && body.subject.length > 0 && body.subject.length <= 512)
      return { subject: body.subject, email: null };
    try {
      const email = normaliseEmail(body.email);
      return { subject: passkeySubject(email), email };
    } catch {
      sendBadRequest(reply, 'name the member by subject or email');
      return null;
    }
  };

  /** The role named `name`: built-in, or a stored custom role; null when unknown. */
  const roleNamed = async (name: unknown): Promise<RoleAssignment | null> => {
    if (typeof name !== 'string') return null;
    if (isRole(name)) return name;
    const row = await app.state.roles.getCustomRole(name);
    if (!row) return null;
    try {
      return defineCustomRole({ name: row.name, base: row.base, add: row.capabilities });
    } catch {
      return null;
    }
  };

  const lastOwner = async (subject: string): Promise<boolean> => {
    const current = await app.state.roles.get(subject);
    return current?.role === 'owner' && (await app.state.roles.count('owner')) <= 1;
  };

  const gate = {
    onRequest: [app.requireCapability('roles.write'), app.requireStepUp, app.rateLimitCaller],
    config: { capability: 'roles.write' as const },
  };
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });

  const roleChanged = (
    request: FastifyRequest,
    subject: string,
    from: string | null,
    to: string | null,
    via: 'assign' | 'remove' | 'invite',
  ) =>
    app.events.raise({
      name: 'role-changed',
      jobId: null,
      detail: { subject, from, to, by: request.caller?.subject ?? 'admin-token', via },
    });

  const forbidden = (err: unknown, reply: FastifyReply) => {
    if (err instanceof AuthzForbiddenError) return reply.code(403).send(err.body);
    throw err;
  };

  app.post(
    '/roles/assign',
    { ...gate, ...meta('Assign a role to a member', 'postRolesAssign') },
    async (request: FastifyRequest, reply) => {
      const body = (request.body ?? {}) as { subject?: unknown; email?: unknown; role?: unknown };
      const who = member(body, reply);
      if (who === null) return reply;
      try {
        const role = await roleNamed(body.role);
        if (role === null) return sendBadRequest(reply, 'role must be a built-in or defined custom role');
        const caller = request.caller!;
        try {
          assertCanGrantRole(caller.authz, role);
          const current = await roleOfSubject(app.state, who.subject);
          if (current.assigned) assertCanRemoveRole(caller.authz, current.role);
        } catch (err) {
          return forbidden(err, reply);
        }
        if (role !== 'owner' && (await lastOwner(who.subject)))
          return reply.code(409).send({ error: 'the last owner cannot be given another role' });
        // Under owner-action dual control granting owner waits for a second owner (202).
        if (
          role === 'owner' &&
          (await queuedIfArmed(app, request, reply, 'owner-grant', {
            subject: who.subject,
            email: who.email,
          }))
        )
          return reply;
        const previous = await app.state.roles.get(who.subject);
        await app.state.roles.assign({
          subject: who.subject,
          role: roleName(role),
          email: who.email ?? previous?.email ?? null,
          grantedBy: caller.subject ?? 'admin-token',
        });
        await app.audit.forRequest(request, {
          action: 'role-change',
          outcome: 'applied',
          target: who.subject,
          detail: { from: previous?.role ?? null, to: roleName(role) },
        });
        roleChanged(request, who.subject, previous?.role ?? null, roleName(role), 'assign');
        return { ok: true, subject: who.subject, role: roleName(role), previous: previous?.role ?? null };
      } catch (err) {
        if (err instanceof AuthzForbiddenError) return forbidden(err, reply);
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/roles/invite',
    {
      onRequest: [app.requireStepUp, app.rateLimitCaller],
      ...meta('Invite a person to register a passkey (an owner; single use, email-bound)', 'postRolesInvite'),
    },
    async (request: FastifyRequest, reply) => {
      const caller = request.caller!;
      if (!isOwner(caller.authz)) return sendForbidden(reply, 'owner', roleName(caller.role));
      const body = (request.body ?? {}) as { email?: unknown; role?: unknown; ttlSeconds?: unknown };
      let email: string;
      try {
        email = normaliseEmail(body.email);
      } catch {
        return sendBadRequest(reply, 'email must be an address');
      }
      const ttl = body.ttlSeconds;
      if (
        ttl !== undefined &&
        (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 300 || ttl > 30 * 86_400)
      )
        return sendBadRequest(reply, 'ttlSeconds must be 300 to 2592000');
      try {
        const subject = passkeySubject(email);
        if (await app.state.identity.emailHasPasskey(email))
          return reply.code(409).send({ error: 'this email already holds a passkey' });
        let role: RoleAssignment | null = null;
        if (body.role !== undefined) {
          role = await roleNamed(body.role);
          if (role === null) return sendBadRequest(reply, 'role must be a built-in or defined custom role');
          try {
            assertCanGrantRole(caller.authz, role);
          } catch (err) {
            return forbidden(err, reply);
          }
          if (role === 'owner' && (await ownerGateArmed(app.state)))
            return reply.code(409).send({
              error:
                'owner-action dual control is armed: grant owner with roles/assign (a second owner approves)',
            });
          await app.state.roles.assign({
            subject,
            role: roleName(role),
            email,
            grantedBy: caller.subject ?? 'admin-token',
          });
        }
        const { token, record } = mintOneTimeToken({
          purpose: 'invite',
          boundTo: email,
          ...(typeof ttl === 'number' ? { ttlMs: ttl * 1000 } : {}),
        });
        await app.state.identity.putToken(record, { replace: true });
        await app.audit.forRequest(request, {
          action: 'role-change',
          outcome: 'applied',
          target: subject,
          detail: { invite: true, to: role === null ? null : roleName(role) },
        });
        if (role !== null) roleChanged(request, subject, null, roleName(role), 'invite');
        return {
          ok: true,
          email,
          subject,
          role: role === null ? null : roleName(role),
          inviteToken: token,
          expiresAt: new Date(record.expiresAt).toISOString(),
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/roles/remove',
    { ...gate, ...meta("Remove a member's role", 'postRolesRemove') },
    async (request: FastifyRequest, reply) => {
      const who = member((request.body ?? {}) as { subject?: unknown; email?: unknown }, reply);
      if (who === null) return reply;
      try {
        const current = await roleOfSubject(app.state, who.subject);
        if (!current.assigned) return { ok: true, subject: who.subject, removed: false };
        try {
          assertCanRemoveRole(request.caller!.authz, current.role);
        } catch (err) {
          return forbidden(err, reply);
        }
        if (await lastOwner(who.subject))
          return reply.code(409).send({ error: 'the last owner cannot be removed' });
        const previous = await app.state.roles.get(who.subject);
        await app.state.roles.remove(who.subject);
        await app.audit.forRequest(request, {
          action: 'role-change',
          outcome: 'applied',
          target: who.subject,
          detail: { from: previous?.role ?? null, to: null },
        });
        roleChanged(request, who.subject, previous?.role ?? null, null, 'remove');
        return { ok: true, subject: who.subject, removed: true };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}
