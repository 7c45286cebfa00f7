/**
 * Pre-authentication routes under `/admin/auth/` (dispatched before the gate, specification
 * "Pre-authentication"). So far: `POST /admin/auth/logout`. The passkey ceremonies, recovery and
 * the first-owner link join this file's family as they are built (docs/identity.md).
 *
 * Logout: the Origin check applies (a cross-site form cannot sign a person out); a session cookie
 * that verifies ends every session of its subject (epoch and not-before bumped server-side; token
 * sessions end together); the reply always clears both cookies and says `{ ok: true }`, whether or
 * not a session was live, so it tells a caller nothing about the cookie it sent.
 */
import { clearedCookies, originCheck, readCookie, SESSION_COOKIE } from '@coffer/identity';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { sendStateUnavailable } from '../../plugins/replies.ts';

export default async function authRoutes(app: FastifyInstance): Promise<void> {
  app.post(
    '/auth/logout',
    {
      schema: {
        summary: "Sign out: end the caller's sessions and clear the cookies",
        operationId: 'postAuthLogout',
        tags: ['admin', 'pre-auth', 'identity'],
        response: {
          200: Type.Object({ ok: Type.Literal(true) }),
          403: Type.Object({ error: Type.Literal('csrf origin check failed') }),
        },
      },
    },
    async (request, reply) => {
      if (originCheck('POST', request.headers.origin, app.config.consoleOrigin) === 'failed')
        return reply.code(403).send({ error: 'csrf origin check failed' });
      const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
      if (cookie.value !== null) {
        try {
          const verified = await app.sessions.verify(cookie.value);
          if (verified.ok) await app.sessions.endAll(verified.claims.subject);
        } catch {
          return sendStateUnavailable(reply);
        }
      }
      reply.header('set-cookie', clearedCookies());
      return { ok: true as const };
    },
  );
}
