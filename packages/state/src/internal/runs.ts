/**
 * Run history rings and their counters, and sealed run checkpoints.
 *
 * Counting (the all-rings history answer):
 * 1. `runs.recorded` (global counter row) grows by one for every run started; its new value is the
 *    run's `seq`, so `seq` orders runs across jobs and never repeats while the counter is intact.
 * 2. After inserting, the job's ring is trimmed to `historyLimit` by dropping its oldest finished
 *    runs (never a running or parked one) and their checkpoints; each drop adds to `runs.rolledOver`
 *    and to the job's own ring counters.
 * 3. Deleting a job drops its ring and ring counters (jobs.ts); the global counters stay monotonic.
 * 4. `runlogCounterReset` is true when the recorded counter is below the highest retained `seq`
 *    (someone wound it back, e.g. a restored database); `runsRolledOverCount` is then a floor.
 */
import { sql } from 'kysely';
import type {
  CheckpointRecord,
  CheckpointsRepository,
  LeaseToken,
  RunCounters,
  RunDestinationState,
  RunPatch,
  RunRecord,
  RunStatus,
  RunsRepository,
} from '../api.ts';
import { StateError } from '../errors.ts';
import { type Db, num, type Tx } from './db.ts';
import { checkId, isPlainObject, parseStored, toStored } from './json.ts';
import { checkLease } from './leases.ts';
import type { RunsTable } from './schema.ts';

const STATUSES: readonly RunStatus[] = ['running', 'parked', 'ok', 'failed', 'abandoned'];
const IN_FLIGHT: RunStatus[] = ['running', 'parked'];

function checkStatus(s: unknown): RunStatus {
  if (!STATUSES.includes(s as RunStatus)) {
    throw new StateError('ERR_STATE_INVALID', 'run status must be running, parked, ok, failed or abandoned');
  }
  return s as RunStatus;
}

function checkCount(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new StateError('ERR_STATE_INVALID', `${what} must be a non-negative integer`);
  }
  return v;
}

function toRun(r: RunsTable): RunRecord {
  return {
    id: r.id,
    jobId: r.job_id,
    seq: num(r.seq),
    status: r.status as RunStatus,
    reason: r.reason,
    causeDigest: r.cause_digest,
    warnings: r.warnings,
    prevRunId: r.prev_run_id,
    trigger: r.trigger,
    startedAt: r.started_at,
    updatedAt: r.updated_at,
    finishedAt: r.finished_at,
    bytes: num(r.bytes),
    records: num(r.records),
    destinations: parseStored<Record<string, RunDestinationState>>(r.destinations, 'run destinations'),
    prunedAt: r.pruned_at,
    detail: parseStored<Record<string, unknown>>(r.detail, 'run detail'),
  };
}

/** Adds `by` to a counter row and returns its new value. */
export async function bumpCounter(trx: Tx, name: string, by: number): Promise<number> {
  const row = await trx
    .insertInto('counters')
    .values({ name, value: by })
    .onConflict((oc) => oc.column('name').doUpdateSet({ value: sql`counters.value + ${by}` }))
    .returning('value')
    .executeTakeFirstOrThrow();
  return num(row.value);
}

async function counterValue(k: Tx, name: string): Promise<number> {
  const row = await k.selectFrom('counters').select('value').where('name', '=', name).executeTakeFirst();
  return num(row?.value);
}

/** Validates a patch and produces the updated row (pure; no I/O). */
function applyPatch(row: RunsTable, patch: RunPatch, now: string): RunsTable {
  const next: RunsTable = { ...row, updated_at: now };
  if (patch.status !== undefined) next.status = checkStatus(patch.status);
  if (patch.reason !== undefined) next.reason = patch.reason;
  if (patch.causeDigest !== undefined) next.cause_digest = patch.causeDigest;
  if (patch.warnings !== undefined) next.warnings = checkCount(patch.warnings, 'warnings');
  if (patch.finishedAt !== undefined) next.finished_at = patch.finishedAt;
  if (patch.bytes !== undefined) next.bytes = checkCount(patch.bytes, 'bytes');
  if (patch.records !== undefined) next.records = checkCount(patch.records, 'records');
  if (patch.prunedAt !== undefined) next.pruned_at = patch.prunedAt;
  if (patch.destinations !== undefined) {
    const merged = {
      ...parseStored<Record<string, RunDestinationState>>(row.destinations, 'run destinations'),
      ...patch.destinations,
    };
    next.destinations = toStored(merged, 'run destinations');
  }
  if (patch.detail !== undefined) {
    if (!isPlainObject(patch.detail))
      throw new StateError('ERR_STATE_INVALID', 'run detail must be an object');
    const merged = { ...parseStored<Record<string, unknown>>(row.detail, 'run detail'), ...patch.detail };
    next.detail = toStored(merged, 'run detail');
  }
  // A run that reaches a final status gets a finish time unless the caller gave one.
  if (
    patch.status !== undefined &&
    !IN_FLIGHT.includes(next.status as RunStatus) &&
    next.finished_at === null
  ) {
    next.finished_at = now;
  }
  return next;
}

export function runsRepository(db: Db): RunsRepository {
  async function patchRun(
    id: string,
    patch: RunPatch,
    from: RunStatus[] | null,
    lease?: LeaseToken,
  ): Promise<RunRecord | null> {
    checkId(id, 'run id');
    return db.write(
      'updating a run',
      async (trx) => {
        if (lease !== undefined) await checkLease(trx, db, lease);
        const row = await trx.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst();
        if (!row) {
          if (from) return null;
          throw new StateError('ERR_STATE_NOT_FOUND', 'no such run');
        }
        if (from && !from.includes(row.status as RunStatus)) return null;
        const next = applyPatch(row, patch, db.nowIso());
        await trx.updateTable('runs').set(next).where('id', '=', id).execute();
        return toRun(next);
      },
      [`run:${id}`],
    );
  }

  return {
    async start(run) {
      const id = checkId(run.id, 'run id');
      const jobId = checkId(run.jobId, 'job id');
      const status = checkStatus(run.status ?? 'running');
      const destinations = toStored(run.destinations ?? {}, 'run destinations');
      const detail = toStored(run.detail ?? {}, 'run detail');
      return db.write(
        'recording a run',
        async (trx) => {
          const now = db.nowIso();
          const seq = await bumpCounter(trx, 'runs.recorded', 1);
          await trx
            .insertInto('run_rings')
            .values({ job_id: jobId, recorded_total: 1, rolled_over: 0 })
            .onConflict((oc) =>
              oc.column('job_id').doUpdateSet({ recorded_total: sql`run_rings.recorded_total + 1` }),
            )
            .execute();
          const row: RunsTable = {
            id,
            job_id: jobId,
            seq,
            status,
            reason: null,
            cause_digest: null,
            warnings: 0,
            prev_run_id: run.prevRunId ?? null,
            trigger: run.trigger ?? 'manual',
            started_at: run.startedAt ?? now,
            updated_at: now,
            finished_at: null,
            bytes: 0,
            records: 0,
            destinations,
            pruned_at: null,
            detail,
          };
          await trx.insertInto('runs').values(row).execute();
          await trimRing(trx, jobId, db.historyLimit);
          return toRun(row);
        },
        [`ring:${jobId}`],
      );
    },

    async update(id, patch) {
      return (await patchRun(id, patch, null)) as RunRecord;
    },

    async transition(id, from, patch, options = {}) {
      return patchRun(id, patch, from, options.lease);
    },

    async get(id) {
      const row = await db.read('reading a run', (k) =>
        k.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? toRun(row) : null;
    },

    async listForJob(jobId, options = {}) {
      const limit = Math.max(1, Math.min(options.limit ?? 10000, 10000));
      const rows = await db.read('listing runs', (k) =>
        k
          .selectFrom('runs')
          .selectAll()
          .where('job_id', '=', jobId)
          .orderBy('seq', 'desc')
          .limit(limit)
          .execute(),
      );
      return rows.map(toRun);
    },

    async listByStatus(statuses = IN_FLIGHT) {
      for (const s of statuses) checkStatus(s);
      if (statuses.length === 0) return [];
      const rows = await db.read('listing runs', (k) =>
        k.selectFrom('runs').selectAll().where('status', 'in', statuses).orderBy('seq', 'asc').execute(),
      );
      return rows.map(toRun);
    },

    async latestOk(jobId, at) {
      const row = await db.read('reading runs', (k) => {
        let q = k.selectFrom('runs').selectAll().where('job_id', '=', jobId).where('status', '=', 'ok');
        if (at !== undefined) q = q.where('started_at', '<=', at);
        return q.orderBy('started_at', 'desc').orderBy('seq', 'desc').limit(1).executeTakeFirst();
      });
      return row ? toRun(row) : null;
    },

    async window(jobId) {
      const row = await db.read('reading runs', (k) =>
        k
          .selectFrom('runs')
          .select((eb) => [
            eb.fn.min('started_at').as('oldest'),
            eb.fn.max('started_at').as('newest'),
            eb.fn.countAll().as('count'),
          ])
          .where('job_id', '=', jobId)
          .executeTakeFirst(),
      );
      const count = num(row?.count as number | string | bigint | undefined);
      if (!row || count === 0 || row.oldest === null || row.newest === null) return null;
      return { oldest: String(row.oldest), newest: String(row.newest), count };
    },

    async counters(jobId): Promise<RunCounters> {
      return db.read('reading run counters', async (k) => {
        let recorded: number;
        let rolled: number;
        let agg = k
          .selectFrom('runs')
          .select((eb) => [eb.fn.countAll().as('n'), eb.fn.max('seq').as('maxSeq')]);
        if (jobId === undefined) {
          recorded = await counterValue(k, 'runs.recorded');
          rolled = await counterValue(k, 'runs.rolledOver');
        } else {
          const ring = await k
            .selectFrom('run_rings')
            .selectAll()
            .where('job_id', '=', jobId)
            .executeTakeFirst();
          recorded = num(ring?.recorded_total);
          rolled = num(ring?.rolled_over);
          agg = agg.where('job_id', '=', jobId);
        }
        const a = await agg.executeTakeFirst();
        const retained = num(a?.n as number | string | bigint | undefined);
        const maxSeq = num(a?.maxSeq as number | string | bigint | null | undefined);
        // Per job the counter counts that job's runs while seq is global, so compare counts there.
        const reset = jobId === undefined ? maxSeq > recorded : retained + rolled > recorded;
        return {
          runsRecordedTotal: recorded,
          runsRetainedCount: retained,
          runsRolledOverCount: reset ? Math.max(rolled, recorded - retained, 0) : rolled,
          runlogCounterReset: reset,
        };
      });
    },

    async restoreRing(jobIdArg, ring) {
      const jobId = checkId(jobIdArg, 'job id');
      const recordedTotal = checkCount(ring.recordedTotal, 'recordedTotal');
      const rolledOver = checkCount(ring.rolledOver, 'rolledOver');
      const floor = checkCount(ring.recordedFloor ?? 0, 'recordedFloor');
      const rows: RunsTable[] = ring.runs.map((r) => {
        checkId(r.id, 'run id');
        if (r.jobId !== jobId)
          throw new StateError('ERR_STATE_INVALID', 'a restored run belongs to another job');
        const status = checkStatus(r.status);
        if (IN_FLIGHT.includes(status))
          throw new StateError('ERR_STATE_INVALID', 'a run in flight cannot be restored');
        if (!Number.isSafeInteger(r.seq) || r.seq < 1)
          throw new StateError('ERR_STATE_INVALID', 'a restored run needs a positive seq');
        return {
          id: r.id,
          job_id: jobId,
          seq: r.seq,
          status,
          reason: r.reason ?? null,
          cause_digest: r.causeDigest ?? null,
          warnings: checkCount(r.warnings ?? 0, 'warnings'),
          prev_run_id: r.prevRunId ?? null,
          trigger: String(r.trigger ?? 'manual'),
          started_at: r.startedAt,
          updated_at: r.updatedAt ?? r.startedAt,
          finished_at: r.finishedAt ?? null,
          bytes: checkCount(r.bytes ?? 0, 'bytes'),
          records: checkCount(r.records ?? 0, 'records'),
          destinations: toStored(r.destinations ?? {}, 'run destinations'),
          pruned_at: r.prunedAt ?? null,
          detail: toStored(r.detail ?? {}, 'run detail'),
        };
      });
      return db.write(
        'restoring a history ring',
        async (trx) => {
          let inserted = 0;
          let maxSeq = floor;
          for (const row of rows) {
            maxSeq = Math.max(maxSeq, num(row.seq));
            const present = await trx
              .selectFrom('runs')
              .select('id')
              .where('id', '=', row.id)
              .executeTakeFirst();
            if (present) continue;
            await trx.insertInto('runs').values(row).execute();
            inserted++;
          }
          const current = await counterValue(trx, 'runs.recorded');
          if (maxSeq > current) await bumpCounter(trx, 'runs.recorded', maxSeq - current);
          const ringRow = await trx
            .selectFrom('run_rings')
            .selectAll()
            .where('job_id', '=', jobId)
            .executeTakeFirst();
          const total = Math.max(num(ringRow?.recorded_total), recordedTotal, inserted);
          const rolled = Math.max(num(ringRow?.rolled_over), rolledOver);
          await trx
            .insertInto('run_rings')
            .values({ job_id: jobId, recorded_total: total, rolled_over: rolled })
            .onConflict((oc) =>
              oc.column('job_id').doUpdateSet({ recorded_total: total, rolled_over: rolled }),
            )
            .execute();
          await trimRing(trx, jobId, db.historyLimit);
          return { inserted, skipped: rows.length - inserted };
        },
        [`ring:${jobId}`],
      );
    },
  };
}

/** Drops the job's oldest finished runs beyond `limit`; returns how many it dropped. */
async function trimRing(trx: Tx, jobId: string, limit: number): Promise<number> {
  const total = num(
    (
      await trx
        .selectFrom('runs')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('job_id', '=', jobId)
        .executeTakeFirst()
    )?.n as number | string | bigint | undefined,
  );
  const excess = total - limit;
  if (excess <= 0) return 0;
  const victims = await trx
    .selectFrom('runs')
    .select('id')
    .where('job_id', '=', jobId)
    .where('status', 'not in', IN_FLIGHT)
    .orderBy('seq', 'asc')
    .limit(excess)
    .execute();
  if (victims.length === 0) return 0;
  const ids = victims.map((v) => v.id);
  await trx.deleteFrom('runs').where('id', 'in', ids).execute();
  await trx.deleteFrom('checkpoints').where('run_id', 'in', ids).execute();
  await trx
    .updateTable('run_rings')
    .set({ rolled_over: sql`rolled_over + ${ids.length}` })
    .where('job_id', '=', jobId)
    .execute();
  await bumpCounter(trx, 'runs.rolledOver', ids.length);
  return ids.length;
}

export function checkpointsRepository(db: Db): CheckpointsRepository {
  const toCheckpoint = (r: { run_id: string; job_id: string; sealed: Uint8Array; updated_at: string }) => ({
    runId: r.run_id,
    jobId: r.job_id,
    sealed: new Uint8Array(r.sealed),
    updatedAt: r.updated_at,
  });
  return {
    async put(runId, jobId, sealed, options = {}): Promise<CheckpointRecord> {
      checkId(runId, 'run id');
      checkId(jobId, 'job id');
      if (!(sealed instanceof Uint8Array))
        throw new StateError('ERR_STATE_INVALID', 'a checkpoint must be bytes');
      const bytes = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
      return db.write(
        'saving a checkpoint',
        async (trx) => {
          if (options.lease !== undefined) await checkLease(trx, db, options.lease);
          const now = db.nowIso();
          await trx
            .insertInto('checkpoints')
            .values({ run_id: runId, job_id: jobId, sealed: bytes, updated_at: now })
            .onConflict((oc) =>
              oc.column('run_id').doUpdateSet({ job_id: jobId, sealed: bytes, updated_at: now }),
            )
            .execute();
          return { runId, jobId, sealed: new Uint8Array(sealed), updatedAt: now };
        },
        [`checkpoint:${runId}`],
      );
    },
    async get(runId) {
      const row = await db.read('reading a checkpoint', (k) =>
        k.selectFrom('checkpoints').selectAll().where('run_id', '=', runId).executeTakeFirst(),
      );
      return row ? toCheckpoint(row) : null;
    },
    async delete(runId) {
      const r = await db.write('deleting a checkpoint', (trx) =>
        trx.deleteFrom('checkpoints').where('run_id', '=', runId).executeTakeFirst(),
      );
      return num(r.numDeletedRows) > 0;
    },
  };
}
