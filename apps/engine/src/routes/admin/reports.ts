/**
 * `GET /admin/reports/<kind>` (`reports.read`; specification "Jobs and runs", docs/reports.md):
 * a report of one documented kind over a period (`?from=&to=`, default the last 30 days), as
 * canonical JSON signed by the engine's signer with its verification recipe, or with
 * `?format=pdf` the same content as a PDF that carries no checkable signature.
 *
 * Replies: 200 the signed report (`{ report, signature, signerPublicKey, signerFingerprint,
 * verification }`) or the PDF (`application/pdf`, attachment); 400 `{ error }` naming a bad
 * `from`, `to` or `format`; 404 `{ error, kinds }` for an unknown kind (the known kinds listed);
 * 502 `{ error: 'state unavailable' }` when the state store or the audit log cannot be read (fail
 * closed: never a partial report). An audit-attestation that finds a chain break raises the
 * `audit-chain-break` notification event, as `GET /admin/audit/verify` does.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { sendBadRequest, sendStateUnavailable } from '../../plugins/replies.ts';
import {
  buildReport,
  isReportKind,
  type KnownReport,
  parsePeriod,
  REPORT_KINDS,
  ReportPeriodError,
  renderReportPdf,
  signReport,
} from '../../reports/index.ts';

const Query = Type.Object({
  from: Type.Optional(Type.String({ maxLength: 64 })),
  to: Type.Optional(Type.String({ maxLength: 64 })),
  format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('pdf')])),
});
const Params = Type.Object({ kind: Type.String({ maxLength: 64 }) });

export default async function reportRoutes(app: FastifyInstance): Promise<void> {
  app.get<{ Params: { kind: string }; Querystring: { from?: string; to?: string; format?: 'json' | 'pdf' } }>(
    '/reports/:kind',
    {
      onRequest: app.requireCapability('reports.read'),
      config: { capability: 'reports.read' },
      schema: {
        summary: 'A signed report (backup coverage, restore drills, audit attestation); ?format=pdf unsigned',
        operationId: 'getReport',
        tags: ['admin', 'reports'],
        params: Params,
        querystring: Query,
      },
    },
    async (request, reply) => {
      const { kind } = request.params;
      if (!isReportKind(kind))
        return reply.code(404).send({
          error: `unknown report kind; known kinds: ${REPORT_KINDS.join(', ')}`,
          kinds: REPORT_KINDS,
        });
      let period: ReturnType<typeof parsePeriod>;
      try {
        period = parsePeriod(request.query, new Date());
      } catch (err) {
        if (err instanceof ReportPeriodError) return sendBadRequest(reply, err.message);
        throw err;
      }
      let body: KnownReport;
      try {
        body = await buildReport(kind, period, {
          state: app.state,
          drills: app.drills,
          audit: app.audit.log,
          signer: app.keys.signer,
          now: () => new Date(),
        });
      } catch (err) {
        request.log.error(
          { report: kind, code: (err as { code?: unknown }).code },
          'report could not be built: state or audit log unreadable',
        );
        return sendStateUnavailable(reply);
      }
      if (body.kind === 'audit-attestation' && body.data.verification.ok === false) {
        const v = body.data.verification;
        app.events.raise({
          name: 'audit-chain-break',
          jobId: null,
          detail: { firstBadSeq: v.firstBadSeq, problem: v.problem, anchored: body.data.anchored },
        });
      }
      if (request.query.format === 'pdf') {
        const pdf = await renderReportPdf(body);
        const day = body.generatedAt.slice(0, 10);
        return reply
          .header('content-disposition', `attachment; filename="coffer-report-${kind}-${day}.pdf"`)
          .type('application/pdf')
          .send(Buffer.from(pdf));
      }
      return signReport(body, app.keys.signer);
    },
  );
}
