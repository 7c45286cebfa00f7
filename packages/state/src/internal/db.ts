/**
 * The connection layer under every repository: opens SQLite (better-sqlite3) or PostgreSQL (pg)
 * behind one Kysely instance, runs migrations, serialises writes, and turns every driver failure
 * into a StateError that names no credential.
 *
 * Write serialisation:
 * - SQLite: every write runs in `BEGIN IMMEDIATE`, so the write lock is taken before the first
 *   read and no transaction ever has to upgrade (which is where SQLITE_BUSY deadlocks come from).
 *   The lock wait is an async retry loop with busy_timeout 0 during the attempt, not SQLite's
 *   blocking busy handler: better-sqlite3 is synchronous, and two State instances in one process
 *   would otherwise block the event loop while the other holds the lock and can never commit.
 * - PostgreSQL: READ COMMITTED transactions that first take transaction-scoped advisory locks on
 *   the names they write (a job id, the audit head), with `lock_timeout` bounding the wait.
 */
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import type pg from 'pg';
import { StateError } from '../errors.ts';
import { migrationProvider } from './migrations.ts';
import type { Schema } from './schema.ts';
import { withStatementCache } from './statement-cache.ts';

export type Backend = 'sqlite' | 'postgres';
export type Tx = Kysely<Schema>;

export interface DbOptions {
  url?: string | undefined;
  dataDir: string;
  now?: (() => Date) | undefined;
  historyLimit?: number | undefined;
  lockTimeoutMs?: number | undefined;
  poolMax?: number | undefined;
  sqliteSynchronous?: 'FULL' | 'NORMAL' | undefined;
}

const SQLITE_BUSY_TIMEOUT_MS = 5000;
const MIGRATION_LOCK = 'coffer.state.migrate';

/**
 * Wraps an error thrown by the CALLER's own code inside a transaction (an audit builder), so
 * `write` rethrows it unchanged instead of reporting it as a database failure.
 */
export class CallerError {
  readonly error: unknown;
  constructor(error: unknown) {
    this.error = error;
  }
}

/** int8 / bigint values arrive as strings from pg; everything numeric goes through here. */
export function num(v: number | string | bigint | null | undefined): number {
  if (v === null || v === undefined) return 0;
  return typeof v === 'number' ? v : Number(v);
}

/** A 64-bit advisory lock key (as a decimal string) for a lock name. */
function lockKey(name: string): string {
  const d = createHash('sha256').update(name).digest();
  return BigInt.asIntN(64, d.readBigUInt64BE(0)).toString();
}

function driverCode(e: unknown): string | undefined {
  const c = (e as { code?: unknown } | null)?.code;
  return typeof c === 'string' ? c : undefined;
}

/**
 * Maps a driver error onto a StateError. The driver's message is dropped on purpose: pg and
 * SQLite messages can echo values (a duplicate key, a user name); only its code is kept.
 */
export function mapError(e: unknown, what: string): StateError {
  if (e instanceof StateError) return e;
  const code = driverCode(e);
  if (code === '23505' || code === '23503' || (code?.startsWith('SQLITE_CONSTRAINT') ?? false)) {
    return new StateError('ERR_STATE_CONFLICT', `${what}: a stored row conflicts with the write`, {
      driverCode: code,
    });
  }
  if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB' || code === 'XX001' || code === 'XX002') {
    return new StateError('ERR_STATE_CORRUPT', `${what}: the state database is damaged`, {
      driverCode: code,
    });
  }
  return new StateError(
    'ERR_STATE_UNAVAILABLE',
    `${what}: the state database did not complete the operation`,
    {
      driverCode: code,
    },
  );
}

function isBusy(e: unknown): boolean {
  const c = driverCode(e);
  return c === 'SQLITE_BUSY' || c === 'SQLITE_LOCKED' || (c?.startsWith('SQLITE_BUSY_') ?? false);
}

function isRetryablePg(e: unknown): boolean {
  const c = driverCode(e);
  return c === '40001' || c === '40P01';
}

/** Describes a PostgreSQL URL without its credentials; never throws. */
function describePg(url: string): string {
  try {
    const u = new URL(url);
    return `postgres://${u.hostname}${u.port ? `:${u.port}` : ''}${u.pathname}`;
  } catch {
    return 'postgres://(unparseable url)';
  }
}

export class Db {
  readonly backend: Backend;
  readonly description: string;
  readonly k: Kysely<Schema>;
  readonly historyLimit: number;
  readonly lockTimeoutMs: number;
  readonly #now: () => Date;
  readonly #raw: Database.Database | undefined;
  readonly #pool: pg.Pool | undefined;
  #closed = false;
  /** Operations started and not yet settled: `close` lets them finish before closing. */
  readonly #inflight = new Set<Promise<unknown>>();

  private constructor(init: {
    backend: Backend;
    description: string;
    k: Kysely<Schema>;
    raw?: Database.Database;
    pool?: pg.Pool;
    options: DbOptions;
  }) {
    this.backend = init.backend;
    this.description = init.description;
    this.k = init.k;
    this.#raw = init.raw;
    this.#pool = init.pool;
    this.#now = init.options.now ?? (() => new Date());
    this.historyLimit = init.options.historyLimit ?? 50;
    this.lockTimeoutMs = init.options.lockTimeoutMs ?? 15000;
  }

  /** Opens and migrates. Throws ERR_STATE_INVALID, ERR_STATE_UNAVAILABLE or ERR_STATE_MIGRATION. */
  static async open(options: DbOptions): Promise<Db> {
    const url = options.url?.trim() ? options.url.trim() : undefined;
    let db: Db;
    if (url === undefined) {
      if (typeof options.dataDir !== 'string' || options.dataDir === '') {
        throw new StateError('ERR_STATE_INVALID', 'openState needs a dataDir for the SQLite state file');
      }
      const file = join(options.dataDir, 'state.sqlite');
      let raw: Database.Database;
      try {
        mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
        raw = new Database(file);
        // busy_timeout first: switching a fresh file to WAL takes a lock another starting
        // process may briefly hold.
        raw.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
        raw.pragma('journal_mode = WAL');
        // FULL, not WAL's usual NORMAL: with NORMAL a commit is durable only at the next
        // checkpoint, so a power cut can roll back the last commits (audit rows, a consumed
        // approval, the token-retire latch, an ok run record) although the caller was told they
        // were stored. FULL fsyncs the WAL at every commit (cost: bench/state.mjs).
        raw.pragma(`synchronous = ${options.sqliteSynchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
        raw.pragma('foreign_keys = ON');
      } catch (e) {
        throw mapError(e, 'opening the SQLite state file');
      }
      const k = new Kysely<Schema>({ dialect: new SqliteDialect({ database: withStatementCache(raw) }) });
      db = new Db({ backend: 'sqlite', description: `sqlite:${file}`, k, raw, options });
    } else if (/^postgres(ql)?:\/\//i.test(url)) {
      // pg is loaded only for a PostgreSQL state (SQLite deployments need not hold it).
      const { default: pgModule } = await import('pg');
      const pool = new pgModule.Pool({
        connectionString: url,
        max: options.poolMax ?? 10,
        connectionTimeoutMillis: 10000,
      });
      // An idle client whose server went away emits 'error' on the pool; without a listener
      // Node would crash the engine. The next query reports the failure instead.
      pool.on('error', () => {});
      // Likewise a client checked out for a query when its connection drops (PostgreSQL restarted
      // or unreachable): its 'error' would crash the engine; the query itself rejects instead.
      pool.on('connect', (client) => client.on('error', () => {}));
      const k = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) });
      db = new Db({ backend: 'postgres', description: describePg(url), k, pool, options });
    } else {
      throw new StateError(
        'ERR_STATE_INVALID',
        'unsupported state database URL (expected postgres://... or none for SQLite)',
      );
    }
    try {
      await db.#migrate();
    } catch (e) {
      await db.close().catch(() => {});
      throw e;
    }
    return db;
  }

  now(): Date {
    return this.#now();
  }

  nowIso(): string {
    return this.#now().toISOString();
  }

  #check(): void {
    if (this.#closed) throw new StateError('ERR_STATE_CLOSED', 'the state store is closed');
  }

  /** A read outside any explicit transaction. */
  async read<T>(what: string, fn: (k: Tx) => Promise<T>): Promise<T> {
    this.#check();
    return this.#track(
      (async () => {
        try {
          return await fn(this.k);
        } catch (e) {
          throw mapError(e, what);
        }
      })(),
    );
  }

  #track<T>(p: Promise<T>): Promise<T> {
    this.#inflight.add(p);
    const done = () => this.#inflight.delete(p);
    p.then(done, done);
    return p;
  }

  /**
   * A serialised write transaction. `locks` names what it writes (PostgreSQL advisory locks,
   * taken in sorted order so two writers never deadlock); SQLite serialises all writes anyway.
   */
  async write<T>(what: string, fn: (trx: Tx) => Promise<T>, locks: string[] = []): Promise<T> {
    this.#check();
    return this.#track(
      (async () => {
        try {
          return this.backend === 'sqlite' ? await this.#writeSqlite(fn) : await this.#writePg(fn, locks);
        } catch (e) {
          if (e instanceof CallerError) throw e.error;
          throw mapError(e, what);
        }
      })(),
    );
  }

  async #writeSqlite<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    const raw = this.#raw as Database.Database;
    return this.k.connection().execute(async (conn) => {
      await this.#beginImmediate(raw);
      try {
        const result = await fn(conn);
        raw.exec('COMMIT');
        return result;
      } catch (e) {
        if (raw.inTransaction) {
          try {
            raw.exec('ROLLBACK');
          } catch {
            // the original error is the one worth reporting
          }
        }
        throw e;
      }
    });
  }

  async #beginImmediate(raw: Database.Database): Promise<void> {
    const deadline = Date.now() + this.lockTimeoutMs;
    let wait = 1;
    for (;;) {
      raw.pragma('busy_timeout = 0');
      try {
        raw.exec('BEGIN IMMEDIATE');
        return;
      } catch (e) {
        if (!isBusy(e)) throw e;
        if (Date.now() >= deadline) {
          throw new StateError(
            'ERR_STATE_UNAVAILABLE',
            'the state database stayed locked by another writer',
            {
              driverCode: driverCode(e),
            },
          );
        }
      } finally {
        raw.pragma(`busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
      }
      await sleep(wait + Math.random() * wait);
      wait = Math.min(wait * 2, 20);
    }
  }

  async #writePg<T>(fn: (trx: Tx) => Promise<T>, locks: string[]): Promise<T> {
    const keys = [...new Set(locks)].sort().map(lockKey);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.k.transaction().execute(async (trx) => {
          await sql`select set_config('lock_timeout', ${`${this.lockTimeoutMs}ms`}, true)`.execute(trx);
          for (const key of keys) await sql`select pg_advisory_xact_lock(${key}::bigint)`.execute(trx);
          return fn(trx);
        });
      } catch (e) {
        if (attempt < 4 && isRetryablePg(e)) continue;
        if (driverCode(e) === '55P03') {
          throw new StateError(
            'ERR_STATE_UNAVAILABLE',
            'the state database stayed locked by another writer',
            {
              driverCode: '55P03',
            },
          );
        }
        throw e;
      }
    }
  }

  async #migrate(): Promise<void> {
    const provider = migrationProvider(this.backend);
    const migrator = new Migrator({ db: this.k, provider });
    const run = async (): Promise<void> => {
      const { error, results } = await migrator.migrateToLatest();
      if (error === undefined) return;
      if (await this.#migratedByNewer(Object.keys(await provider.getMigrations()))) {
        throw new StateError(
          'ERR_STATE_MIGRATION',
          'the state database was migrated by a newer engine version; refusing to run an older one on it',
        );
      }
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      throw new StateError(
        'ERR_STATE_MIGRATION',
        `migrating the state database failed${failed ? ` at ${failed}` : ''}`,
        {
          driverCode: driverCode(error),
        },
      );
    };
    if (this.backend === 'sqlite') {
      // Kysely runs SQLite migrations without a transaction; holding BEGIN IMMEDIATE across the
      // whole run makes them atomic and serialises two processes that start together.
      const raw = this.#raw as Database.Database;
      await this.k.connection().execute(async () => {
        try {
          await this.#beginImmediate(raw);
        } catch (e) {
          throw mapError(e, 'migrating the state database');
        }
      });
      try {
        await run();
        raw.exec('COMMIT');
      } catch (e) {
        if (raw.inTransaction) raw.exec('ROLLBACK');
        throw e instanceof StateError ? e : mapError(e, 'migrating the state database');
      }
      return;
    }
    // PostgreSQL: a session advisory lock on a dedicated client around the whole Migrator run,
    // because the Migrator creates its own bookkeeping tables before taking its lock, and two
    // concurrent `create table if not exists` can still collide in the catalogue.
    let client: pg.PoolClient;
    try {
      client = await (this.#pool as pg.Pool).connect();
    } catch (e) {
      throw mapError(e, 'connecting to the PostgreSQL state database');
    }
    let broken = false;
    try {
      await client.query('select pg_advisory_lock($1::bigint)', [lockKey(MIGRATION_LOCK)]);
      await run();
    } catch (e) {
      broken = !(e instanceof StateError);
      throw e instanceof StateError ? e : mapError(e, 'migrating the state database');
    } finally {
      try {
        await client.query('select pg_advisory_unlock($1::bigint)', [lockKey(MIGRATION_LOCK)]);
      } catch {
        broken = true;
      }
      client.release(broken);
    }
  }

  /** True when the bookkeeping table names a migration this code does not know. */
  async #migratedByNewer(known: string[]): Promise<boolean> {
    try {
      const rows = await sql<{ name: string }>`select name from kysely_migration`.execute(this.k);
      return rows.rows.some((r) => !known.includes(r.name));
    } catch {
      return false;
    }
  }

  /** SQLite: the journal mode and synchronous level of the open connection; null on PostgreSQL. */
  async durability(): Promise<{ journalMode: string; synchronous: string } | null> {
    this.#check();
    const raw = this.#raw;
    if (raw === undefined) return null;
    const journalMode = String(raw.pragma('journal_mode', { simple: true }));
    const level = Number(raw.pragma('synchronous', { simple: true }));
    return { journalMode, synchronous: ['OFF', 'NORMAL', 'FULL', 'EXTRA'][level] ?? String(level) };
  }

  async ping(): Promise<void> {
    await this.read('pinging the state database', (k) => sql`select 1 as one`.execute(k));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // New calls are refused from here on; the ones already started commit or fail normally.
    await Promise.allSettled([...this.#inflight]);
    try {
      await this.k.destroy();
    } catch {
      // closing is best effort; nothing useful to report to a caller that is shutting down
    }
  }
}
