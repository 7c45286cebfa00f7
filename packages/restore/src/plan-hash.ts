/**
 * The plan hash (docs/restore.md "Plan hash" is normative): SHA-384 over the RFC 8785 canonical
 * JSON of the plan document, written `sha384:<96 hex>`. The document holds everything that decides
 * what an apply writes and nothing else: no time (so a dry run repeated an hour later hashes the
 * same and an approval stays bound to it), no token-like field (`cfConfig.token`,
 * `mediaRestore.token`, `planHash` itself), no sample or warnings (advisory output).
 */
import { canonicalJsonBytes, sha384Digest } from '@coffer/crypto';

export interface PlanDocument {
  kind: 'coffer-restore-plan';
  v: 1;
  job: string;
  runId: string;
  /** SHA-384 of the run's signed manifest.json bytes: binds the exact archive. */
  manifest: string;
  destinationId: string;
  /** The resolved target's identity (type, binding and where; never credentials). */
  target: Record<string, string | number>;
  /** The selectors that decided the record list, after resolution (see docs/restore.md). */
  selectors: {
    include?: string[];
    exclude?: string[];
    recordName?: string;
    maxRecords?: number;
  };
  /** `d1Tables`, with table names as archived (sorted). */
  tables?: { database: string; tables: string[]; createOnly: boolean };
  /** Present only for `skip` (`overwrite`, the default, hashes as absent). */
  onExisting?: 'skip';
  /** Every record an apply writes, in archive order: [name, plaintext sha384, size]. */
  records: Array<[string, string, number]>;
}

/** `sha384:<hex>` of the canonical plan document. */
export function planHashOf(doc: PlanDocument): string {
  return sha384Digest(canonicalJsonBytes(doc));
}

/** Sorted, de-duplicated copy (order and repeats of prefix selectors do not change the plan). */
export function normaliseSelectors(list: string[]): string[] {
  return [...new Set(list)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}
