/**
 * SAML 2.0 sign-in routes (pre-authentication; the specification leaves the exact sub-paths "not
 * shown"; docs/identity.md "Single sign-on routes" is normative for them):
 *
 * - `GET /admin/saml/metadata/<connId>`: this engine's service-provider metadata for the
 *   connection (entity id = that URL, ACS = `/admin/saml/acs/<connId>`, persistent NameID, signed
 *   assertions wanted), `application/samlmetadata+xml`; 404 for an unknown connection.
 * - `GET /admin/saml/start/<connId>`: 302 to the IdP's single sign-on URL (HTTP-Redirect binding)
 *   with an AuthnRequest and a RelayState. The RelayState is 32 random bytes, stored (as its
 *   SHA-256) as a single-use record `saml-relay` bound to the connection, holding the
 *   AuthnRequest's ID; ten minutes.
 * - `POST /admin/saml/acs/<connId>` (form `SAMLResponse`, `RelayState`): the RelayState record is
 *   taken (single use), the response checked by @coffer/identity against that request ID
 *   (`InResponseTo`), signature, issuer, audience, recipient and time window; the group mapping
 *   applied, the session cookies set, 302 to `/`.
 *
 * The ACS carries no session and so is outside the Origin check (the IdP's page posts it); the
 * single-use RelayState bound to InResponseTo is what stops a replayed or injected response. A
 * failure of start or ACS is a 302 to `/?saml=failed` with a reason code in the log only. When
 * the IdP metadata is read from a URL and cannot be read, start and ACS answer the 503 plain-text
 * `saml metadata unavailable` (specification Errors: fail closed).
 */
import { createHash, randomBytes } from 'node:crypto';
import { samlAssertionConsumer, samlServiceProviderMetadata, samlStart } from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendNotFound } from '../../plugins/replies.ts';
import { SsoUnavailableError } from '../../sso/service.ts';
import { completeSignIn, startLimited } from '../../sso/sign-in.ts';
import { reasonOf, SSO_NOT_CONFIGURED } from './oidc.ts';

type ConnParams = { Params: { connId: string } };

const RELAY_PURPOSE = 'saml-relay';
const RELAY_TTL_MS = 10 * 60 * 1000;
/** A SAMLResponse form is a few KiB; 512 KiB leaves room for large group lists and stops a flood. */
const ACS_BODY_LIMIT = 512 * 1024;

const relayId = (relayState: string) => createHash('sha256').update(relayState).digest('hex');

export default async function samlRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'pre-auth', 'identity'] },
  });

  // The ACS form body, in this scope only (the rest of the API is JSON).
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: ACS_BODY_LIMIT },
    (_request, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );

  const failed = (request: FastifyRequest, reply: FastifyReply, connId: string, reason: string) => {
    request.log.warn({ sso: 'saml', connection: connId.slice(0, 64), reason }, 'saml sign-in failed');
    return reply.redirect('/?saml=failed', 302);
  };
  const metadataUnavailable = (
    request: FastifyRequest,
    reply: FastifyReply,
    connId: string,
    reason: string,
  ) => {
    request.log.error({ sso: 'saml', connection: connId.slice(0, 64), reason }, 'saml metadata unavailable');
    return reply.code(503).type('text/plain; charset=utf-8').send('saml metadata unavailable');
  };

  app.get<ConnParams>(
    '/saml/metadata/:connId',
    meta('SAML service-provider metadata for one connection', 'getSamlMetadata'),
    async (request, reply) => {
      const { connId } = request.params;
      if (app.config.consoleOrigin === undefined) return reply.code(501).send(SSO_NOT_CONFIGURED);
      const connection = await app.sso.get(connId);
      if (connection === null || connection.kind !== 'saml') return sendNotFound(reply);
      try {
        const saml = await app.sso.samlConnection(connection);
        return reply
          .type('application/samlmetadata+xml; charset=utf-8')
          .send(samlServiceProviderMetadata(saml));
      } catch (err) {
        if (err instanceof SsoUnavailableError)
          return metadataUnavailable(request, reply, connId, err.reason);
        throw err;
      }
    },
  );

  app.get<ConnParams>(
    '/saml/start/:connId',
    meta('SAML sign-in: 302 to the identity provider', 'getSamlStart'),
    async (request, reply) => {
      const { connId } = request.params;
      if (app.config.consoleOrigin === undefined) return reply.code(501).send(SSO_NOT_CONFIGURED);
      try {
        if (await startLimited(app, request)) return failed(request, reply, connId, 'rate-limited');
        const connection = await app.sso.enabled(connId, 'saml');
        if (connection === null) return failed(request, reply, connId, 'unknown-connection');
        const saml = await app.sso.samlConnection(connection);
        const relayState = randomBytes(32).toString('base64url');
        const { redirectUrl, requestId } = await samlStart(saml, { relayState });
        await app.state.identity.putToken({
          id: relayId(relayState),
          purpose: RELAY_PURPOSE,
          boundTo: connection.id,
          verifier: requestId,
          expiresAt: Date.now() + RELAY_TTL_MS,
        });
        return reply.header('cache-control', 'no-store').redirect(redirectUrl, 302);
      } catch (err) {
        if (err instanceof SsoUnavailableError)
          return metadataUnavailable(request, reply, connId, err.reason);
        return failed(request, reply, connId, reasonOf(err));
      }
    },
  );

  app.post<ConnParams & { Body: Record<string, unknown> }>(
    '/saml/acs/:connId',
    {
      ...meta('SAML assertion consumer (the IdP posts the response here)', 'postSamlAcs'),
      bodyLimit: ACS_BODY_LIMIT,
    },
    async (request, reply) => {
      const { connId } = request.params;
      if (app.config.consoleOrigin === undefined) return reply.code(501).send(SSO_NOT_CONFIGURED);
      const body = (request.body ?? {}) as Record<string, unknown>;
      const relayState = body.RelayState;
      const samlResponse = body.SAMLResponse;
      if (typeof relayState !== 'string' || relayState.length === 0 || relayState.length > 512)
        return failed(request, reply, connId, 'relay-state-missing');
      if (typeof samlResponse !== 'string' || samlResponse.length === 0)
        return failed(request, reply, connId, 'response-missing');
      try {
        const connection = await app.sso.enabled(connId, 'saml');
        if (connection === null) return failed(request, reply, connId, 'unknown-connection');
        // Single use: taken before the response is even parsed, so a replay finds nothing.
        const relay = await app.state.identity.takeToken(relayId(relayState), {
          purpose: RELAY_PURPOSE,
          boundTo: connection.id,
        });
        if (relay === null) return failed(request, reply, connId, 'relay-state-unknown');
        if (relay.expiresAt <= Date.now()) return failed(request, reply, connId, 'relay-state-expired');
        const saml = await app.sso.samlConnection(connection);
        const identity = await samlAssertionConsumer(saml, {
          samlResponse,
          expectedInResponseTo: relay.verifier,
        });
        return await completeSignIn(app, request, reply, connection, identity);
      } catch (err) {
        if (err instanceof SsoUnavailableError)
          return metadataUnavailable(request, reply, connId, err.reason);
        return failed(request, reply, connId, reasonOf(err));
      }
    },
  );
}
