/**
 * The restore verify route: phase one of an apply on its own. Reads every record in the request's
 * scope from the store and checks each shard's digest and tag and each record's plaintext SHA-384;
 * writes nothing and asks the target nothing.
 */
import { computePlan } from './plan.ts';
import type { PlanAdvisory, PlanOptions } from './types.ts';

export interface RestoreVerification {
  ok: boolean;
  runId: string;
  job: string | null;
  /** Records whose bytes verified. */
  recordsVerified: number;
  /** Records in scope. */
  records: number;
  bytes: number;
  planHash: string | null;
  /** Why an apply to the request's target would be refused (verify itself never writes). */
  advisories: PlanAdvisory[];
  reason?: string;
}

/**
 * Verifies every in-scope record. Returns `ok: false` with a reason (never throws) when a record,
 * the index or the manifest fails its checks, or the posture cannot read back. Throws the
 * request-class RestoreErrors of `planRestore`; like a dry run, it reports where an apply would
 * be refused in `advisories` instead.
 */
export async function verifyRestore(options: PlanOptions): Promise<RestoreVerification> {
  const { plan } = await computePlan(options, true, false, true);
  return {
    ok: plan.ok,
    runId: plan.runId,
    job: plan.job,
    recordsVerified: plan.recordsVerified,
    records: plan.plannedWrites,
    bytes: plan.bytes,
    planHash: plan.planHash,
    advisories: plan.advisories,
    ...(plan.reason === undefined ? {} : { reason: plan.reason }),
  };
}
