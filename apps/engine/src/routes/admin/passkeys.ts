/**
 * Passkey registration and sign-in (pre-authentication, specification "Registration and first
 * owner"; docs/identity.md "Passkey routes").
 *
 * Registration is authorised by a proven path, never by a client-supplied email alone:
 * - bootstrap: a valid admin bearer while the role table is empty claims the first owner (a
 *   durable latch, `identity.first-owner`, taken when the passkey is stored: two racing claims
 *   make one owner);
 * - link: the first-owner set-up link `POST /admin/auth/bootstrap/send` mailed to the
 *   deploy-pinned address (ENGINE_FIRST_OWNER_EMAIL), 24 hours, single use, a new request replacing
 *   the previous one; `{ email, setupToken }`, checked at `begin`, used up at `finish`, while no
 *   first owner exists;
 * - invite: a single-use, email-bound token an owner minted (`POST /admin/roles/invite`), checked
 *   at `begin` and used up at `finish`;
 * - self-add: a person signed in with a session adds a passkey to their own email.
 * An email that already holds a passkey cannot be bound again by bootstrap or invite. Finishing a registration stores the passkey, stages ten recovery
 * codes (shown once in the reply, `recoveryCodesPending: true` until confirmed) and sets the
 * session cookie.
 *
 * Every ceremony's challenge is stored at `begin` as a single-use record (purpose
 * `ceremony:register:<path>` or `ceremony:login`, bound to the email) and taken at `finish`: an
 * answer replayed later finds nothing. Without CONSOLE_ORIGIN every ceremony answers 501
 * `{ ok: false, reason: 'passkey_not_configured' }`. A refused sign-in is the generic 401.
 */
import {
  authenticationOptions,
  checkOneTimeToken,
  csrfCookie,
  isIdentityError,
  mintOneTimeToken,
  mintRecoveryCodes,
  normaliseEmail,
  type OneTimeRecord,
  oneTimeTokenId,
  passkeySubject,
  readCookie,
  registrationOptions,
  SESSION_COOKIE,
  type StoredPasskey,
  sessionCookie,
  verifyAuthentication,
  verifyRegistration,
} from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerOf } from '../../auth/admin-token.ts';
import { createMailer } from '../../auth/mailer.ts';
import {
  sendBadRequest,
  sendRateLimited,
  sendStateUnavailable,
  sendUnauthorised,
} from '../../plugins/replies.ts';
import { adminTokenRetired } from '../../state/index.ts';
import { claimedChallenge, relyingPartyOr501, rememberChallenge, storedPasskey } from './ceremonies.ts';

const FIRST_OWNER_LATCH = 'identity.first-owner';
const SEND_WINDOW_MS = 60 * 60 * 1000;
const SENDS_PER_ADDRESS = 5;

type RegisterPath = 'bootstrap' | 'link' | 'self' | 'invite';

export default async function passkeyRoutes(app: FastifyInstance): Promise<void> {
  const identity = app.state.identity;

  const relyingParty = (reply: FastifyReply) => relyingPartyOr501(app, reply, 'signin');
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'pre-auth', 'identity'] },
  });

  /** The signed-in person's email (self-add), or null. Never falls back to anything else. */
  const sessionEmail = async (request: FastifyRequest): Promise<string | null> => {
    const cookie = readCookie(request.headers.cookie, SESSION_COOKIE);
    if (cookie.value === null) return null;
    const verified = await app.sessions.verify(cookie.value);
    return verified.ok && verified.claims.email !== null ? verified.claims.email : null;
  };

  /** The record a set-up link or invite names for `email`, checked but not used up; null when refused. */
  const validOneTime = async (token: unknown, purpose: 'invite' | 'first-owner', email: string) => {
    const id = oneTimeTokenId(token, purpose);
    const record = id === null ? null : await identity.getToken(id, { purpose, boundTo: email });
    try {
      checkOneTimeToken(token, record as OneTimeRecord | null, { purpose, boundTo: email });
      return record;
    } catch {
      return null;
    }
  };

  /** Whether a first owner exists (the role table has a member, or the claim latch is set). */
  const firstOwnerClaimed = async (): Promise<boolean> =>
    (await app.state.roles.list()).length > 0 ||
    (await app.state.settings.get(FIRST_OWNER_LATCH)) !== undefined;

  /** Whether the bearer on this request is the live admin token. */
  const bearerValid = async (request: FastifyRequest): Promise<boolean> => {
    const bearer = bearerOf(request.headers.authorization);
    if (typeof bearer !== 'string' || !app.adminToken.configured || !app.adminToken.matches(bearer))
      return false;
    return !(await adminTokenRetired(app.state));
  };

  const setSession = async (reply: FastifyReply, email: string) => {
    const minted = await app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
    reply.header('set-cookie', [
      sessionCookie(minted.token, minted.maxAge),
      csrfCookie(minted.csrfToken, minted.maxAge),
    ]);
    return minted;
  };

  app.post(
    '/auth/register/begin',
    meta('Passkey registration: creation options', 'postAuthRegisterBegin'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      const body = (request.body ?? {}) as { email?: unknown; inviteToken?: unknown; setupToken?: unknown };
      let email: string;
      try {
        email = normaliseEmail(body.email);
      } catch {
        return sendBadRequest(reply, 'email must be an address');
      }
      try {
        let path: RegisterPath;
        let inviteId = '-';
        if (body.setupToken !== undefined) {
          // The emailed first-owner link: checked here, used up at finish.
          const link = await validOneTime(body.setupToken, 'first-owner', email);
          if (link === null) return sendUnauthorised(reply);
          if (await firstOwnerClaimed())
            return reply.code(403).send({ ok: false, reason: 'first owner already claimed' });
          if (await identity.emailHasPasskey(email))
            return reply.code(409).send({ ok: false, reason: 'this email already holds a passkey' });
          path = 'link';
          inviteId = link.id;
        } else if (body.inviteToken !== undefined) {
          // Checked here, used up at finish: an abandoned ceremony leaves the invite usable.
          const invite = await validOneTime(body.inviteToken, 'invite', email);
          if (invite === null) return sendUnauthorised(reply);
          if (await identity.emailHasPasskey(email))
            return reply.code(409).send({ ok: false, reason: 'this email already holds a passkey' });
          path = 'invite';
          inviteId = invite.id;
        } else if ((await sessionEmail(request)) === email) path = 'self';
        else if (await bearerValid(request)) {
          if (await firstOwnerClaimed())
            return reply.code(403).send({ ok: false, reason: 'first owner already claimed' });
          if (await identity.emailHasPasskey(email))
            return reply.code(409).send({ ok: false, reason: 'this email already holds a passkey' });
          path = 'bootstrap';
        } else return sendUnauthorised(reply);
        // Expired single-use records (abandoned ceremonies, stale links) go here, not on a timer.
        await identity.purgeTokens(Date.now());
        const existing = (await identity.passkeysOf(passkeySubject(email))).map(storedPasskey);
        const { options, challenge } = await registrationOptions(rp, { email }, existing);
        await rememberChallenge(identity, challenge, `ceremony:register:${path}`, email, inviteId);
        return options;
      } catch (err) {
        request.log.error({ code: (err as { code?: string }).code }, 'passkey registration could not begin');
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/auth/register/finish',
    meta('Passkey registration: store the passkey, stage recovery codes, sign in', 'postAuthRegisterFinish'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      const credential = (request.body as { credential?: unknown } | undefined)?.credential;
      const challenge = claimedChallenge(credential);
      if (challenge === null)
        return sendBadRequest(reply, 'credential must be a WebAuthn registration answer');
      try {
        const ceremony = await identity.takeToken(challenge);
        if (
          ceremony === null ||
          !ceremony.purpose.startsWith('ceremony:register:') ||
          ceremony.expiresAt <= Date.now()
        )
          return sendUnauthorised(reply);
        const path = ceremony.purpose.slice('ceremony:register:'.length) as RegisterPath;
        const email = ceremony.boundTo;
        let passkey: StoredPasskey;
        try {
          passkey = await verifyRegistration(rp, credential, challenge);
        } catch (err) {
          if (!isIdentityError(err)) throw err;
          request.log.info(
            { auth: 'refused', reason: `passkey-${err.refusal}` },
            'passkey registration refused',
          );
          return sendUnauthorised(reply);
        }
        const subject = passkeySubject(email);
        if (path === 'invite' || path === 'link') {
          // The invite or link is used up now, in one write; a second finish with it finds nothing.
          const purpose = path === 'invite' ? 'invite' : 'first-owner';
          const invite = await identity.takeToken(ceremony.verifier, { purpose, boundTo: email });
          if (invite === null || invite.expiresAt <= Date.now()) return sendUnauthorised(reply);
          if (await identity.emailHasPasskey(email))
            return reply.code(409).send({ ok: false, reason: 'this email already holds a passkey' });
        }
        if (path === 'bootstrap' || path === 'link') {
          // The latch makes the first-owner claim happen once, whatever races.
          const first = await app.state.settings.setIfAbsent(FIRST_OWNER_LATCH, {
            at: new Date().toISOString(),
          });
          if (!first || (await app.state.roles.list()).length > 0)
            return reply.code(403).send({ ok: false, reason: 'first owner already claimed' });
        }
        await identity.addPasskey({ ...passkey, subject, email });
        if (path === 'bootstrap' || path === 'link') {
          await app.state.roles.assign({
            subject,
            role: 'owner',
            email,
            grantedBy: path === 'link' ? 'setup-link' : 'bootstrap',
          });
          await app.audit.append({
            action: 'first-owner-claim',
            actor: { email, subject, method: path === 'link' ? 'session' : 'admin-token' },
            detail: { via: path === 'link' ? 'emailed set-up link' : 'admin token' },
            role: 'owner',
            sourceAddress: request.ip ?? null,
            outcome: 'applied',
            target: subject,
          });
        }
        await app.audit.append({
          action: 'passkey-register',
          actor: { email, subject, method: path === 'bootstrap' ? 'admin-token' : 'session' },
          sourceAddress: request.ip ?? null,
          outcome: 'applied',
          target: subject,
        });
        const codes = await mintRecoveryCodes();
        await identity.stageRecoveryCodes(subject, codes.verifiers);
        const minted = await setSession(reply, email);
        return {
          ok: true,
          email,
          subject,
          role: path === 'bootstrap' || path === 'link' ? 'owner' : undefined,
          recoveryCodesPending: true,
          recoveryCodes: codes.codes,
          sessionExpiresAt: new Date(minted.claims.expiresAt * 1000).toISOString(),
        };
      } catch (err) {
        request.log.error({ code: (err as { code?: string }).code }, 'passkey registration could not finish');
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/auth/login/begin',
    meta('Passkey sign-in: request options', 'postAuthLoginBegin'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      let email: string;
      try {
        email = normaliseEmail((request.body as { email?: unknown } | undefined)?.email);
      } catch {
        return sendBadRequest(reply, 'email must be an address');
      }
      try {
        const mine = (await identity.passkeysOf(passkeySubject(email))).map(storedPasskey);
        // An email without passkeys gets the same shape of answer (nothing tells the two apart).
        const { options, challenge } = await authenticationOptions(rp, mine);
        await rememberChallenge(identity, challenge, 'ceremony:login', email);
        return options;
      } catch (err) {
        request.log.error({ code: (err as { code?: string }).code }, 'passkey sign-in could not begin');
        return sendStateUnavailable(reply);
      }
    },
  );

  app.post(
    '/auth/login/finish',
    meta('Passkey sign-in: verify and set the session cookie', 'postAuthLoginFinish'),
    async (request, reply) => {
      const rp = relyingParty(reply);
      if (rp === null) return reply;
      const credential = (request.body as { credential?: unknown } | undefined)?.credential;
      const challenge = claimedChallenge(credential);
      if (challenge === null) return sendUnauthorised(reply);
      try {
        const ceremony = await identity.takeToken(challenge, { purpose: 'ceremony:login' });
        if (ceremony === null || ceremony.purpose !== 'ceremony:login' || ceremony.expiresAt <= Date.now())
          return sendUnauthorised(reply);
        const email = ceremony.boundTo;
        const mine = await identity.passkeysOf(passkeySubject(email));
        let result: { credentialId: string; newCounter: number };
        try {
          result = await verifyAuthentication(rp, credential, challenge, mine.map(storedPasskey));
        } catch (err) {
          if (!isIdentityError(err)) throw err;
          request.log.info({ auth: 'refused', reason: `passkey-${err.refusal}` }, 'passkey sign-in refused');
          return sendUnauthorised(reply);
        }
        const before = mine.find((p) => p.id === result.credentialId)!.counter;
        // Compare-and-set: two answers racing from one read cannot both sign in.
        if (!(await identity.usePasskey(result.credentialId, before, result.newCounter)))
          return sendUnauthorised(reply);
        const minted = await setSession(reply, email);
        return { ok: true, email, sessionExpiresAt: new Date(minted.claims.expiresAt * 1000).toISOString() };
      } catch (err) {
        request.log.error({ code: (err as { code?: string }).code }, 'passkey sign-in could not finish');
        return sendStateUnavailable(reply);
      }
    },
  );

  const mailer = app.config.mail === undefined ? undefined : createMailer(app.config.mail);

  app.post(
    '/auth/bootstrap/send',
    meta(
      'Mail the first-owner set-up link to the deploy-pinned address (always a generic 200)',
      'postAuthBootstrapSend',
    ),
    async (request, reply) => {
      try {
        const hits = await app.state.rateLimits.hit(`bootstrap-send:${request.ip}`, SEND_WINDOW_MS);
        if (hits.count > SENDS_PER_ADDRESS) {
          reply.header('retry-after', String(Math.max(1, Math.ceil(hits.resetInMs / 1000))));
          return sendRateLimited(reply);
        }
        const to = app.config.firstOwnerEmail;
        const origin = app.config.consoleOrigin;
        if (
          to !== undefined &&
          origin !== undefined &&
          mailer !== undefined &&
          !(await firstOwnerClaimed())
        ) {
          const { token, record } = mintOneTimeToken({ purpose: 'first-owner', boundTo: to });
          // A new request replaces the previous link.
          await identity.putToken(record, { replace: true });
          const link = `${origin}/#setup=${token}&email=${encodeURIComponent(to)}`;
          const sent = await mailer.send({
            to,
            subject: 'Coffer: claim the first owner',
            text:
              `Someone asked to set up the Coffer backup engine at ${origin}.\n\n` +
              `Open this link within 24 hours to register a passkey as its first owner:\n\n${link}\n\n` +
              'It works once. If you did not ask for it, ignore this message: nothing changes until the link is used.\n',
          });
          if (sent.sent)
            request.log.info({ identity: 'first-owner-link-sent' }, 'first-owner set-up link sent');
          else
            request.log.warn(
              { identity: 'first-owner-link-failed', code: sent.code },
              'first-owner link not sent',
            );
        }
      } catch (err) {
        request.log.error({ code: (err as { code?: string }).code }, 'first-owner link not sent');
      }
      // Always the same answer: it tells nobody whether a link went out, or to whom.
      return { ok: true };
    },
  );
}
