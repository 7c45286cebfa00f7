/**
 * A real SQLite-backed approvals store, settings registry and lease table for the approval tests
 * (@coffer/restore may not depend on @coffer/state; the engine passes the state store's
 * repositories, which have these shapes). Transitions are one conditional UPDATE, as in the state store.
 */
import Database from 'better-sqlite3';
import type {
  ApprovalRecordLike,
  ApprovalStore,
  LeaseStore,
  PlanRegistry,
  RestoreApprovalStatus,
} from '../src/index.ts';

export function sqliteStores(
  path: string,
  now: () => Date,
): {
  approvals: ApprovalStore;
  registry: PlanRegistry;
  leases: LeaseStore;
  close(): void;
} {
  const db = new Database(path);
  db.exec(`CREATE TABLE IF NOT EXISTS approvals (id TEXT PRIMARY KEY, doc TEXT NOT NULL, status TEXT NOT NULL, kind TEXT, subject_hash TEXT, requested_at TEXT);
           CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
           CREATE TABLE IF NOT EXISTS leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires INTEGER NOT NULL);`);
  const row = (id: string): ApprovalRecordLike | null => {
    const r = db.prepare('SELECT doc FROM approvals WHERE id = ?').get(id) as { doc: string } | undefined;
    return r ? (JSON.parse(r.doc) as ApprovalRecordLike) : null;
  };
  const approvals: ApprovalStore = {
    async create(a) {
      const at = now().toISOString();
      const rec: ApprovalRecordLike = {
        id: a.id,
        kind: a.kind,
        status: 'pending',
        subjectHash: a.subjectHash ?? null,
        requestedBy: a.requestedBy ?? null,
        requestedByEmail: a.requestedByEmail ?? null,
        requestedAt: a.requestedAt ?? at,
        decidedBy: null,
        decidedByEmail: null,
        decidedAt: null,
        expiresAt: a.expiresAt ?? null,
        detail: a.detail ?? {},
        updatedAt: at,
      };
      db.prepare('INSERT INTO approvals VALUES (?, ?, ?, ?, ?, ?)').run(
        rec.id,
        JSON.stringify(rec),
        rec.status,
        rec.kind,
        rec.subjectHash,
        rec.requestedAt,
      );
      return rec;
    },
    async get(id) {
      return row(id);
    },
    async list(filter = {}) {
      const all = (
        db.prepare('SELECT doc FROM approvals ORDER BY requested_at DESC, id DESC').all() as Array<{
          doc: string;
        }>
      ).map((r) => JSON.parse(r.doc) as ApprovalRecordLike);
      return all.filter(
        (a) =>
          (filter.kind === undefined || a.kind === filter.kind) &&
          (filter.subjectHash === undefined || a.subjectHash === filter.subjectHash) &&
          (filter.status === undefined || filter.status.includes(a.status)),
      );
    },
    async transition(id, from: RestoreApprovalStatus[], to, decision = {}) {
      return db.transaction(() => {
        const cur = row(id);
        if (cur === null || !from.includes(cur.status)) return null;
        const at = now().toISOString();
        const next: ApprovalRecordLike = { ...cur, status: to, updatedAt: at };
        if (decision.by !== undefined || decision.byEmail !== undefined) {
          next.decidedBy = decision.by ?? null;
          next.decidedByEmail = decision.byEmail ?? null;
          next.decidedAt = at;
        }
        if (decision.detail !== undefined) next.detail = { ...cur.detail, ...decision.detail };
        const changed = db
          .prepare(
            `UPDATE approvals SET doc = ?, status = ? WHERE id = ? AND status IN (${from.map(() => '?').join(',')})`,
          )
          .run(JSON.stringify(next), to, id, ...from).changes;
        return changed === 1 ? next : null;
      })();
    },
  };
  const registry: PlanRegistry = {
    async get<T>(key: string) {
      const r = db.prepare('SELECT value FROM settings WHERE key = ?').get(key) as
        | { value: string }
        | undefined;
      return r ? (JSON.parse(r.value) as T) : undefined;
    },
    async set(key, value) {
      db.prepare(
        'INSERT INTO settings VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value',
      ).run(key, JSON.stringify(value));
    },
  };
  const leases: LeaseStore = {
    async acquire(name, holder, ttlMs) {
      const t = now().getTime();
      const changed = db
        .prepare(
          'INSERT INTO leases VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires WHERE leases.expires <= ? OR leases.holder = excluded.holder',
        )
        .run(name, holder, t + ttlMs, t).changes;
      return changed === 1 ? { name, holder } : null;
    },
    async release(name, holder) {
      return db.prepare('DELETE FROM leases WHERE name = ? AND holder = ?').run(name, holder).changes === 1;
    },
  };
  return { approvals, registry, leases, close: () => db.close() };
}
