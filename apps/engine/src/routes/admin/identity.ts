/**
 * Identity reads: `GET /admin/whoami` (any authenticated caller: the verified identity, role,
 * role source and session expiry; the admin token shows method `admin-token` with no email and
 * no subject) and `GET /admin/roles` (`roles.read`: the built-in roles with their capabilities and
 * the role table's members).
 */
import { CAPABILITIES, ROLE_CAPABILITIES, ROLES, resolveCapabilities } from '@coffer/authz';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { roleName } from '../../plugins/auth.ts';
import { sendStateUnavailable } from '../../plugins/replies.ts';
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
          }),
        },
      },
    },
    async (request) => {
      const caller = request.caller!;
      return {
        method: caller.method,
        email: caller.email,
        subject: caller.subject,
        role: roleName(caller.role),
        roleSource: caller.roleSource,
        capabilities: [...resolveCapabilities(caller.role)],
        // Header-borne methods have no engine session; cookie sessions (later) carry an expiry.
        sessionExpiresAt: null,
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
      try {
        members = await roleMembers(app.state);
      } catch {
        return sendStateUnavailable(reply);
      }
      return {
        capabilities: [...CAPABILITIES],
        roles: ROLES.map((name) => ({ name, builtIn: true, capabilities: [...ROLE_CAPABILITIES[name]] })),
        members: members.map((m) => ({ subject: m.subject, email: m.email, role: roleName(m.role) })),
      };
    },
  );
}
