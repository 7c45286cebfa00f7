/**
 * Identity-provider connection routes (specification: `GET /admin/idp/presets` and
 * `/admin/idp/connections`, `keys.ceremony`, owner only; the writes are "not shown" and designed
 * in docs/identity.md "Identity-provider connections"):
 *
 * - `GET /admin/idp/presets`: the provider presets (sso/presets.ts).
 * - `GET /admin/idp/connections`: every connection in its read shape; the OIDC client secret only
 *   as `clientSecretSet`, SAML signing certificates only as SHA-256 fingerprints.
 * - `POST /admin/idp/connections` (create, 201), `/connections/update` (omitted fields kept;
 *   `oidc.clientSecret` omitted keeps, a string replaces, null clears; optional `ifMatchRev`),
 *   `/connections/delete`, `/connections/test` (discovery or metadata read, uncached).
 *
 * Every route needs `keys.ceremony` (owner); writes need a fresh step-up and the caller rate limit.
 * Writes are audited `idp-connection-change` with the changed field names only (never a secret,
 * a certificate or metadata); a refusal for lack of the capability is audited by the gate hook.
 * Deleting a connection does not remove the role grants its mapping made: the subjects can no
 * longer sign in through it, and an owner removes grants on the People screen.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConnectionInputError, changedFields, type StoredConnection } from '../../sso/connections.ts';
import { IDP_PRESETS } from '../../sso/presets.ts';

type Body = Record<string, unknown>;

export default async function idpRoutes(app: FastifyInstance): Promise<void> {
  const read = {
    onRequest: app.requireCapability('keys.ceremony'),
    config: { capability: 'keys.ceremony' as const },
  };
  const write = {
    onRequest: [app.requireCapability('keys.ceremony'), app.requireStepUp, app.rateLimitCaller],
    config: {
      capability: 'keys.ceremony' as const,
      audit: { action: 'idp-connection-change' as const, targetField: 'id' },
    },
  };
  const meta = (summary: string, operationId: string) => ({
    schema: { summary, operationId, tags: ['admin', 'identity'] },
  });
  const actor = (request: FastifyRequest) =>
    request.caller?.subject ?? request.caller?.email ?? 'admin-token';

  const refused = async (
    request: FastifyRequest,
    reply: FastifyReply,
    op: string,
    err: unknown,
  ): Promise<FastifyReply> => {
    if (!(err instanceof ConnectionInputError)) throw err;
    const body = (request.body ?? {}) as Body;
    await app.audit.forRequest(request, {
      action: 'idp-connection-change',
      outcome: 'refused',
      target: typeof body.id === 'string' ? body.id.slice(0, 64) : null,
      detail: { op, reason: 'invalid', field: err.field },
    });
    return reply.code(400).send({ error: err.message, field: err.field });
  };

  const applied = (
    request: FastifyRequest,
    op: string,
    before: StoredConnection | null,
    after: StoredConnection,
  ) =>
    app.audit.forRequest(request, {
      action: 'idp-connection-change',
      outcome: 'applied',
      target: after.id,
      detail: { op, kind: after.kind, enabled: after.enabled, changedFields: changedFields(before, after) },
    });

  app.get('/idp/presets', { ...read, ...meta('Identity-provider presets', 'getIdpPresets') }, async () => ({
    presets: IDP_PRESETS,
  }));

  app.get(
    '/idp/connections',
    { ...read, ...meta('Identity-provider connections (secrets never shown)', 'getIdpConnections') },
    async () => ({ connections: (await app.sso.list()).map((c) => app.sso.view(c)) }),
  );

  app.post<{ Body: Body }>(
    '/idp/connections',
    { ...write, ...meta('Add an identity-provider connection', 'postIdpConnection') },
    async (request, reply) => {
      const body = (request.body ?? {}) as Body;
      try {
        const result = await app.sso.create(body, actor(request));
        if ('exists' in result)
          return reply
            .code(409)
            .send({ error: 'a connection with this id exists; update it instead', id: body.id });
        await applied(request, 'create', null, result.connection);
        return reply.code(201).send({ connection: app.sso.view(result.connection) });
      } catch (err) {
        return refused(request, reply, 'create', err);
      }
    },
  );

  app.post<{ Body: Body }>(
    '/idp/connections/update',
    {
      ...write,
      ...meta(
        'Change an identity-provider connection (an omitted secret is kept)',
        'postIdpConnectionUpdate',
      ),
    },
    async (request, reply) => {
      const body = (request.body ?? {}) as Body;
      try {
        const result = await app.sso.update(body, actor(request));
        if (result === null) return reply.code(404).send({ error: 'no such connection' });
        if ('conflict' in result)
          return reply
            .code(409)
            .send({ error: 'the connection changed; reload and retry', rev: result.conflict });
        await applied(request, 'update', result.before, result.connection);
        return { connection: app.sso.view(result.connection) };
      } catch (err) {
        return refused(request, reply, 'update', err);
      }
    },
  );

  app.post<{ Body: Body }>(
    '/idp/connections/delete',
    { ...write, ...meta('Delete an identity-provider connection', 'postIdpConnectionDelete') },
    async (request, reply) => {
      const id = typeof request.body?.id === 'string' ? request.body.id : '';
      if (id === '') return reply.code(400).send({ error: 'id is required', field: 'id' });
      const deleted = await app.sso.delete(id);
      if (deleted !== null)
        await app.audit.forRequest(request, {
          action: 'idp-connection-change',
          outcome: 'applied',
          target: id,
          detail: { op: 'delete', kind: deleted.kind, changedFields: [] },
        });
      return { ok: true, deleted: deleted !== null };
    },
  );

  app.post<{ Body: Body }>(
    '/idp/connections/test',
    {
      onRequest: [app.requireCapability('keys.ceremony'), app.rateLimitCaller],
      config: { capability: 'keys.ceremony' as const },
      ...meta('Reach an identity provider: OIDC discovery or a SAML metadata read', 'postIdpConnectionTest'),
    },
    async (request, reply) => {
      const id = typeof request.body?.id === 'string' ? request.body.id : '';
      const connection = await app.sso.get(id);
      if (connection === null) return reply.code(404).send({ error: 'no such connection' });
      return app.sso.test(connection);
    },
  );
}
