/**
 * Signed reports (specification "Jobs and runs", `GET /admin/reports/<kind>`; docs/reports.md):
 * builders of each kind's data from the state store, the drill evidence and the audit chain; the
 * signed envelope (canonical JSON + detached hybrid signature by the engine's signer under
 * `coffer/report/v1`); and the PDF rendering, which carries no checkable signature.
 *
 * This room reads; it never writes the state store, the audit chain or a bucket. Reports hold ids,
 * names, states, counts, times, hashes and fingerprints, never a secret, a source path, a
 * connection endpoint or a record's bytes.
 */
import type { AuditLog } from '@coffer/audit';
import { fingerprint } from '@coffer/crypto';
import type { DrillEvidence } from '@coffer/restore';
import type { State } from '@coffer/state';
import { ENGINE_VERSION } from '../version.ts';
import { auditAttestation } from './audit.ts';
import { backupCoverage } from './coverage.ts';
import { restoreDrills } from './drills.ts';
import type { Signer } from './envelope.ts';
import type { KnownReport, ReportKind } from './kinds.ts';
import type { ReportPeriod } from './period.ts';

export type { AuditAttestationData } from './audit.ts';
export type { CoverageData, CoverageJob, CoverageVerdict } from './coverage.ts';
export type { DrillJob, DrillsData } from './drills.ts';
export {
  REPORT_CONTEXT,
  REPORT_VERSION,
  type ReportBody,
  type SignedReport,
  type Signer,
  signReport,
  verificationRecipe,
} from './envelope.ts';
export { isReportKind, type KnownReport, REPORT_KINDS, type ReportKind } from './kinds.ts';
export { noSignatureLine, REPORT_TITLES, renderReportPdf } from './pdf.ts';
export {
  DEFAULT_PERIOD_DAYS,
  MAX_PERIOD_DAYS,
  parsePeriod,
  type ReportPeriod,
  ReportPeriodError,
} from './period.ts';

/** What the builders read. */
export interface ReportSources {
  state: State;
  drills: { evidence(): Promise<DrillEvidence[]> };
  audit: Pick<AuditLog, 'verify' | 'head'>;
  signer: Signer;
  now: () => Date;
}

/**
 * Builds the (unsigned) body of one report. Throws what the state store or the audit log throw
 * (the route answers 502).
 */
export async function buildReport(
  kind: ReportKind,
  period: ReportPeriod,
  s: ReportSources,
): Promise<KnownReport> {
  const head = {
    v: 1 as const,
    generatedAt: s.now().toISOString(),
    engineVersion: ENGINE_VERSION,
    period,
    signerFingerprint: fingerprint(s.signer.publicKey),
  };
  switch (kind) {
    case 'backup-coverage':
      return { ...head, kind, data: await backupCoverage(s.state, period) };
    case 'restore-drills':
      return { ...head, kind, data: await restoreDrills(s.state, await s.drills.evidence(), period) };
    case 'audit-attestation':
      return { ...head, kind, data: await auditAttestation(s.audit) };
  }
}
