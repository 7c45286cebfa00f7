/**
 * The admin audit routes (specification "Status, setup, support and policy"; docs/audit.md §6),
 * all gated on `audit.read`:
 *
 * - `GET /admin/audit`: newest first, paged by `beforeSeq`, filtered by `action`, `actor`,
 *   `since` / `until`, with the chain head (`engine-audit-list`). A bad filter is 400 naming the
 *   parameter.
 * - `GET /admin/audit/export?format=json|csv` (default json): the whole retained chain oldest
 *   first, streamed; the head is in the JSON document and in `x-audit-head-seq` /
 *   `x-audit-head-hash` for both formats.
 * - `GET /admin/audit/verify`: recomputes the chain; a break is a 200 result naming the first bad
 *   seq (`ok: false, firstBadSeq, problem`), and raises the `audit-chain-break` notification event
 *   (src/events.ts) each time it finds one.
 *
 * A failing audit read is the admin family's 502 `{ error: 'state unavailable' }` (fail closed).
 */
import { Readable } from 'node:stream';
import { isAuditError } from '@coffer/audit';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendBadRequest, sendStateUnavailable } from '../../plugins/replies.ts';

function queryOf(url: string): URLSearchParams {
  const q = url.indexOf('?');
  return new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
}

/** Maps @coffer/audit errors: bad query 400 (message names the parameter), store 502. */
function auditFailure(reply: FastifyReply, err: unknown, log: FastifyInstance['log']): FastifyReply {
  if (isAuditError(err) && (err.code === 'ERR_AUDIT_BAD_QUERY' || err.code === 'ERR_AUDIT_BAD_AFTER_SEQ')) {
    return sendBadRequest(reply, err.message);
  }
  log.error({ audit: 'read-failed', code: (err as { code?: string }).code }, 'audit read failed');
  return sendStateUnavailable(reply);
}

export default async function auditRoutes(app: FastifyInstance): Promise<void> {
  const gate = app.requireCapability('audit.read');
  const tags = ['admin', 'audit'];

  app.get(
    '/audit',
    {
      onRequest: gate,
      config: { capability: 'audit.read' },
      schema: {
        summary: 'Audit events, newest first, filtered and paged, with the chain head',
        operationId: 'listAudit',
        tags,
      },
    },
    async (request, reply) => {
      try {
        return await app.audit.log.list(queryOf(request.url));
      } catch (err) {
        return auditFailure(reply, err, request.log);
      }
    },
  );

  app.get(
    '/audit/export',
    {
      onRequest: gate,
      config: { capability: 'audit.read' },
      schema: {
        summary: 'Export the audit chain as JSON or CSV with the head hash',
        operationId: 'exportAudit',
        tags,
      },
    },
    async (request, reply) => {
      const format = queryOf(request.url).get('format') ?? 'json';
      if (format !== 'json' && format !== 'csv') return sendBadRequest(reply, 'format must be json or csv');
      let stream: Awaited<ReturnType<typeof app.audit.log.openExport>>;
      try {
        stream = await app.audit.log.openExport(format);
      } catch (err) {
        return auditFailure(reply, err, request.log);
      }
      for (const [name, value] of Object.entries(stream.headers)) reply.header(name, value);
      return reply
        .header('content-disposition', `attachment; filename="coffer-audit-${stream.head.seq}.${format}"`)
        .type(stream.contentType)
        .send(Readable.from(stream.chunks));
    },
  );

  app.get(
    '/audit/verify',
    {
      onRequest: gate,
      config: { capability: 'audit.read' },
      schema: {
        summary: 'Recompute the audit chain (a break is a 200 result)',
        operationId: 'verifyAudit',
        tags,
      },
    },
    async (request, reply) => {
      try {
        const result = await app.audit.log.verify();
        if (result.ok === false)
          app.events.raise({
            name: 'audit-chain-break',
            jobId: null,
            detail: {
              firstBadSeq: result.firstBadSeq,
              problem: String(result.problem),
              anchored: result.anchored,
            },
          });
        return result;
      } catch (err) {
        return auditFailure(reply, err, request.log);
      }
    },
  );
}
