/**
 * OpenID Connect sign-in routes (pre-authentication; specification "OIDC", docs/identity.md
 * "Single sign-on routes"):
 *
 * - `GET /admin/oidc/providers`: the enabled connections of both kinds as a display list
 *   `{ providers: [{ id, kind, displayName, startUrl }] }` (empty without CONSOLE_ORIGIN, where
 *   no sign-in could come back).
 * - `GET /admin/oidc/start/<connId>`: 302 to the provider's authorization endpoint (code flow,
 *   `state`, `nonce`, PKCE S256, `redirect_uri` = CONSOLE_ORIGIN + `/admin/oidc/callback/<connId>`)
 *   with the HMAC-signed transaction in the `__Host-engine_oidc` cookie (SameSite=Lax, 10 minutes).
 * - `GET /admin/oidc/callback/<connId>`: the transaction and the provider's answer checked by
 *   @coffer/identity, the group mapping applied, the session cookies set, 302 to `/`.
 *
 * Every failure of start or callback is a 302 to `/?oidc=failed` that clears the transaction
 * cookie; the log line carries the connection id and a reason code, never a code, token, state
 * or secret. Without CONSOLE_ORIGIN start and callback answer 501 `{ ok: false, reason:
 * 'sso_not_configured' }` (the passkey routes' answer for the same misconfiguration).
 */
import {
  decodeOidcTransaction,
  encodeOidcTransaction,
  isIdentityError,
  OIDC_TRANSACTION_COOKIE,
  OIDC_TRANSACTION_TTL_MS,
  oidcCallback,
  oidcStart,
  oidcTransactionCookie,
  readCookie,
} from '@coffer/identity';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { completeSignIn, startLimited } from '../../sso/sign-in.ts';

type ConnParams = { Params: { connId: string } };

export const SSO_NOT_CONFIGURED = { ok: false, reason: 'sso_not_configured' } as const;

/** The reason code of a refusal, for the log line (never the error's data). */
export function reasonOf(err: unknown): string {
  if (isIdentityError(err)) return err.refusal ?? err.code;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'internal';
}

export default async function oidcRoutes(app: FastifyInstance): Promise<void> {
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'pre-auth', 'identity'] },
  });
  const clearTx = oidcTransactionCookie('', 0);

  const failed = (request: FastifyRequest, reply: FastifyReply, connId: string, reason: string) => {
    request.log.warn({ sso: 'oidc', connection: connId.slice(0, 64), reason }, 'oidc sign-in failed');
    return reply.header('set-cookie', clearTx).redirect('/?oidc=failed', 302);
  };

  app.get(
    '/oidc/providers',
    meta('Identity providers to sign in with (display list)', 'getOidcProviders'),
    async () => {
      if (app.config.consoleOrigin === undefined) return { providers: [] };
      const connections = await app.sso.list();
      return {
        providers: connections
          .filter((c) => c.enabled)
          .map((c) => ({
            id: c.id,
            kind: c.kind,
            displayName: c.displayName,
            startUrl: app.sso.urls(c.id, c.kind).startUrl,
          })),
      };
    },
  );

  app.get<ConnParams>(
    '/oidc/start/:connId',
    meta('OIDC sign-in: 302 to the provider', 'getOidcStart'),
    async (request, reply) => {
      const { connId } = request.params;
      if (app.config.consoleOrigin === undefined) return reply.code(501).send(SSO_NOT_CONFIGURED);
      try {
        if (await startLimited(app, request)) return failed(request, reply, connId, 'rate-limited');
        const connection = await app.sso.enabled(connId, 'oidc');
        if (connection === null) return failed(request, reply, connId, 'unknown-connection');
        const provider = await app.sso.oidcProvider(connection);
        const { authorizationUrl, transaction } = await oidcStart(provider, {
          redirectUri: app.sso.urls(connection.id, 'oidc').redirectUri!,
        });
        const value = encodeOidcTransaction(app.sso.transactionKey, transaction);
        return reply
          .header('set-cookie', oidcTransactionCookie(value, OIDC_TRANSACTION_TTL_MS / 1000))
          .header('cache-control', 'no-store')
          .redirect(authorizationUrl, 302);
      } catch (err) {
        return failed(request, reply, connId, reasonOf(err));
      }
    },
  );

  app.get<ConnParams>(
    '/oidc/callback/:connId',
    meta('OIDC sign-in: the provider returns here', 'getOidcCallback'),
    async (request, reply) => {
      const { connId } = request.params;
      const consoleOrigin = app.config.consoleOrigin;
      if (consoleOrigin === undefined) return reply.code(501).send(SSO_NOT_CONFIGURED);
      try {
        const transaction = decodeOidcTransaction(
          app.sso.transactionKey,
          readCookie(request.headers.cookie, OIDC_TRANSACTION_COOKIE).value,
        );
        if (transaction.connectionId !== connId) return failed(request, reply, connId, 'connection-mismatch');
        const connection = await app.sso.enabled(connId, 'oidc');
        if (connection === null) return failed(request, reply, connId, 'unknown-connection');
        const provider = await app.sso.oidcProvider(connection);
        const identity = await oidcCallback(provider, transaction, `${consoleOrigin}${request.url}`);
        return await completeSignIn(app, request, reply, connection, identity, [clearTx]);
      } catch (err) {
        return failed(request, reply, connId, reasonOf(err));
      }
    },
  );
}
