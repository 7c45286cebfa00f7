/**
 * Authentication (specification "Authentication": method precedence, rules 1, 2, 5, 6, 7, 8), as
 * the named plugin `coffer-auth`. It decorates the instance with `authenticate`, an onRequest
 * hook that the authenticated admin scope installs, and every request with `caller`.
 *
 * Precedence: (1) perimeter access JWT, (2) session cookie (a later issue), (3) admin bearer.
 * A present-but-invalid higher method is answered 401 and never falls through to a lower one;
 * only the genuine absence of its header moves down; no usable credential is 401 `unauthorised`.
 * An assertion header on an engine without perimeter configuration is present-but-unverifiable
 * and refused the same way.
 *
 * On success the router overwrites `x-engine-caller` on the request it hands to the route with
 * the authenticated identity (the conventions plugin already dropped any inbound value). The role
 * is re-resolved from the subject on every request. Tokens never reach a log line: refusals are
 * logged with a coarse reason only.
 */
import { ADMIN_TOKEN_CALLER } from '@coffer/authz';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { type AdminTokenChecker, bearerOf } from '../auth/admin-token.ts';
import type { EngineCaller } from '../auth/caller.ts';
import { PERIMETER_HEADER, type PerimeterVerifier } from '../auth/perimeter.ts';
import { adminTokenRetired, roleOfSubject, type State } from '../state/index.ts';
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
  }
}

export interface AuthOptions {
  perimeter: PerimeterVerifier | undefined;
  adminToken: AdminTokenChecker;
  state: State;
}

/** The value the router puts in `x-engine-caller`. */
export function callerHeader(caller: EngineCaller): string {
  return JSON.stringify({ method: caller.method, subject: caller.subject });
}

async function auth(app: FastifyInstance, options: AuthOptions): Promise<void> {
  app.decorateRequest('caller', null);
  app.decorate('adminToken', options.adminToken);

  // Answers 401 and returns null: the caller of a refused request is "nobody".
  const refuse = (request: FastifyRequest, reply: FastifyReply, reason: string): null => {
    request.log.info({ auth: 'refused', reason }, 'authentication refused');
    sendUnauthorised(reply);
    return null;
  };

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
    let resolved: Awaited<ReturnType<typeof roleOfSubject>>;
    try {
      resolved = await roleOfSubject(options.state, subject);
    } catch {
      request.log.error({ code: 'ERR_ENGINE_STATE_UNAVAILABLE' }, 'role table unreadable');
      sendStateUnavailable(reply);
      return null;
    }
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
    const result =
      assertion !== undefined
        ? await perimeterCaller(request, reply, assertion)
        : await adminTokenCaller(request, reply, bearerOf(request.headers.authorization));
    if (result !== null) {
      request.caller = result;
      request.headers['x-engine-caller'] = callerHeader(result);
    }
  });
}

export default fp(auth, { name: 'coffer-auth', fastify: '5.x', dependencies: ['coffer-replies'] });
