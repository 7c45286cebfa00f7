/**
 * Authentication (specification "Authentication": method precedence, rules 1, 2, 5, 6, 7, 8), as
 * the named plugin `coffer-auth`. It decorates the instance with `authenticate`, an onRequest
 * hook that the authenticated admin scope installs, and every request with `caller`.
 *
 * Precedence: (1) perimeter access JWT, (2) session cookie (`__Host-engine_session`,
 * docs/identity.md), (3) admin bearer.
 * A present-but-invalid higher method is answered 401 and never falls through to a lower one;
 * only the genuine absence of its header moves down; no usable credential is 401 `unauthorised`.
 * An assertion header on an engine without perimeter configuration is present-but-unverifiable
 * and refused the same way. A cookie session that verifies is then held to the Origin check:
 * a mutating request must carry `Origin` exactly equal to CONSOLE_ORIGIN, else 403
 * `csrf origin check failed`. A token session lives only while the admin token path is open.
 *
 * On success the router overwrites `x-engine-caller` on the request it hands to the route with
 * the authenticated identity (the conventions plugin already dropped any inbound value). The role
 * is re-resolved from the subject on every request. Tokens never reach a log line: refusals are
 * logged with a coarse reason only.
 */
import { ADMIN_TOKEN_CALLER } from '@coffer/authz';
import { originCheck, readCookie, SESSION_COOKIE } from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type AdminTokenChecker, bearerOf } from '../auth/admin-token.ts';
import type { EngineCaller } from '../auth/caller.ts';
import { PERIMETER_HEADER, type PerimeterVerifier } from '../auth/perimeter.ts';
import { adminTokenRetired, roleOfSubject, type State } from '../state/index.ts';
import type { EngineSessions } from '../state/sessions.ts';
import { sendStateUnavailable, sendUnauthorised } from './replies.ts';

export { type AuthMethod, type EngineCaller, roleName } from '../auth/caller.ts';

declare module 'fastify' {
  interface FastifyRequest {
    caller: EngineCaller | null;
  }
  interface FastifyInstance {
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /** The admin-token checker (status reports whether the token path is open, never the token). */
    adminToken: AdminTokenChecker;
    /** Cookie sessions: mint, verify, end (state/sessions.ts). */
    sessions: EngineSessions;
  }
}

export interface AuthOptions {
  perimeter: PerimeterVerifier | undefined;
  adminToken: AdminTokenChecker;
  state: State;
  sessions: EngineSessions;
  consoleOrigin: string | undefined;
}

/** The value the router puts in `x-engine-caller`. */
export function callerHeader(caller: EngineCaller): string {
  return JSON.stringify({ method: caller.method, subject: caller.subject });
}

async function auth(app: FastifyInstance, options: AuthOptions): Promise<void> {
  app.decorateRequest('caller', null);
  app.decorate('adminToken', options.adminToken);
  app.decorate('sessions', options.sessions);

  // Answers 401 and returns null: the caller of a refused request is "nobody".
  const refuse = (request: FastifyRequest, reply: FastifyReply, reason: string): null => {
    request.log.info({ auth: 'refused', reason }, 'authentication refused');
    sendUnauthorised(reply);
    return null;
  };

  /** The subject's role, re-read now; null after a 502 when the role table cannot be read. */
  async function roleOr502(
    request: FastifyRequest,
    reply: FastifyReply,
    subject: string,
  ): Promise<Awaited<ReturnType<typeof roleOfSubject>> | null> {
    try {
      return await roleOfSubject(options.state, subject);
    } catch {
      request.log.error({ code: 'ERR_ENGINE_STATE_UNAVAILABLE' }, 'role table unreadable');
      sendStateUnavailable(reply);
      return null;
    }
  }

  async function perimeterCaller(
    request: FastifyRequest,
    reply: FastifyReply,
    assertion: string | string[],
  ): Promise<EngineCaller | null> {
    if (!options.perimeter) return refuse(request, reply, 'perimeter-not-configured');
    if (typeof assertion !== 'string') return refuse(request, reply, 'malformed');
    const result = await options.perimeter.verify(assertion);
    if (!result.ok) return refuse(request, reply, result.reason);
    const { subject, email, authenticatedAt } = result.identity;
    const resolved = await roleOr502(request, reply, subject);
    if (resolved === null) return null;
    const role = resolved.role;
    return {
      method: 'perimeter-access',
      subject,
      email,
      role,
      roleSource: resolved.assigned ? 'assigned' : 'default',
      authenticatedAt,
      authz: { role },
    };
  }

  /** Whether the admin token path is open now (configured, not retired); throws when unreadable. */
  async function tokenPathOpen(): Promise<boolean> {
    return options.adminToken.configured && !(await adminTokenRetired(options.state));
  }

  async function sessionCaller(
    request: FastifyRequest,
    reply: FastifyReply,
    cookie: string | null,
  ): Promise<EngineCaller | null> {
    if (cookie === null) return refuse(request, reply, 'session-cookie-doubled');
    let verified: Awaited<ReturnType<EngineSessions['verify']>>;
    try {
      verified = await options.sessions.verify(cookie);
    } catch {
      request.log.error({ code: 'ERR_ENGINE_STATE_UNAVAILABLE' }, 'session store unreadable');
      sendStateUnavailable(reply);
      return null;
    }
    if (!verified.ok) return refuse(request, reply, `session-${verified.reason}`);
    const { claims, csrfToken } = verified;
    const session = { sid: claims.sid, kind: claims.method, expiresAt: claims.expiresAt, csrfToken };
    if (claims.method === 'token') {
      let open: boolean;
      try {
        open = await tokenPathOpen();
      } catch {
        // Fail closed, as for the bearer itself.
        return refuse(request, reply, 'retire-latch-unreadable');
      }
      if (!open) return refuse(request, reply, 'token-session-closed');
      return {
        method: 'session',
        subject: null,
        email: null,
        role: ADMIN_TOKEN_CALLER.role,
        roleSource: 'admin-token',
        authenticatedAt: claims.authAt,
        authz: ADMIN_TOKEN_CALLER,
        session,
      };
    }
    const subject = claims.subject!;
    const resolved = await roleOr502(request, reply, subject);
    if (resolved === null) return null;
    return {
      method: 'session',
      subject,
      email: claims.email,
      role: resolved.role,
      roleSource: resolved.assigned ? 'assigned' : 'default',
      authenticatedAt: claims.authAt,
      authz: { role: resolved.role },
      session,
    };
  }

  async function adminTokenCaller(
    request: FastifyRequest,
    reply: FastifyReply,
    bearer: string | null | undefined,
  ): Promise<EngineCaller | null> {
    if (bearer === null) return refuse(request, reply, 'no-credential');
    if (bearer === undefined) return refuse(request, reply, 'malformed-authorization');
    if (!options.adminToken.configured) return refuse(request, reply, 'admin-token-off');
    if (!options.adminToken.matches(bearer)) return refuse(request, reply, 'admin-token-mismatch');
    let retired: boolean;
    try {
      retired = await adminTokenRetired(options.state);
    } catch {
      // Fail closed: an unreadable retire latch refuses the token.
      return refuse(request, reply, 'retire-latch-unreadable');
    }
    if (retired) return refuse(request, reply, 'admin-token-retired');
    return {
      method: 'admin-token',
      subject: null,
      email: null,
      role: ADMIN_TOKEN_CALLER.role,
      roleSource: 'admin-token',
      authenticatedAt: null,
      authz: ADMIN_TOKEN_CALLER,
    };
  }

  app.decorate('authenticate', async (request: FastifyRequest, reply: FastifyReply) => {
    const assertion = request.headers[PERIMETER_HEADER];
    const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
    const result =
      assertion !== undefined
        ? await perimeterCaller(request, reply, assertion)
        : cookie.present
          ? await sessionCaller(request, reply, cookie.value)
          : await adminTokenCaller(request, reply, bearerOf(request.headers.authorization));
    if (result?.method === 'session') {
      const origin = request.headers.origin;
      if (originCheck(request.method, origin, options.consoleOrigin) === 'failed') {
        request.log.info(
          { auth: 'refused', reason: 'csrf-origin' },
          'cookie session without the console origin',
        );
        void reply.code(403).send({ error: 'csrf origin check failed' });
        return;
      }
    }
    if (result !== null) {
      request.caller = result;
      request.headers['x-engine-caller'] = callerHeader(result);
    }
  });
}

export default fp(auth, { name: 'coffer-auth', fastify: '5.x', dependencies: ['coffer-replies'] });
