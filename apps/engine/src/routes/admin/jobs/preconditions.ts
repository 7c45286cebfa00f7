/**
 * The optimistic precondition `ifMatchRev` as the jobs routes answer it (specification
 * "Optimistic precondition"). The decision itself is made by @coffer/state inside the write's
 * transaction (its JobsRepository documents the full table); this module reads the key by
 * presence and turns a refusal into the specification's 409 body: `error` (a sentence),
 * `refusal: 'precondition-failed'` and `precondition { reason, id, yourRev, currentRev,
 * changedFields, changedAt }`, where `changedFields` names fields, never values and `yourRev` is
 * present only when the caller sent `ifMatchRev`.
 */
import type { IfMatchRev, JobPrecondition, PreconditionReason } from '@coffer/state';

/** `ifMatchRev` by presence of the key: undefined (absent), null, or the sent number. */
export function ifMatchRevOf(body: object): IfMatchRev {
  if (!Object.hasOwn(body, 'ifMatchRev')) return undefined;
  return (body as { ifMatchRev: number | null }).ifMatchRev;
}

const SENTENCES: Record<PreconditionReason, string> = {
  'base-moved': 'the job changed since you read it; reload it and apply your change again',
  'deleted-under-you': 'the job was deleted after you read it (or never existed at that revision)',
  'already-exists': 'a job with this id already exists',
  'resurrect-refused': 'this job id was deleted; write it without ifMatchRev to bring it back on purpose',
  'already-deleted': 'the job does not exist (already deleted)',
  'precondition-unreadable': 'the precondition could not be checked; nothing was written',
};

/**
 * `yourRev` echoes what the caller sent, by presence like the request: the number, `null` when
 * null was sent, and no `yourRev` key at all when `ifMatchRev` was not sent, so "not sent" never
 * reads as "believed not to exist".
 */
export type RefusalPrecondition = Omit<JobPrecondition, 'yourRev'> & { yourRev?: number | null };

export interface RefusalBody {
  error: string;
  refusal: 'precondition-failed';
  precondition: RefusalPrecondition;
}

/** The 409 body for a refusal reported by the store; `sent` is the request's `ifMatchRev`. */
export function refusalBody(precondition: JobPrecondition, sent: IfMatchRev): RefusalBody {
  return {
    error: SENTENCES[precondition.reason],
    refusal: 'precondition-failed',
    precondition: {
      reason: precondition.reason,
      id: precondition.id,
      ...(sent === undefined ? {} : { yourRev: sent }),
      currentRev: precondition.currentRev,
      changedFields: [...precondition.changedFields],
      changedAt: precondition.changedAt,
    },
  };
}
