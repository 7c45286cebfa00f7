/**
 * The credentialed pull family (specification "Pull endpoints", "Pull credentials"; docs/pull-api.md):
 *
 *   GET /support/diagnostics                  scope diagnostics  -> the support bundle
 *   GET /support/audit-feed?afterSeq=&limit=  scope audit-feed   -> an audit feed page
 *   GET /metrics                              scope metrics      -> Prometheus text
 *
 * Each route authenticates with its own scope's grant only (a credential reaches only its one
 * read): `Authorization: Bearer <client_id>.<secret>`, checked in the specification's order
 * (support/grants.ts). Every failure is 401 JSON `{ error: 'unauthorised' }` (unlike the admin
 * family's text 401). A grant, bundle or audit read that fails is 503 `{ error: 'unavailable' }`
 * (fail closed). A success appends to the grant's pull trail best-effort, after the reply, never
 * delaying or failing it. The feed allows 120 pulls per 60 s per credential, then 429
 * problem+json with `Retry-After` (in-memory per engine process).
 *
 * Only GET: HEAD routes are not exposed, so any other method or sub-path falls to the plain 404.
 * Full hardening headers come from the conventions plugin; no CORS is registered here.
 */
import { AuditAfterSeqError, FEED_RATE_LIMIT, isAuditError } from '@coffer/audit';
import type { PullScope } from '@coffer/state';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { generateBundle } from '../../bundle/index.ts';
import { createEngineMetrics } from '../../metrics/index.ts';
import { sendRateLimited } from '../../plugins/replies.ts';
import { checkPresentation } from '../support/grants.ts';

declare module 'fastify' {
  interface FastifyRequest {
    pullClientId?: string;
  }
}

export function sendPullUnauthorised(reply: FastifyReply): FastifyReply {
  return reply.code(401).send({ error: 'unauthorised' });
}

export function sendPullUnavailable(reply: FastifyReply): FastifyReply {
  return reply.code(503).send({ error: 'unavailable' });
}

export default async function pullRoutes(app: FastifyInstance): Promise<void> {
  const ctx = app;
  const metrics = createEngineMetrics(ctx);

  const authFor = (scope: PullScope) => async (request: FastifyRequest, reply: FastifyReply) => {
    let result: Awaited<ReturnType<typeof checkPresentation>>;
    try {
      result = await checkPresentation(ctx.state, scope, request.headers.authorization);
    } catch (err) {
      request.log.error(
        { pull: 'grant-unreadable', scope, code: (err as { code?: string }).code },
        'grant read failed',
      );
      return sendPullUnavailable(reply);
    }
    if (!result.ok) {
      request.log.info({ pull: 'refused', scope, reason: result.reason }, 'pull credential refused');
      return sendPullUnauthorised(reply);
    }
    request.pullClientId = result.grant.clientId;
  };

  // Pull trail: recorded after a successful reply, best-effort.
  const trail = (scope: PullScope) => async (request: FastifyRequest, reply: FastifyReply) => {
    const clientId = request.pullClientId;
    if (!clientId || reply.statusCode !== 200) return;
    ctx.state.credentials.recordPull(scope, clientId).catch((err: { code?: string }) => {
      request.log.warn({ pull: 'trail-not-recorded', scope, code: err?.code }, 'pull trail not recorded');
    });
  };

  const feedLimit = app.createRateLimit({
    max: FEED_RATE_LIMIT.pulls,
    timeWindow: FEED_RATE_LIMIT.windowSeconds * 1000,
    keyGenerator: (request) => `pull:audit-feed:${request.pullClientId ?? request.ip}`,
    skipOnError: false,
  });
  const feedRateLimit = async (request: FastifyRequest, reply: FastifyReply) => {
    let result: Awaited<ReturnType<typeof feedLimit>>;
    try {
      result = await feedLimit(request);
    } catch {
      request.log.warn({ limiter: 'unavailable' }, 'feed limiter unavailable; failing open');
      return;
    }
    if (result.isAllowed || !result.isExceeded) return;
    const reset = Math.max(1, Math.ceil(result.ttl / 1000));
    reply.header('retry-after', String(reset));
    reply.header(
      'ratelimit-policy',
      `"audit-feed";q=${FEED_RATE_LIMIT.pulls};w=${FEED_RATE_LIMIT.windowSeconds}`,
    );
    reply.header('ratelimit', `"audit-feed";r=0;t=${reset}`);
    return sendRateLimited(reply);
  };

  const common = { exposeHeadRoute: false } as const;

  app.get(
    '/support/diagnostics',
    {
      ...common,
      onRequest: authFor('diagnostics'),
      onResponse: trail('diagnostics'),
      schema: {
        summary: 'Pull the support bundle (diagnostics credential)',
        operationId: 'pullDiagnostics',
        tags: ['pull'],
      },
    },
    async (request, reply) => {
      let body: string;
      try {
        const head = await app.audit.log.head();
        const { bundle, facts } = await generateBundle(ctx, head.seq);
        body = JSON.stringify(bundle);
        await app.audit.append({
          action: 'support-bundle-generate',
          // The client id is a non-secret label, but its dpc_ form is one the audit redaction guard
          // refuses on sight; the scope names the grant (one per scope) just as well.
          actor: { email: null, subject: 'pull:diagnostics', method: 'pull-credential' },
          role: null,
          sourceAddress: request.ip,
          outcome: 'applied',
          detail: { ...facts, via: 'pull' },
        });
      } catch (err) {
        request.log.error({ pull: 'bundle-failed', code: (err as { code?: string }).code }, 'bundle failed');
        return sendPullUnavailable(reply);
      }
      return reply.type('application/json').send(body);
    },
  );

  app.get(
    '/support/audit-feed',
    {
      ...common,
      onRequest: [authFor('audit-feed'), feedRateLimit],
      onResponse: trail('audit-feed'),
      schema: {
        summary: 'Pull an audit feed page (audit-feed credential)',
        operationId: 'pullAuditFeed',
        tags: ['pull'],
      },
    },
    async (request, reply) => {
      const q = request.url.indexOf('?');
      const params = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1));
      try {
        return await app.audit.log.feedPage(params);
      } catch (err) {
        if (
          err instanceof AuditAfterSeqError ||
          (isAuditError(err) && err.code === 'ERR_AUDIT_BAD_AFTER_SEQ')
        ) {
          return reply.code(400).send({ error: 'afterSeq must be a non-negative integer' });
        }
        request.log.error({ pull: 'feed-failed', code: (err as { code?: string }).code }, 'feed read failed');
        return sendPullUnavailable(reply);
      }
    },
  );

  app.get(
    '/metrics',
    {
      ...common,
      onRequest: authFor('metrics'),
      onResponse: trail('metrics'),
      schema: {
        summary: 'Prometheus scrape (metrics credential)',
        operationId: 'pullMetrics',
        tags: ['pull'],
      },
    },
    async (request, reply) => {
      try {
        const out = await metrics.render(async () => (await app.audit.log.head()).seq);
        return reply.type(out.contentType).send(out.text);
      } catch (err) {
        request.log.error(
          { pull: 'metrics-failed', code: (err as { code?: string }).code },
          'metrics read failed',
        );
        return sendPullUnavailable(reply);
      }
    },
  );
}
