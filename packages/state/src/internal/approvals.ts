/**
 * Approvals (restore approval, config changes, owner actions). `transition` is a compare-and-set
 * inside one write transaction holding the approval's lock, so an approval is consumed at most
 * once even when two applies race on two engine processes.
 */
import type { ApprovalRecord, ApprovalStatus, ApprovalsRepository } from '../api.ts';
import { StateError } from '../errors.ts';
import type { Db } from './db.ts';
import { checkId, isPlainObject, parseStored, toStored } from './json.ts';
import type { ApprovalsTable } from './schema.ts';

const STATUSES: readonly ApprovalStatus[] = [
  'pending',
  'approved',
  'rejected',
  'consumed',
  'void',
  'expired',
];

function checkStatus(s: unknown): ApprovalStatus {
  if (!STATUSES.includes(s as ApprovalStatus)) {
    throw new StateError('ERR_STATE_INVALID', 'unknown approval status');
  }
  return s as ApprovalStatus;
}

function toApproval(r: ApprovalsTable): ApprovalRecord {
  return {
    id: r.id,
    kind: r.kind,
    status: r.status as ApprovalStatus,
    subjectHash: r.subject_hash,
    requestedBy: r.requested_by,
    requestedByEmail: r.requested_by_email,
    requestedAt: r.requested_at,
    decidedBy: r.decided_by,
    decidedByEmail: r.decided_by_email,
    decidedAt: r.decided_at,
    expiresAt: r.expires_at,
    detail: parseStored<Record<string, unknown>>(r.detail, 'approval detail'),
    updatedAt: r.updated_at,
  };
}

export function approvalsRepository(db: Db): ApprovalsRepository {
  return {
    async create(a) {
      if (a.detail !== undefined && !isPlainObject(a.detail)) {
        throw new StateError('ERR_STATE_INVALID', 'approval detail must be an object');
      }
      const now = db.nowIso();
      const row: ApprovalsTable = {
        id: checkId(a.id, 'approval id'),
        kind: checkId(a.kind, 'approval kind'),
        status: 'pending',
        subject_hash: a.subjectHash ?? null,
        requested_by: a.requestedBy ?? null,
        requested_by_email: a.requestedByEmail ?? null,
        requested_at: a.requestedAt ?? now,
        decided_by: null,
        decided_by_email: null,
        decided_at: null,
        expires_at: a.expiresAt ?? null,
        detail: toStored(a.detail ?? {}, 'approval detail'),
        updated_at: now,
      };
      await db.write(
        'recording an approval request',
        (trx) => trx.insertInto('approvals').values(row).execute(),
        [`approval:${row.id}`],
      );
      return toApproval(row);
    },

    async get(id) {
      const row = await db.read('reading an approval', (k) =>
        k.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst(),
      );
      return row ? toApproval(row) : null;
    },

    async list(filter = {}) {
      const rows = await db.read('listing approvals', (k) => {
        let q = k.selectFrom('approvals').selectAll();
        if (filter.kind !== undefined) q = q.where('kind', '=', filter.kind);
        if (filter.subjectHash !== undefined) q = q.where('subject_hash', '=', filter.subjectHash);
        if (filter.status !== undefined) {
          if (filter.status.length === 0) return Promise.resolve([]);
          q = q.where('status', 'in', filter.status.map(checkStatus));
        }
        return q.orderBy('requested_at', 'desc').orderBy('id', 'desc').execute();
      });
      return rows.map(toApproval);
    },

    async transition(id, from, to, decision = {}) {
      checkStatus(to);
      for (const s of from) checkStatus(s);
      if (decision.detail !== undefined && !isPlainObject(decision.detail)) {
        throw new StateError('ERR_STATE_INVALID', 'approval detail must be an object');
      }
      return db.write(
        'deciding an approval',
        async (trx) => {
          const row = await trx.selectFrom('approvals').selectAll().where('id', '=', id).executeTakeFirst();
          if (!row || !from.includes(row.status as ApprovalStatus)) return null;
          const now = db.nowIso();
          const next: ApprovalsTable = { ...row, status: to, updated_at: now };
          if (decision.by !== undefined || decision.byEmail !== undefined) {
            next.decided_by = decision.by ?? null;
            next.decided_by_email = decision.byEmail ?? null;
            next.decided_at = now;
          }
          if (decision.detail !== undefined) {
            const merged = {
              ...parseStored<Record<string, unknown>>(row.detail, 'approval detail'),
              ...decision.detail,
            };
            next.detail = toStored(merged, 'approval detail');
          }
          await trx.updateTable('approvals').set(next).where('id', '=', id).execute();
          return toApproval(next);
        },
        [`approval:${id}`],
      );
    },
  };
}
