/**
 * Recovery codes (pre-authentication routes that authenticate inside; docs/identity.md "Recovery
 * routes"):
 * - `POST /admin/auth/recovery-codes/confirm`: a person's session promotes their staged set;
 *   `{ ok: true, promoted: false }` when nothing is staged.
 * - `POST /admin/auth/recovery-codes/regenerate`: a person's session stages a new set and gets it
 *   once (`recoveryCodesPending: true` until confirmed); the bare admin token, a token session or
 *   a perimeter caller gets 403 (recovery codes belong to a person's own email).
 * - `POST /admin/auth/recovery` `{ email, code }`: a matching active code signs the person in
 *   (cookie only, never in the body) and is used up in the same step; every failure is the one
 *   generic 401. Limited per source address (10 per 15 minutes) and per email (5 per 15 minutes,
 *   counted only for failures), so a stolen email cannot be guessed at from many addresses.
 * The Origin check applies to all three (cookie-borne or cookie-minting writes).
 */
import {
  csrfCookie,
  matchRecoveryCode,
  mintRecoveryCodes,
  normaliseEmail,
  originCheck,
  passkeySubject,
  readCookie,
  SESSION_COOKIE,
  sessionCookie,
} from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendRateLimited, sendStateUnavailable, sendUnauthorised } from '../../plugins/replies.ts';

const WINDOW_MS = 15 * 60 * 1000;
const PER_ADDRESS = 10;
const PER_EMAIL = 5;

const meta = (summary: string, operationId: string) => ({
  schema: { summary, operationId, tags: ['admin', 'pre-auth', 'identity'] },
});

export default async function recoveryRoutes(app: FastifyInstance): Promise<void> {
  const identity = app.state.identity;

  const originRefused = (request: FastifyRequest, reply: FastifyReply): boolean => {
    if (originCheck('POST', request.headers.origin, app.config.consoleOrigin) !== 'failed') return false;
    void reply.code(403).send({ error: 'csrf origin check failed' });
    return true;
  };

  /** The signed-in person (a session with an email), or the reply already sent. */
  const person = async (
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<{ email: string; subject: string } | null> => {
    const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
    if (!cookie.present && request.headers.authorization !== undefined) {
      // A bearer (the bare admin token): recovery codes are a person's own, and it has no email.
      void reply.code(403).send({ error: 'forbidden', required: 'own email', have: 'admin-token' });
      return null;
    }
    if (cookie.value === null) {
      sendUnauthorised(reply);
      return null;
    }
    const verified = await app.sessions.verify(cookie.value);
    if (!verified.ok) {
      sendUnauthorised(reply);
      return null;
    }
    const { email, subject, method } = verified.claims;
    if (email === null || subject === null || method === 'token') {
      void reply.code(403).send({ error: 'forbidden', required: 'own email', have: 'token session' });
      return null;
    }
    return { email, subject };
  };

  app.post(
    '/auth/recovery-codes/confirm',
    meta('Confirm the staged recovery codes', 'postRecoveryCodesConfirm'),
    async (request, reply) => {
      if (originRefused(request, reply)) return reply;
      try {
        const who = await person(request, reply);
        if (who === null) return reply;
        const promoted = await identity.promoteRecoveryCodes(who.subject);
        if (promoted)
          await app.audit.append({
            action: 'recovery-codes-confirm',
            actor: { email: who.email, subject: who.subject, method: 'session' },
            sourceAddress: request.ip ?? null,
            outcome: 'applied',
            target: who.subject,
          });
        return { ok: true, promoted };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/auth/recovery-codes/regenerate',
    meta('Stage a new set of recovery codes (shown once)', 'postRecoveryCodesRegenerate'),
    async (request, reply) => {
      if (originRefused(request, reply)) return reply;
      try {
        const who = await person(request, reply);
        if (who === null) return reply;
        const codes = await mintRecoveryCodes();
        await identity.stageRecoveryCodes(who.subject, codes.verifiers);
        await app.audit.append({
          action: 'recovery-codes-regenerate',
          actor: { email: who.email, subject: who.subject, method: 'session' },
          sourceAddress: request.ip ?? null,
          outcome: 'applied',
          target: who.subject,
        });
        return { ok: true, recoveryCodesPending: true, recoveryCodes: codes.codes };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/auth/recovery',
    meta('Sign in with a recovery code', 'postAuthRecovery'),
    async (request, reply) => {
      if (originRefused(request, reply)) return reply;
      const body = (request.body ?? {}) as { email?: unknown; code?: unknown };
      let email: string | null;
      try {
        email = normaliseEmail(body.email);
      } catch {
        email = null;
      }
      try {
        const address = await app.state.rateLimits.hit(`recovery:addr:${request.ip}`, WINDOW_MS);
        if (address.count > PER_ADDRESS) return retryLater(reply, address.resetInMs);
        if (email !== null) {
          const tries = await app.state.rateLimits.read(`recovery:email:${email}`, WINDOW_MS);
          if (tries.count >= PER_EMAIL) return retryLater(reply, tries.resetInMs);
        }
        // One scrypt whatever happens, so timing does not tell a known email from an unknown one.
        const subject = email === null ? null : passkeySubject(email);
        const verifiers = subject === null ? [] : await identity.recoveryCodes(subject);
        const index = await matchRecoveryCode(body.code, verifiers);
        const used =
          index >= 0 &&
          subject !== null &&
          (await identity.useRecoveryCode(subject, verifiers[index]!.selector));
        if (!used || email === null || subject === null) {
          if (email !== null) await app.state.rateLimits.hit(`recovery:email:${email}`, WINDOW_MS);
          request.log.info({ auth: 'refused', reason: 'recovery-code' }, 'recovery refused');
          return sendUnauthorised(reply);
        }
        const minted = await app.sessions.mint({ subject, email, method: 'recovery' });
        reply.header('set-cookie', [
          sessionCookie(minted.token, minted.maxAge),
          csrfCookie(minted.csrfToken, minted.maxAge),
        ]);
        await app.audit.append({
          action: 'recovery-sign-in',
          actor: { email, subject, method: 'session' },
          sourceAddress: request.ip ?? null,
          outcome: 'applied',
          target: subject,
          detail: { codesLeft: verifiers.length - 1 },
        });
        return { ok: true, email, codesLeft: verifiers.length - 1 };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}

function retryLater(reply: FastifyReply, resetInMs: number): FastifyReply {
  reply.header('retry-after', String(Math.max(1, Math.ceil(resetInMs / 1000))));
  return sendRateLimited(reply);
}
