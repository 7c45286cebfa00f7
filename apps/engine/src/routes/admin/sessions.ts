/**
 * Ending sessions (specification "Session and step-up"; docs/identity.md "Ending sessions"):
 * - `POST /admin/sessions/terminate`: the caller's own current session;
 * - `POST /admin/sessions/terminate-others`: every other session of the caller's subject (the
 *   caller gets a fresh cookie for this one); step-up gated;
 * - `POST /admin/sessions/terminate-user` `{ subject }`: every session of one person;
 * - `POST /admin/sessions/terminate-all`: every session of everyone, token sessions included.
 * The last two need `roles.write` (owners hold it) and step-up. On a cookie session all four need
 * the double-submit token: `x-engine-csrf` equal to the `__Host-engine_csrf` cookie and to this
 * session's own token, else 403 `csrf token check failed`. Each is audited (`session-terminate`).
 * `POST /admin/signin-factors/revoke` `{ credentialId }` (own passkey, or anyone's with
 * `roles.write`; double-submit token; step-up) removes the passkey and ends every session of its
 * holder; one's own last passkey without confirmed recovery codes is refused (409), so nobody
 * locks themselves out by accident. Audited as `signin-factor-revoke`.
 * `GET /admin/signin-factors` (a person's session; 400 for the admin token or a token session):
 * the caller's own passkeys (credential id, transports, created and last used; never the public
 * key or counter) and how many confirmed recovery codes are left.
 * terminate-user, terminate-all and a revoke (which ends its holder's sessions) raise the
 * `sessions-ended` notification event (src/events.ts): scope, subject, who; never a token.
 */

import { can, forbiddenBody } from '@coffer/authz';
import {
  CSRF_COOKIE,
  CSRF_HEADER,
  clearedCookies,
  csrfCookie,
  csrfTokenValid,
  readCookie,
  SESSION_COOKIE,
  sessionCookie,
} from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendBadRequest, sendStateUnavailable } from '../../plugins/replies.ts';

export default async function sessionRoutes(app: FastifyInstance): Promise<void> {
  /** The double-submit check for cookie callers (header-borne callers are exempt). */
  const csrfRefused = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const session = request.caller?.session;
    if (session === undefined) return; // header-borne callers are not cookie-borne
    const header = request.headers[CSRF_HEADER];
    const cookie = readCookie(request.headers.cookie, CSRF_COOKIE).value;
    if (!csrfTokenValid(typeof header === 'string' ? header : undefined, cookie, session.csrfToken))
      void reply.code(403).send({ error: 'csrf token check failed' });
  };
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });
  const ended = (
    request: FastifyRequest,
    scope: 'everyone' | 'subject',
    subject: string | null,
    cause: string,
  ) =>
    app.events.raise({
      name: 'sessions-ended',
      jobId: null,
      detail: { scope, subject, by: request.caller?.subject ?? 'admin-token', cause },
    });
  const audit = (request: FastifyRequest, target: string, scope: string) =>
    app.audit.forRequest(request, {
      action: 'session-terminate',
      outcome: 'applied',
      target,
      detail: { scope },
    });

  app.post(
    '/sessions/terminate',
    {
      onRequest: [csrfRefused, app.rateLimitCaller],
      ...meta('End the current session', 'postSessionsTerminate'),
    },
    async (request, reply) => {
      const caller = request.caller!;
      if (caller.session === undefined) return sendBadRequest(reply, 'no cookie session to end');
      const token = readCookie(request.headers.cookie, SESSION_COOKIE).value!;
      try {
        const verified = await app.sessions.verify(token);
        if (verified.ok) await app.sessions.endOne(verified.claims);
      } catch {
        return sendStateUnavailable(reply);
      }
      await audit(request, caller.subject ?? 'token-session', 'this session');
      reply.header('set-cookie', clearedCookies());
      return { ok: true, ended: 'this session' };
    },
  );

  app.post(
    '/sessions/terminate-others',
    {
      onRequest: [csrfRefused, app.requireStepUp, app.rateLimitCaller],
      ...meta("End the caller's other sessions", 'postSessionsTerminateOthers'),
    },
    async (request, reply) => {
      const caller = request.caller!;
      if (caller.session === undefined || caller.subject === null)
        return sendBadRequest(reply, 'a person signed in with a session ends their other sessions');
      try {
        await app.sessions.endAll(caller.subject);
        const minted = await app.sessions.mint({
          subject: caller.subject,
          email: caller.email,
          method: caller.session.kind,
          ...(caller.authenticatedAt === null ? {} : { authAt: caller.authenticatedAt }),
        });
        reply.header('set-cookie', [
          sessionCookie(minted.token, minted.maxAge),
          csrfCookie(minted.csrfToken, minted.maxAge),
        ]);
        await audit(request, caller.subject, 'other sessions');
        return { ok: true, ended: 'other sessions', csrfToken: minted.csrfToken };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post<{ Body: { subject?: unknown } }>(
    '/sessions/terminate-user',
    {
      onRequest: [app.requireCapability('roles.write'), csrfRefused, app.requireStepUp, app.rateLimitCaller],
      config: { capability: 'roles.write' },
      ...meta('End every session of one person', 'postSessionsTerminateUser'),
    },
    async (request, reply) => {
      const subject = request.body?.subject;
      if (typeof subject !== 'string' || subject.length === 0 || subject.length > 512)
        return sendBadRequest(reply, 'subject must be a subject string');
      try {
        await app.sessions.endAll(subject);
      } catch {
        return sendStateUnavailable(reply);
      }
      await audit(request, subject, 'all sessions of the subject');
      ended(request, 'subject', subject, 'terminate-user');
      return { ok: true, ended: 'all sessions of the subject', subject };
    },
  );

  app.post(
    '/sessions/terminate-all',
    {
      onRequest: [app.requireCapability('roles.write'), csrfRefused, app.requireStepUp, app.rateLimitCaller],
      config: { capability: 'roles.write' },
      ...meta('End every session of everyone', 'postSessionsTerminateAll'),
    },
    async (request, reply) => {
      try {
        await app.sessions.endEverything();
      } catch {
        return sendStateUnavailable(reply);
      }
      await audit(request, 'all', 'every session');
      ended(request, 'everyone', null, 'terminate-all');
      reply.header('set-cookie', clearedCookies());
      return { ok: true, ended: 'every session' };
    },
  );

  app.post<{ Body: { credentialId?: unknown } }>(
    '/signin-factors/revoke',
    {
      onRequest: [csrfRefused, app.requireStepUp, app.rateLimitCaller],
      ...meta(
        "Revoke a passkey (own, or anyone's with roles.write) and end its holder's sessions",
        'postSigninFactorsRevoke',
      ),
    },
    async (request, reply) => {
      const caller = request.caller!;
      const id = request.body?.credentialId;
      if (typeof id !== 'string' || id.length === 0 || id.length > 1024)
        return sendBadRequest(reply, 'credentialId must be a passkey credential id');
      try {
        const passkey = await app.state.identity.passkey(id);
        const own = passkey !== null && passkey.subject === caller.subject;
        if (!own && !can(caller.authz, 'roles.write'))
          return void reply.code(403).send(forbiddenBody('roles.write', caller.authz));
        if (passkey === null) return reply.code(404).send({ error: 'no such passkey' });
        const left = (await app.state.identity.passkeysOf(passkey.subject)).length - 1;
        const codes = (await app.state.identity.recoveryCodes(passkey.subject)).length;
        if (own && left === 0 && codes === 0)
          return reply
            .code(409)
            .send({ error: 'this is your last passkey and you have no recovery codes: add another first' });
        await app.state.identity.removePasskey(id);
        await app.sessions.endAll(passkey.subject);
        await app.audit.forRequest(request, {
          action: 'signin-factor-revoke',
          outcome: 'applied',
          target: passkey.subject,
          detail: { passkeysLeft: left },
        });
        ended(request, 'subject', passkey.subject, 'signin-factor-revoke');
        if (own) reply.header('set-cookie', clearedCookies());
        return { ok: true, subject: passkey.subject, passkeysLeft: left, sessionsEnded: true };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.get(
    '/signin-factors',
    { ...meta("The caller's own passkeys and recovery codes left", 'getSigninFactors') },
    async (request, reply) => {
      const subject = request.caller?.subject;
      if (!subject || !request.caller?.email)
        return sendBadRequest(
          reply,
          'sign-in factors belong to a person: sign in with a passkey or a recovery code',
        );
      try {
        const [passkeys, codes] = await Promise.all([
          app.state.identity.passkeysOf(subject),
          app.state.identity.recoveryCodes(subject),
        ]);
        return {
          passkeys: passkeys.map((p) => ({
            id: p.id,
            transports: p.transports,
            createdAt: p.createdAt,
            usedAt: p.usedAt,
          })),
          recoveryCodesLeft: codes.length,
        };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}
