/**
 * The `audit-attestation` report's data (docs/reports.md "audit-attestation"): the audit chain's
 * head (seq and hash), the earliest retained seq, and a full recomputation of the retained chain
 * by @coffer/audit's verifier, exactly what `GET /admin/audit/verify` runs. A break is reported in
 * the signed report (`verification.ok: false`, the first bad seq and the problem), never hidden;
 * the route also raises the `audit-chain-break` notification event for it.
 *
 * The chain is verified whole whatever the period: a chain is only as good as its oldest retained
 * link. The period is recorded in the envelope for the reader's frame of reference.
 *
 * Security: seqs, hashes, counts and the verifier's one-sentence message (it names seqs and the
 * problem, never event content).
 */
import type { AuditLog } from '@coffer/audit';

export interface AuditAttestationData {
  head: { seq: number; hash: string };
  /** The earliest retained seq that was checked, or null for an empty chain or a break. */
  earliestSeq: number | null;
  /** True when the retained chain starts at genesis (seq 1); false when older events were pruned. */
  anchored: boolean;
  verification:
    | { ok: true; eventsChecked: number; firstSeq: number | null; headSeq: number; headHash: string }
    | {
        ok: false;
        eventsChecked: number;
        firstBadSeq: number;
        problem: string;
        message: string;
        lastGood: { seq: number; hash: string } | null;
      };
}

/** Recomputes the chain. Throws `ERR_AUDIT_STORE` (the route answers 502). */
export async function auditAttestation(
  log: Pick<AuditLog, 'verify' | 'head'>,
): Promise<AuditAttestationData> {
  const result = await log.verify();
  if (result.ok) {
    return {
      head: { seq: result.headSeq, hash: result.headHash },
      earliestSeq: result.firstSeq,
      anchored: result.anchored,
      verification: {
        ok: true,
        eventsChecked: result.count,
        firstSeq: result.firstSeq,
        headSeq: result.headSeq,
        headHash: result.headHash,
      },
    };
  }
  const head = await log.head();
  return {
    head: { seq: head.seq, hash: head.hash },
    earliestSeq: null,
    anchored: result.anchored,
    verification: {
      ok: false,
      eventsChecked: result.count,
      firstBadSeq: result.firstBadSeq,
      problem: result.problem,
      message: result.message,
      lastGood: result.lastGood ? { seq: result.lastGood.seq, hash: result.lastGood.hash } : null,
    },
  };
}
