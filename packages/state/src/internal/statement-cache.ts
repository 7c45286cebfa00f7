/**
 * Prepared statements reused across queries on the SQLite state.
 *
 * Why: Kysely's SQLite driver prepares every query afresh (`db.prepare(sql)`), and preparing
 * (parsing and planning the SQL) cost more than running most of the state's queries: profiled
 * over a backup run with nothing changed (20,000 files), `prepare` took 16-17 ms of the engine's
 * main thread per run, for the run's own bookkeeping and the history polls of a client waiting
 * for it. The SQL Kysely compiles has its values as parameters, so a few dozen statement shapes
 * cover the engine; each is prepared once here and run again with new parameters.
 *
 * Safety: a better-sqlite3 statement cannot run twice at once; `busy` is true only while an
 * `iterate()` over it is open (the state never streams, but a reused busy statement would throw
 * "This statement is busy"), so a busy one is never handed out again: a fresh one is prepared.
 * SQLite re-prepares a statement by itself after a schema change (migrations). The cache holds
 * at most `max` statements, least recently used dropped first (SQL built with lists of varying
 * length, `in (?, ?, ...)`, makes new shapes).
 */
import type Database from 'better-sqlite3';

/** What Kysely's SqliteDialect uses of a database (its `SqliteDatabase` interface). */
export interface PreparingDatabase {
  prepare(sql: string): Database.Statement;
  close(): void;
}

export const STATEMENT_CACHE_MAX = 256;

export function withStatementCache(raw: Database.Database, max = STATEMENT_CACHE_MAX): PreparingDatabase {
  const cache = new Map<string, Database.Statement>();
  return {
    prepare(sql: string): Database.Statement {
      const hit = cache.get(sql);
      if (hit !== undefined && !hit.busy) {
        // Most recently used goes last (Map order): the first key is the one to drop.
        cache.delete(sql);
        cache.set(sql, hit);
        return hit;
      }
      const stmt = raw.prepare(sql);
      if (hit === undefined) {
        cache.set(sql, stmt);
        if (cache.size > max) cache.delete(cache.keys().next().value!);
      }
      return stmt;
    },
    close(): void {
      cache.clear();
      raw.close();
    },
  };
}
