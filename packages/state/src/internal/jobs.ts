/**
 * Jobs with `configRev` and the specification's `ifMatchRev` precondition (see the table on
 * JobsRepository in api.ts). Each upsert/delete is one write transaction holding the job's lock,
 * so the check and the write cannot be separated by another writer on either backend.
 */
import type {
  IfMatchRev,
  JobConfig,
  JobDeleteResult,
  JobPrecondition,
  JobRecord,
  JobsRepository,
  JobTombstone,
  JobWriteResult,
  PreconditionReason,
} from '../api.ts';
import { StateError } from '../errors.ts';
import { CallerError, type Db, type Tx } from './db.ts';
import { changedFieldNames, checkId, isPlainObject, parseStored, toStored } from './json.ts';
import type { JobsTable } from './schema.ts';

/** Revision change-lists kept per job (enough to name changed fields for any realistic base). */
const REVISIONS_KEPT = 200;

const SENTENCES: Record<PreconditionReason, string> = {
  'base-moved': 'the job changed since you read it',
  'deleted-under-you': 'the job was deleted since you read it',
  'already-exists': 'a job with this id already exists',
  'resurrect-refused': 'this job id was deleted; write without ifMatchRev to bring it back deliberately',
  'already-deleted': 'the job is already deleted',
  'precondition-unreadable': 'the revision precondition could not be evaluated',
};

function refuse(p: JobPrecondition): never {
  // Built field by field so the object carries exactly the specification's keys, in its order.
  const precondition: JobPrecondition = {
    reason: p.reason,
    id: p.id,
    yourRev: p.yourRev,
    currentRev: p.currentRev,
    changedFields: p.changedFields,
    changedAt: p.changedAt,
  };
  throw new StateError('ERR_STATE_PRECONDITION', SENTENCES[p.reason], { precondition });
}

function validRev(v: IfMatchRev): boolean {
  return v === undefined || v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
}

function yourRevOf(v: IfMatchRev): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/**
 * Inside a write transaction: the job's row (or, when absent, its tombstone) and the refusal
 * fields every precondition answer shares. Refuses an unreadable `ifMatchRev` before anything else.
 */
async function readForPrecondition(trx: Tx, id: string, ifMatchRev: IfMatchRev) {
  const row = await trx.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirst();
  const tomb = row
    ? undefined
    : await trx.selectFrom('job_tombstones').selectAll().where('id', '=', id).executeTakeFirst();
  const base = {
    id,
    yourRev: yourRevOf(ifMatchRev),
    currentRev: row ? row.config_rev : null,
    changedFields: [] as string[],
    changedAt: row ? row.changed_at : (tomb?.deleted_at ?? null),
  };
  if (!validRev(ifMatchRev)) refuse({ ...base, reason: 'precondition-unreadable' });
  return { row, tomb, base };
}

function toJob(r: JobsTable): JobRecord {
  const config = parseStored<JobConfig>(r.config, 'job configuration');
  return {
    id: r.id,
    config,
    configRev: r.config_rev,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    changedAt: r.changed_at,
    lastChangedFields: parseStored<string[]>(r.last_changed_fields, 'job changed-field list'),
  };
}

/** Field names changed after revision `base` up to the current one (a union; names only). */
async function fieldsChangedSince(trx: Tx, id: string, base: number, current: number, config: unknown) {
  if (base >= current) return [];
  const rows = await trx
    .selectFrom('job_revisions')
    .select(['rev', 'changed_fields'])
    .where('job_id', '=', id)
    .where('rev', '>', base)
    .where('rev', '<=', current)
    .execute();
  const names = new Set<string>();
  for (const r of rows) for (const n of parseStored<string[]>(r.changed_fields, 'job revision')) names.add(n);
  // Change-lists older than REVISIONS_KEPT are gone: then every field may have changed.
  if (rows.length < current - base && isPlainObject(config))
    for (const n of Object.keys(config)) names.add(n);
  return [...names].sort();
}

async function recordRevision(trx: Tx, id: string, rev: number, fields: string[], at: string) {
  await trx
    .insertInto('job_revisions')
    .values({ job_id: id, rev, changed_fields: JSON.stringify(fields), changed_at: at })
    .onConflict((oc) =>
      oc.columns(['job_id', 'rev']).doUpdateSet({ changed_fields: JSON.stringify(fields), changed_at: at }),
    )
    .execute();
  await trx
    .deleteFrom('job_revisions')
    .where('job_id', '=', id)
    .where('rev', '<=', rev - REVISIONS_KEPT)
    .execute();
}

function checkJob(job: unknown): JobConfig {
  if (!isPlainObject(job)) throw new StateError('ERR_STATE_INVALID', 'a job must be a JSON object');
  checkId(job.id, 'job id');
  // `ifMatchRev` is request metadata, never configuration: stored, it would make every write
  // with a new revision look like a change and bump configRev.
  const { ifMatchRev: _ignored, ...config } = job;
  return config as JobConfig;
}

export function jobsRepository(db: Db): JobsRepository {
  return {
    async get(id) {
      const row = await db.read('reading a job', (k) =>
        k.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? toJob(row) : null;
    },

    async list() {
      const rows = await db.read('listing jobs', (k) =>
        k.selectFrom('jobs').selectAll().orderBy('id').execute(),
      );
      return rows.map(toJob);
    },

    async getTombstone(id): Promise<JobTombstone | null> {
      const row = await db.read('reading a job tombstone', (k) =>
        k.selectFrom('job_tombstones').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? { id: row.id, deletedRev: row.deleted_rev, deletedAt: row.deleted_at } : null;
    },

    async upsert(input, options = {}) {
      const job = checkJob(input);
      const id = job.id;
      const configText = toStored(job, 'the job configuration');
      const ifMatchRev = options.ifMatchRev;
      const guard = (stored: JobConfig | null | 'unreadable') => {
        if (!options.guard) return;
        try {
          options.guard(stored);
        } catch (e) {
          throw new CallerError(e);
        }
      };
      return db.write(
        'writing a job',
        async (trx): Promise<JobWriteResult> => {
          const now = db.nowIso();
          const { row, tomb, base } = await readForPrecondition(trx, id, ifMatchRev);

          if (row) {
            let stored: JobConfig | undefined;
            try {
              stored = parseStored<JobConfig>(row.config, 'job configuration');
            } catch (e) {
              // A check against an unreadable record fails closed; a write with no check replaces it.
              if (ifMatchRev !== undefined) refuse({ ...base, reason: 'precondition-unreadable' });
              if (!(e instanceof StateError)) throw e;
            }
            if (ifMatchRev === null) refuse({ ...base, reason: 'already-exists' });
            if (typeof ifMatchRev === 'number' && ifMatchRev !== row.config_rev) {
              const changedFields = await fieldsChangedSince(trx, id, ifMatchRev, row.config_rev, stored);
              refuse({ ...base, reason: 'base-moved', changedFields });
            }
            guard(stored ?? 'unreadable');
            const changed = stored ? changedFieldNames(stored, job) : Object.keys(job).sort();
            if (changed.length === 0) {
              await trx.updateTable('jobs').set({ updated_at: now }).where('id', '=', id).execute();
              return {
                job: toJob({ ...row, updated_at: now }),
                outcome: 'unchanged',
                changedFields: [],
                previousRev: row.config_rev,
              };
            }
            const rev = row.config_rev + 1;
            const next: JobsTable = {
              ...row,
              config: configText,
              config_rev: rev,
              updated_at: now,
              changed_at: now,
              last_changed_fields: JSON.stringify(changed),
            };
            await trx.updateTable('jobs').set(next).where('id', '=', id).execute();
            await recordRevision(trx, id, rev, changed, now);
            return {
              job: toJob(next),
              outcome: 'updated',
              changedFields: changed,
              previousRev: row.config_rev,
            };
          }

          if (tomb) {
            if (ifMatchRev === null) refuse({ ...base, reason: 'resurrect-refused' });
            if (typeof ifMatchRev === 'number') refuse({ ...base, reason: 'deleted-under-you' });
          } else if (typeof ifMatchRev === 'number') {
            refuse({ ...base, reason: 'deleted-under-you' });
          }
          guard(null);
          const rev = tomb ? tomb.deleted_rev + 1 : 1;
          const fields = Object.keys(job).sort();
          const next: JobsTable = {
            id,
            config: configText,
            config_rev: rev,
            created_at: now,
            updated_at: now,
            changed_at: now,
            last_changed_fields: JSON.stringify(fields),
          };
          await trx.insertInto('jobs').values(next).execute();
          if (tomb) await trx.deleteFrom('job_tombstones').where('id', '=', id).execute();
          await recordRevision(trx, id, rev, fields, now);
          return {
            job: toJob(next),
            outcome: tomb ? 'recreated' : 'created',
            changedFields: fields,
            previousRev: tomb ? tomb.deleted_rev : null,
          };
        },
        [`job:${id}`],
      );
    },

    async delete(idArg, options = {}) {
      const id = checkId(idArg, 'job id');
      const ifMatchRev = options.ifMatchRev;
      return db.write(
        'deleting a job',
        async (trx): Promise<JobDeleteResult> => {
          const now = db.nowIso();
          const { row, base } = await readForPrecondition(trx, id, ifMatchRev);
          if (!row) refuse({ ...base, reason: 'already-deleted' });
          if (ifMatchRev === null) refuse({ ...base, reason: 'already-exists' });
          if (typeof ifMatchRev === 'number' && ifMatchRev !== row.config_rev) {
            let stored: unknown;
            try {
              stored = JSON.parse(row.config);
            } catch {
              stored = undefined;
            }
            const changedFields = await fieldsChangedSince(trx, id, ifMatchRev, row.config_rev, stored);
            refuse({ ...base, reason: 'base-moved', changedFields });
          }
          await trx.deleteFrom('jobs').where('id', '=', id).execute();
          await trx.deleteFrom('job_revisions').where('job_id', '=', id).execute();
          // The history ring and its counters go with the job; archives are never touched here.
          await trx.deleteFrom('runs').where('job_id', '=', id).execute();
          await trx.deleteFrom('run_rings').where('job_id', '=', id).execute();
          await trx.deleteFrom('checkpoints').where('job_id', '=', id).execute();
          await trx
            .insertInto('job_tombstones')
            .values({ id, deleted_rev: row.config_rev, deleted_at: now })
            .onConflict((oc) => oc.column('id').doUpdateSet({ deleted_rev: row.config_rev, deleted_at: now }))
            .execute();
          return { id, deletedRev: row.config_rev, deletedAt: now };
        },
        [`job:${id}`],
      );
    },

    async restore(input, configRev) {
      const job = checkJob(input);
      const id = job.id;
      if (!Number.isSafeInteger(configRev) || configRev < 1)
        throw new StateError('ERR_STATE_INVALID', 'a restored revision must be a positive integer');
      const configText = toStored(job, 'the job configuration');
      return db.write(
        'restoring a job',
        async (trx): Promise<JobRecord> => {
          const now = db.nowIso();
          const live = await trx.selectFrom('jobs').select('id').where('id', '=', id).executeTakeFirst();
          if (live) throw new StateError('ERR_STATE_CONFLICT', 'restoring a job: the id is live');
          const fields = Object.keys(job).sort();
          const next: JobsTable = {
            id,
            config: configText,
            config_rev: configRev,
            created_at: now,
            updated_at: now,
            changed_at: now,
            last_changed_fields: JSON.stringify(fields),
          };
          await trx.insertInto('jobs').values(next).execute();
          await trx.deleteFrom('job_tombstones').where('id', '=', id).execute();
          await recordRevision(trx, id, configRev, fields, now);
          return toJob(next);
        },
        [`job:${id}`],
      );
    },
  };
}
