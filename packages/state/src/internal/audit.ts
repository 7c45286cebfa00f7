/**
 * The append-only audit table. The store does not hash (that is @coffer/audit's job); it makes
 * the chain linear: `append` reads the head and inserts the builder's row inside one write
 * transaction that every appender serialises on (SQLite BEGIN IMMEDIATE; PostgreSQL the
 * transaction-scoped advisory lock `audit:head`), and `seq` is the primary key, so even a writer
 * that bypassed the lock could not fork the chain, only fail. There is no update or delete API.
 */
import type { AuditHead, AuditQuery, AuditRepository, AuditRow, AuditRowInput } from '../api.ts';
import { StateError } from '../errors.ts';
import { CallerError, type Db, num } from './db.ts';
import { isPlainObject, parseStored, toStored } from './json.ts';
import type { AuditEventsTable } from './schema.ts';

function toRow(r: AuditEventsTable): AuditRow {
  return {
    seq: num(r.seq),
    ts: r.ts,
    prevHash: r.prev_hash,
    hash: r.hash,
    action: r.action,
    actorSubject: r.actor_subject,
    actorEmail: r.actor_email,
    event: parseStored<Record<string, unknown>>(r.event, 'audit event'),
  };
}

function checkRow(row: AuditRowInput, prev: AuditHead | null): AuditEventsTable {
  const expected = (prev?.seq ?? 0) + 1;
  if (!isPlainObject(row) || row.seq !== expected) {
    throw new StateError('ERR_STATE_INVARIANT', 'the audit row does not continue the chain (seq)');
  }
  if (prev !== null && row.prevHash !== prev.hash) {
    throw new StateError('ERR_STATE_INVARIANT', 'the audit row does not continue the chain (prevHash)');
  }
  for (const f of ['ts', 'prevHash', 'hash', 'action'] as const) {
    if (typeof row[f] !== 'string' || row[f] === '') {
      throw new StateError('ERR_STATE_INVALID', `audit row field ${f} must be a non-empty string`);
    }
  }
  if (!isPlainObject(row.event))
    throw new StateError('ERR_STATE_INVALID', 'an audit event must be an object');
  return {
    seq: row.seq,
    ts: row.ts,
    prev_hash: row.prevHash,
    hash: row.hash,
    action: row.action,
    actor_subject: row.actorSubject ?? null,
    actor_email: row.actorEmail ?? null,
    event: toStored(row.event, 'the audit event'),
  };
}

export function auditRepository(db: Db): AuditRepository {
  return {
    async append(build) {
      return db.write(
        'appending an audit event',
        async (trx) => {
          const head = await trx
            .selectFrom('audit_events')
            .select(['seq', 'hash'])
            .orderBy('seq', 'desc')
            .limit(1)
            .executeTakeFirst();
          const prev = head ? { seq: num(head.seq), hash: head.hash } : null;
          let built: AuditRowInput;
          try {
            built = await build(prev);
          } catch (e) {
            throw new CallerError(e);
          }
          const row = checkRow(built, prev);
          await trx.insertInto('audit_events').values(row).execute();
          return toRow(row);
        },
        ['audit:head'],
      );
    },

    async head() {
      const row = await db.read('reading the audit head', (k) =>
        k
          .selectFrom('audit_events')
          .select(['seq', 'hash'])
          .orderBy('seq', 'desc')
          .limit(1)
          .executeTakeFirst(),
      );
      return row ? { seq: num(row.seq), hash: row.hash } : null;
    },

    async earliestSeq() {
      const row = await db.read('reading the audit chain', (k) =>
        k.selectFrom('audit_events').select('seq').orderBy('seq', 'asc').limit(1).executeTakeFirst(),
      );
      return row ? num(row.seq) : null;
    },

    async get(seq) {
      const row = await db.read('reading an audit event', (k) =>
        k.selectFrom('audit_events').selectAll().where('seq', '=', seq).executeTakeFirst(),
      );
      return row ? toRow(row) : null;
    },

    async query(q: AuditQuery = {}) {
      const limit = Math.max(1, Math.min(Math.floor(q.limit ?? 100), 10000));
      const rows = await db.read('reading the audit chain', (k) => {
        let s = k.selectFrom('audit_events').selectAll();
        if (q.beforeSeq !== undefined) s = s.where('seq', '<', q.beforeSeq);
        if (q.afterSeq !== undefined) s = s.where('seq', '>', q.afterSeq);
        if (q.action !== undefined) s = s.where('action', '=', q.action);
        if (q.actor !== undefined) {
          const actor = q.actor;
          s = s.where((eb) => eb.or([eb('actor_subject', '=', actor), eb('actor_email', '=', actor)]));
        }
        if (q.since !== undefined) s = s.where('ts', '>=', q.since);
        if (q.until !== undefined) s = s.where('ts', '<=', q.until);
        return s
          .orderBy('seq', q.order ?? 'desc')
          .limit(limit)
          .execute();
      });
      return rows.map(toRow);
    },
  };
}
