/**
 * The report kinds (docs/reports.md "Kinds") and the data type of each: one closed list, so the
 * route's 404 names exactly what exists and the PDF renderer handles every kind.
 */
import type { AuditAttestationData } from './audit.ts';
import type { CoverageData } from './coverage.ts';
import type { DrillsData } from './drills.ts';
import type { ReportBody } from './envelope.ts';

export const REPORT_KINDS = ['backup-coverage', 'restore-drills', 'audit-attestation'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];

export interface ReportDataByKind {
  'backup-coverage': CoverageData;
  'restore-drills': DrillsData;
  'audit-attestation': AuditAttestationData;
}

/** A report body whose `data` type follows its `kind`. */
export type KnownReport = {
  [K in ReportKind]: Omit<ReportBody<ReportDataByKind[K]>, 'kind'> & { kind: K };
}[ReportKind];

export function isReportKind(kind: string): kind is ReportKind {
  return (REPORT_KINDS as readonly string[]).includes(kind);
}
