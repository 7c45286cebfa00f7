/**
 * `POST /admin/stepup/begin` and `/finish` (any authenticated caller; docs/identity.md "Step-up"):
 * a passkey ceremony for the signed-in person that returns a single-use step-up token (bound to
 * this session, five minutes) for the `x-engine-stepup` header. Without CONSOLE_ORIGIN: 501
 * `{ error: 'passkey_not_configured' }`. Callers without passkeys (the bare token, a token session,
 * a perimeter caller, whose step-up is a new access sign-in) get 400 saying so.
 */
import {
  authenticationOptions,
  isIdentityError,
  mintOneTimeToken,
  passkeySubject,
  verifyAuthentication,
} from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendBadRequest, sendStateUnavailable, sendUnauthorised } from '../../plugins/replies.ts';
import { claimedChallenge, relyingPartyOr501, rememberChallenge, storedPasskey } from './ceremonies.ts';

export default async function stepUpRoutes(app: FastifyInstance): Promise<void> {
  const identity = app.state.identity;

  const relyingParty = (reply: FastifyReply) => relyingPartyOr501(app, reply, 'stepup');

  /** The person's session (sid and email), or the 400 already sent. */
  const personSession = (request: FastifyRequest, reply: FastifyReply) => {
    const caller = request.caller!;
    if (caller.session === undefined || caller.email === null || caller.session.kind === 'token') {
      sendBadRequest(
        reply,
        caller.method === 'perimeter-access'
          ? 'step-up for an access caller is a new access sign-in'
          : 'step-up needs a person signed in with a passkey',
      );
      return null;
    }
    return { sid: caller.session.sid, email: caller.email };
  };

  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });

  app.post(
    '/stepup/begin',
    meta('Step-up: passkey request options', 'postStepUpBegin'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      const who = personSession(request, reply);
      if (who === null) return reply;
      try {
        const mine = await identity.passkeysOf(passkeySubject(who.email));
        const { options, challenge } = await authenticationOptions(rp, mine.map(storedPasskey));
        await rememberChallenge(identity, challenge, 'ceremony:stepup', who.sid);
        return options;
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/stepup/finish',
    meta('Step-up: verify and return a single-use step-up token', 'postStepUpFinish'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      const who = personSession(request, reply);
      if (who === null) return reply;
      const credential = (request.body as { credential?: unknown } | undefined)?.credential;
      const challenge = claimedChallenge(credential);
      if (challenge === null) return sendUnauthorised(reply);
      try {
        const ceremony = await identity.takeToken(challenge, {
          purpose: 'ceremony:stepup',
          boundTo: who.sid,
        });
        if (
          ceremony === null ||
          ceremony.purpose !== 'ceremony:stepup' ||
          ceremony.boundTo !== who.sid ||
          ceremony.expiresAt <= Date.now()
        )
          return sendUnauthorised(reply);
        const mine = await identity.passkeysOf(passkeySubject(who.email));
        let result: { credentialId: string; newCounter: number };
        try {
          result = await verifyAuthentication(rp, credential, challenge, mine.map(storedPasskey));
        } catch (err) {
          if (!isIdentityError(err)) throw err;
          return sendUnauthorised(reply);
        }
        const before = mine.find((p) => p.id === result.credentialId)!.counter;
        if (!(await identity.usePasskey(result.credentialId, before, result.newCounter)))
          return sendUnauthorised(reply);
        const { token, record } = mintOneTimeToken({ purpose: 'step-up', boundTo: who.sid });
        await identity.putToken(record);
        return { ok: true, stepUpToken: token, expiresAt: new Date(record.expiresAt).toISOString() };
      } catch {
        return sendStateUnavailable(reply);
      }
    },
  );
}
