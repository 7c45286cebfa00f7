/**
 * The apply step of configuration writes (docs/config-control.md "Apply"): the one place a job
 * upsert or delete reaches the state store, whether it comes straight from `POST /admin/jobs` (no
 * approval policy) or from an approved pending change, plus the proposal-time probe that checks
 * `ifMatchRev` (and the cadence capability) without writing.
 *
 * - `applyJobUpsert`: the store's upsert with the caller's `ifMatchRev` and, for a caller without
 *   `scheduledtest.config`, a guard inside the write's transaction that refuses a change of the
 *   restore-test cadence (the specification's "re-checked in the state object").
 * - `probeJobUpsert`: the same call whose guard aborts the write once the precondition and the
 *   cadence check passed: the exact refusal the write would get, and nothing written.
 * - `probeJobDelete`: the delete table of @coffer/state evaluated on a read.
 * Every applied write appends a configuration version (history.ts).
 */
import { type Caller, can } from '@coffer/authz';
import { canonicalJson } from '@coffer/crypto';
import {
  type IfMatchRev,
  isStateError,
  type JobDeleteResult,
  type JobPrecondition,
  type JobWriteResult,
  type State,
} from '@coffer/state';
import type { JobConfig } from '../jobs/index.ts';

export type UpsertOutcome =
  | { ok: true; result: JobWriteResult }
  | { ok: false; status: 403; required: 'scheduledtest.config' }
  | { ok: false; status: 409; precondition: JobPrecondition };

export type ProbeOutcome =
  | { ok: true; baseRev: number | null; changedFields: string[] }
  | { ok: false; status: 403; required: 'scheduledtest.config' }
  | { ok: false; status: 409; precondition: JobPrecondition };

const cadenceOf = (config: Record<string, unknown> | undefined): number | null =>
  (config?.restoreTestCadenceSeconds as number | null | undefined) ?? null;

/** Thrown by the cadence guard inside the write's transaction; answered 403. */
class CadenceRefused extends Error {}
/** Thrown by the probe's guard once every check passed: nothing is written. */
class Probed extends Error {
  readonly stored: Record<string, unknown> | null | 'unreadable';
  constructor(stored: Record<string, unknown> | null | 'unreadable') {
    super('probe');
    this.stored = stored;
  }
}

function cadenceGuard(authz: Caller, job: JobConfig) {
  if (can(authz, 'scheduledtest.config')) return undefined;
  return (stored: Record<string, unknown> | null | 'unreadable') => {
    // An unreadable record's cadence is unknown: only a caller who may change it replaces it.
    if (stored === 'unreadable' || cadenceOf(stored ?? undefined) !== job.restoreTestCadenceSeconds)
      throw new CadenceRefused();
  };
}

/** Top-level field names whose values differ (never the values). */
export function fieldsChanged(
  before: Record<string, unknown> | null,
  after: Record<string, unknown>,
): string[] {
  if (before === null) return Object.keys(after).sort();
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].filter((k) => canonicalJson(before[k] ?? null) !== canonicalJson(after[k] ?? null)).sort();
}

/** One upsert as `authz` (the writer at the commit point). Throws for a store fault. */
export async function applyJobUpsert(
  state: State,
  authz: Caller,
  job: JobConfig,
  ifMatchRev: IfMatchRev,
): Promise<UpsertOutcome> {
  const guard = cadenceGuard(authz, job);
  try {
    const result = await state.jobs.upsert(job, { ifMatchRev, ...(guard ? { guard } : {}) });
    return { ok: true, result };
  } catch (err) {
    if (err instanceof CadenceRefused) return { ok: false, status: 403, required: 'scheduledtest.config' };
    if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition)
      return { ok: false, status: 409, precondition: err.precondition };
    throw err;
  }
}

/** The proposal-time check of an upsert: what the write would be refused for, with nothing written. */
export async function probeJobUpsert(
  state: State,
  authz: Caller,
  job: JobConfig,
  ifMatchRev: IfMatchRev,
): Promise<ProbeOutcome> {
  const cadence = cadenceGuard(authz, job);
  try {
    await state.jobs.upsert(job, {
      ifMatchRev,
      guard: (stored) => {
        cadence?.(stored);
        throw new Probed(stored);
      },
    });
  } catch (err) {
    if (err instanceof Probed) {
      const live = await state.jobs.get(job.id);
      const before = err.stored === 'unreadable' ? null : err.stored;
      return {
        ok: true,
        baseRev: live?.configRev ?? null,
        changedFields: fieldsChanged(before, job as unknown as Record<string, unknown>),
      };
    }
    if (err instanceof CadenceRefused) return { ok: false, status: 403, required: 'scheduledtest.config' };
    if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition)
      return { ok: false, status: 409, precondition: err.precondition };
    throw err;
  }
  throw new Error('probe wrote nothing and did not report');
}

/** The proposal-time check of a delete (@coffer/state's delete table, on a read). */
export async function probeJobDelete(
  state: State,
  id: string,
  ifMatchRev: IfMatchRev,
): Promise<{ ok: true; baseRev: number } | { ok: false; status: 409; precondition: JobPrecondition }> {
  const live = await state.jobs.get(id);
  const yourRev = ifMatchRev ?? null;
  if (live === null) {
    const tomb = await state.jobs.getTombstone(id);
    return {
      ok: false,
      status: 409,
      precondition: {
        reason: 'already-deleted',
        id,
        yourRev,
        currentRev: null,
        changedFields: [],
        changedAt: tomb?.deletedAt ?? null,
      },
    };
  }
  const base = { id, yourRev, currentRev: live.configRev, changedAt: live.changedAt };
  if (ifMatchRev === null)
    return { ok: false, status: 409, precondition: { ...base, reason: 'already-exists', changedFields: [] } };
  if (ifMatchRev !== undefined && ifMatchRev !== live.configRev) {
    // The store names the fields changed since the caller's revision: ask it through a probe.
    let changedFields: string[] = [];
    try {
      await state.jobs.upsert(live.config, {
        ifMatchRev,
        guard: () => {
          throw new Probed(null);
        },
      });
    } catch (err) {
      if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition)
        changedFields = [...err.precondition.changedFields];
      else if (!(err instanceof Probed)) throw err;
    }
    return { ok: false, status: 409, precondition: { ...base, reason: 'base-moved', changedFields } };
  }
  return { ok: true, baseRev: live.configRev };
}

/** One delete; a refusal is returned, a store fault thrown. */
export async function applyJobDelete(
  state: State,
  id: string,
  ifMatchRev: IfMatchRev,
): Promise<
  { ok: true; result: JobDeleteResult } | { ok: false; status: 409; precondition: JobPrecondition }
> {
  try {
    return { ok: true, result: await state.jobs.delete(id, { ifMatchRev }) };
  } catch (err) {
    if (isStateError(err, 'ERR_STATE_PRECONDITION') && err.precondition)
      return { ok: false, status: 409, precondition: err.precondition };
    throw err;
  }
}
