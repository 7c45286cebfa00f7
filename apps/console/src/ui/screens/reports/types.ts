/** Shapes of the signed reports (docs/reports.md) the Reports screen shows. */

export const REPORT_KINDS = [
  { id: 'backup-coverage', title: 'Backup coverage' },
  { id: 'restore-drills', title: 'Restore drills' },
  { id: 'audit-attestation', title: 'Audit attestation' },
] as const;
export type ReportKind = (typeof REPORT_KINDS)[number]['id'];

/** The engine's reply: the signed canonical text and how to check it. */
export interface SignedReply {
  report: string;
  signature: string;
  signerPublicKey: string;
  signerFingerprint: string;
  verification: string;
}

export interface ReportHead {
  v: number;
  kind: ReportKind;
  generatedAt: string;
  engineVersion: string;
  period: { from: string; to: string };
  signerFingerprint: string;
}

export interface CoverageJob {
  job: string;
  name: string | null;
  enabled: boolean;
  sourceType: string;
  lastSuccess: { runId: string; startedAt: string; finishedAt: string | null; ageSeconds: number } | null;
  destinations: { id: string; state: string; reason: string | null; verifiedCopies: number }[];
  runsInPeriod: { total: number; ok: number; failed: number; other: number };
  verdict: 'covered' | 'stale' | 'never-run';
}
export interface CoverageData {
  evaluatedAt: string;
  jobs: CoverageJob[];
  summary: { jobs: number; covered: number; stale: number; neverRun: number };
}

export interface DrillLine {
  id: string;
  startedAt: string;
  verdict: string;
  durationMs: number;
}
export interface DrillJob {
  job: string;
  name: string | null;
  restoreTestCadenceSeconds: number | null;
  drillsInPeriod: { total: number; pass: number; fail: number; error: number };
  lastDrill: DrillLine | null;
  lastPass: DrillLine | null;
  measuredRestoreSeconds: number | null;
  rto: { status: string; seconds?: number | null };
}
export interface DrillsData {
  evaluatedAt: string;
  jobs: DrillJob[];
  fleetRto: { status: string; seconds: number | null; jobsUnknown: string[] };
  summary: { jobs: number; drilledInPeriod: number; lastDrillPassing: number; neverDrilled: number };
}

export interface AttestationData {
  head: { seq: number; hash: string } | null;
  earliestSeq: number | null;
  anchored: boolean;
  verification:
    | {
        ok: true;
        eventsChecked: number;
        firstSeq: number | null;
        headSeq: number | null;
        headHash: string | null;
      }
    | { ok: false; eventsChecked: number; firstBadSeq: number; problem: string; message: string };
}

export type ReportBody =
  | (ReportHead & { kind: 'backup-coverage'; data: CoverageData })
  | (ReportHead & { kind: 'restore-drills'; data: DrillsData })
  | (ReportHead & { kind: 'audit-attestation'; data: AttestationData });

/** A fetched report: the exact reply bytes (what is saved), the reply and the parsed body. */
export interface Fetched {
  kind: ReportKind;
  bytes: ArrayBuffer;
  reply: SignedReply;
  body: ReportBody;
  query: string;
}
