/**
 * Identity: `GET /admin/whoami` (any authenticated caller: the verified identity, role, role
 * source and session expiry; the admin token shows method `admin-token` with no email and no
 * subject; a cookie session also gets its `csrfToken` and the paired `__Host-engine_csrf` cookie),
 * `POST /admin/session/bootstrap` (the bare admin token only: exchanges the bearer for a token
 * session cookie, no email and no subject) and `GET /admin/roles` (`roles.read`: the built-in
 * roles with their capabilities and the role table's members).
 */
import { CAPABILITIES, ROLE_CAPABILITIES, ROLES, resolveCapabilities } from '@coffer/authz';
import { csrfCookie, sessionCookie } from '@coffer/identity';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { roleName } from '../../plugins/auth.ts';
import { sendForbidden, sendStateUnavailable } from '../../plugins/replies.ts';
import { type RoleMember, roleMembers } from '../../state/index.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export default async function identityRoutes(app: FastifyInstance): Promise<void> {
  app.get(
    '/whoami',
    {
      schema: {
        summary: 'The authenticated caller',
        operationId: 'getWhoami',
        tags: ['admin', 'identity'],
        response: {
          200: Type.Object({
            method: Type.String(),
            email: Nullable(Type.String()),
            subject: Nullable(Type.String()),
            role: Type.String(),
            roleSource: Type.String(),
            capabilities: Type.Array(Type.String()),
            sessionExpiresAt: Nullable(Type.String()),
            sessionKind: Type.Optional(Type.String()),
            csrfToken: Type.Optional(Type.String()),
          }),
        },
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      const session = caller.session;
      if (session !== undefined) {
        const left = session.expiresAt - Math.floor(Date.now() / 1000);
        reply.header('set-cookie', csrfCookie(session.csrfToken, left));
      }
      return {
        method: caller.method,
        email: caller.email,
        subject: caller.subject,
        role: roleName(caller.role),
        roleSource: caller.roleSource,
        capabilities: [...resolveCapabilities(caller.role)],
        // Header-borne methods have no engine session.
        sessionExpiresAt: session === undefined ? null : new Date(session.expiresAt * 1000).toISOString(),
        ...(session === undefined ? {} : { sessionKind: session.kind, csrfToken: session.csrfToken }),
      };
    },
  );

  app.post(
    '/session/bootstrap',
    {
      schema: {
        summary: 'Exchange the admin bearer for a token session cookie',
        operationId: 'postSessionBootstrap',
        tags: ['admin', 'identity'],
        response: {
          200: Type.Object({
            ok: Type.Literal(true),
            sessionKind: Type.Literal('token'),
            sessionExpiresAt: Type.String(),
            csrfToken: Type.String(),
          }),
        },
      },
    },
    async (request, reply) => {
      const caller = request.caller!;
      // Only the bare bearer: a session (even a token session) does not mint another one.
      if (caller.method !== 'admin-token') return sendForbidden(reply, 'admin-token', roleName(caller.role));
      let minted: Awaited<ReturnType<typeof app.sessions.mint>>;
      try {
        minted = await app.sessions.mint({ subject: null, email: null, method: 'token' });
      } catch {
        return sendStateUnavailable(reply);
      }
      reply.header('set-cookie', [
        sessionCookie(minted.token, minted.maxAge),
        csrfCookie(minted.csrfToken, minted.maxAge),
      ]);
      return {
        ok: true as const,
        sessionKind: 'token' as const,
        sessionExpiresAt: new Date(minted.claims.expiresAt * 1000).toISOString(),
        csrfToken: minted.csrfToken,
      };
    },
  );

  app.get(
    '/roles',
    {
      onRequest: app.requireCapability('roles.read'),
      config: { capability: 'roles.read' },
      schema: {
        summary: 'Roles, capabilities and members',
        operationId: 'getRoles',
        tags: ['admin', 'identity'],
      },
    },
    async (_request, reply) => {
      let members: RoleMember[];
      let custom: Awaited<ReturnType<typeof app.state.roles.listCustomRoles>>;
      try {
        [members, custom] = await Promise.all([roleMembers(app.state), app.state.roles.listCustomRoles()]);
      } catch {
        return sendStateUnavailable(reply);
      }
      return {
        capabilities: [...CAPABILITIES],
        roles: ROLES.map((name) => ({ name, builtIn: true, capabilities: [...ROLE_CAPABILITIES[name]] })),
        // Custom roles (defined with POST /admin/roles/custom): their base and the capabilities added.
        customRoles: custom.map((r) => ({
          name: r.name,
          base: r.base,
          capabilities: [...r.capabilities],
          description: r.description,
        })),
        members: members.map((m) => ({ subject: m.subject, email: m.email, role: roleName(m.role) })),
      };
    },
  );
}
