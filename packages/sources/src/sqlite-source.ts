/**
 * The `sqlite` connector: one SQLite database file, captured consistently while other processes
 * write to it, exposed per table so that a subset of tables can be restored.
 *
 * Records (formats in internal/sqlite-codec.ts and the README): `schema.json`, then one
 * `tables/<encodeURIComponent(name)>.jsonl` per table. The first `list` captures the database
 * (internal/sqlite-capture.ts, in a worker thread): a `VACUUM INTO` snapshot taken in one read
 * transaction, dumped into private temporary files (mode 0600 in a 0700 directory) that every
 * `read`/`readRange` of this connector serves, so all records of one enumeration come from the
 * same instant. `close()` deletes them. A listing cursor is bound to its capture: a cursor from
 * another capture (another process, after a restart) is refused with ERR_SOURCE_INVALID_CURSOR,
 * because mixing tables from two instants would break the consistency this connector promises.
 *
 * Restore (`write`) goes into the connector's database file, meant to be a fresh one; see
 * internal/sqlite-restore.ts. Writes are serialised (one transaction per record).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { type FileHandle, mkdtemp, open, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { isSourceError, quoteName, SourceError } from './errors.ts';
import {
  bindingOf,
  clampRange,
  decodeCursor,
  encodeCursor,
  enumeratePages,
  maxRecordBytesOf,
  overCeiling,
  pageSizeOf,
} from './internal/common.ts';
import type { CapturedRecord, CaptureFailure, CaptureResult } from './internal/sqlite-capture.ts';
import { quoteIdent, SCHEMA_RECORD, tableOfRecord } from './internal/sqlite-codec.ts';
import { restoreSchema, restoreTable } from './internal/sqlite-restore.ts';
import type {
  EnumerateOptions,
  ListOptions,
  RecordBody,
  SkippedRecord,
  SourceConnector,
  SourcePage,
  SourceRecordInfo,
  WriteResult,
} from './types.ts';

export interface SqliteSourceConfig {
  type: 'sqlite';
  /** The database file (backed up; or, for restore, the fresh file written into). */
  path: string;
  binding?: string;
  /** Where captures are dumped (default: the OS temporary directory). Needs about the database's size. */
  workDir?: string;
  maxRecordBytes?: number;
}

const READ_CHUNK = 256 * 1024;
const WORKER_URL = new URL(
  `./internal/sqlite-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`,
  import.meta.url,
);

interface Capture {
  id: string;
  dir: string;
  records: CapturedRecord[];
  byName: Map<string, CapturedRecord>;
  skipped: SkippedRecord[];
}

/** Opens a `sqlite` connector. No I/O happens until the first call. Throws INVALID_CONFIG. */
export function createSqliteSource(config: SqliteSourceConfig): SourceConnector {
  return new SqliteSource(config);
}

class BodyError {
  readonly inner: unknown;
  constructor(inner: unknown) {
    this.inner = inner;
  }
}

class SqliteSource implements SourceConnector {
  readonly type = 'sqlite' as const;
  readonly binding: string;
  readonly namespace: string;
  readonly description: string;
  readonly rangeRead = true;
  readonly #path: string;
  readonly #workDir: string;
  readonly #ceiling: number;
  #capture: Promise<Capture> | undefined;
  #target: Database.Database | undefined;
  #writes: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(config: SqliteSourceConfig) {
    if (typeof config?.path !== 'string' || config.path.length === 0 || config.path.includes('\u0000')) {
      throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'sqlite source: path must be a database file path');
    }
    if (config.workDir !== undefined && (typeof config.workDir !== 'string' || config.workDir.length === 0)) {
      throw new SourceError('ERR_SOURCE_INVALID_CONFIG', 'sqlite source: workDir must be a directory path');
    }
    this.#path = resolve(config.path);
    this.#workDir = resolve(config.workDir ?? tmpdir());
    this.binding = bindingOf(config.binding, 'sqlite');
    this.#ceiling = maxRecordBytesOf(config.maxRecordBytes);
    this.namespace = this.#path;
    this.description = `sqlite:${this.#path}`;
  }

  #checkOpen(): void {
    if (this.#closed) throw new SourceError('ERR_SOURCE_CLOSED', `${this.description}: connector is closed`);
  }

  #captured(): Promise<Capture> {
    this.#checkOpen();
    this.#capture ??= this.#runCapture().catch((err: unknown) => {
      this.#capture = undefined;
      throw err;
    });
    return this.#capture;
  }

  async #runCapture(): Promise<Capture> {
    let dir: string;
    try {
      dir = await mkdtemp(join(this.#workDir, 'coffer-sqlite-'));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new SourceError(
        'ERR_SOURCE_READ',
        `${this.description}: cannot create a capture directory (${code})`,
        {
          sourceCode: code,
        },
      );
    }
    let out: CaptureResult | CaptureFailure;
    try {
      out = await new Promise<CaptureResult | CaptureFailure>((resolvePromise, reject) => {
        const worker = new Worker(WORKER_URL, { workerData: { sourcePath: this.#path, dir } });
        let settled = false;
        worker.once('message', (msg: CaptureResult | CaptureFailure) => {
          settled = true;
          resolvePromise(msg);
        });
        worker.once('error', () => {
          if (!settled)
            reject(new SourceError('ERR_SOURCE_READ', `${this.description}: capture worker failed`));
        });
        worker.once('exit', (code) => {
          if (!settled)
            reject(
              new SourceError('ERR_SOURCE_READ', `${this.description}: capture worker exited (${code})`),
            );
        });
      });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    if ('failed' in out) {
      await rm(dir, { recursive: true, force: true });
      throw this.#captureError(out);
    }
    const byName = new Map(out.records.map((r) => [r.name, r]));
    return {
      id: randomBytes(9).toString('base64url'),
      dir,
      records: out.records,
      byName,
      skipped: out.skipped.map((s) => ({ skipped: true as const, name: s.name, reason: s.reason })),
    };
  }

  #captureError(f: CaptureFailure): SourceError {
    const { code, stage } = f;
    const opts = { sourceCode: code };
    if (code === 'ENOENT') {
      return new SourceError(
        'ERR_SOURCE_RESOURCE_MISSING',
        `${this.description}: database file does not exist`,
        opts,
      );
    }
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      return new SourceError(
        'ERR_SOURCE_THROTTLED',
        `${this.description}: database stayed locked (${code})`,
        opts,
      );
    }
    if (stage === 'open' && (code === 'EACCES' || code === 'EPERM' || code.startsWith('SQLITE_CANTOPEN'))) {
      return new SourceError(
        'ERR_SOURCE_BINDING',
        `${this.description}: database cannot be opened (${code})`,
        opts,
      );
    }
    return new SourceError(
      'ERR_SOURCE_READ',
      `${this.description}: capture failed at ${stage} (${code})`,
      opts,
    );
  }

  #info(r: CapturedRecord, capture: Capture): SourceRecordInfo {
    return {
      name: r.name,
      size: r.size,
      sourceType: 'sqlite',
      binding: this.binding,
      namespace: this.namespace,
      metadata: { ...r.metadata, captureId: capture.id },
    };
  }

  async list(options: ListOptions = {}): Promise<SourcePage> {
    const pageSize = pageSizeOf(options);
    let start = 0;
    let capture: Capture;
    if (options.cursor === undefined) {
      capture = await this.#captured();
    } else {
      const [id, index] = decodeCursor('sqlite', options.cursor).split(':');
      capture = await this.#captured();
      start = Number(index);
      if (id !== capture.id || !Number.isSafeInteger(start) || start < 0) {
        throw new SourceError(
          'ERR_SOURCE_INVALID_CURSOR',
          `${this.description}: the cursor belongs to another capture; restart the listing`,
        );
      }
    }
    // Entries: records (schema first, then tables in schema order), then skipped tables.
    const entries: (SourceRecordInfo | SkippedRecord)[] = [
      ...capture.records.map((r) => this.#info(r, capture)),
      ...capture.skipped,
    ];
    const page = entries.slice(start, start + pageSize);
    const next = start + page.length;
    return {
      records: page.filter((e): e is SourceRecordInfo => !('skipped' in e)),
      skipped: page.filter((e): e is SkippedRecord => 'skipped' in e),
      ...(next < entries.length ? { cursor: encodeCursor('sqlite', `${capture.id}:${next}`) } : {}),
    };
  }

  enumerate(options?: EnumerateOptions): AsyncIterable<SourceRecordInfo | SkippedRecord> {
    return enumeratePages((o) => this.list(o), this.description, options);
  }

  async #open(name: string): Promise<{ handle: FileHandle; size: number }> {
    const capture = await this.#captured();
    const r = capture.byName.get(name);
    if (r === undefined) {
      throw new SourceError(
        'ERR_SOURCE_RECORD_VANISHED',
        `${this.description}: no record ${quoteName(name)} in the capture`,
        {
          record: name,
        },
      );
    }
    if (r.size > this.#ceiling) throw overCeiling(name, r.size, this.#ceiling);
    try {
      return { handle: await open(r.file, 'r'), size: r.size };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new SourceError(
        'ERR_SOURCE_READ',
        `${this.description}: capture file of ${quoteName(name)} unreadable (${code})`,
        {
          record: name,
          sourceCode: code,
        },
      );
    }
  }

  async read(name: string): Promise<AsyncIterable<Uint8Array>> {
    const { handle } = await this.#open(name);
    const description = this.description;
    return (async function* () {
      try {
        for (;;) {
          const buf = Buffer.allocUnsafe(READ_CHUNK);
          const { bytesRead } = await handle.read(buf, 0, READ_CHUNK, null);
          if (bytesRead === 0) return;
          yield buf.subarray(0, bytesRead);
        }
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'error';
        throw new SourceError('ERR_SOURCE_READ', `${description}: read ${quoteName(name)} failed (${code})`, {
          record: name,
          sourceCode: code,
        });
      } finally {
        await handle.close().catch(() => {});
      }
    })();
  }

  async readRange(name: string, start: number, endInclusive: number): Promise<Uint8Array> {
    const range = clampRange(start, endInclusive, Number.MAX_SAFE_INTEGER);
    const { handle, size } = await this.#open(name);
    try {
      const r = clampRange(range![0], range![1], size);
      if (r === null) return new Uint8Array(0);
      const length = r[1] - r[0] + 1;
      const buf = Buffer.allocUnsafe(length);
      let got = 0;
      while (got < length) {
        const { bytesRead } = await handle.read(buf, got, length - got, r[0] + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return buf.subarray(0, got);
    } catch (err) {
      if (isSourceError(err)) throw err;
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      throw new SourceError(
        'ERR_SOURCE_READ',
        `${this.description}: read ${quoteName(name)} failed (${code})`,
        {
          record: name,
          sourceCode: code,
        },
      );
    } finally {
      await handle.close().catch(() => {});
    }
  }

  /** The restore target database, opened (and created) on first use. */
  #targetDb(): Database.Database {
    this.#checkOpen();
    if (this.#target !== undefined) return this.#target;
    try {
      mkdirSync(dirname(this.#path), { recursive: true, mode: 0o755 });
      const db = new Database(this.#path);
      db.pragma('busy_timeout = 30000');
      db.pragma('foreign_keys = OFF');
      this.#target = db;
      return db;
    } catch (err) {
      throw this.#writeError(err, undefined, 'open');
    }
  }

  #writeError(err: unknown, name: string | undefined, op: string): SourceError {
    if (isSourceError(err)) return err;
    const raw = (err as { code?: unknown })?.code;
    const code = typeof raw === 'string' ? raw : 'error';
    const opts = { ...(name === undefined ? {} : { record: name }), sourceCode: code };
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      return new SourceError(
        'ERR_SOURCE_THROTTLED',
        `${this.description}: database stayed locked (${code})`,
        opts,
      );
    }
    if (op === 'open') {
      return new SourceError(
        'ERR_SOURCE_BINDING',
        `${this.description}: target cannot be opened (${code})`,
        opts,
      );
    }
    const what = name === undefined ? '' : ` ${quoteName(name)}`;
    return new SourceError('ERR_SOURCE_WRITE', `${this.description}: ${op}${what} failed (${code})`, opts);
  }

  async exists(name: string): Promise<boolean> {
    this.#checkOpen();
    try {
      await stat(this.#path);
    } catch {
      return false;
    }
    const table = tableOfRecord(name);
    if (name !== SCHEMA_RECORD && table === null) return false;
    try {
      const db = this.#targetDb();
      if (table === null) {
        return (
          db
            .prepare(
              "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' LIMIT 1",
            )
            .get() !== undefined
        );
      }
      const row = db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = ? COLLATE NOCASE")
        .get(table) as { name: string } | undefined;
      if (row === undefined) return false;
      return db.prepare(`SELECT 1 FROM ${quoteIdent(row.name)} LIMIT 1`).get() !== undefined;
    } catch (err) {
      throw this.#writeError(err, name, 'check');
    }
  }

  write(name: string, body: RecordBody, _metadata?: Record<string, unknown>): Promise<WriteResult> {
    // One record at a time: a table's transaction spans awaits on its body stream.
    const run = this.#writes.then(() => this.#write(name, body));
    this.#writes = run.catch(() => {});
    return run;
  }

  async #write(name: string, body: RecordBody): Promise<WriteResult> {
    const table = tableOfRecord(name);
    if (name !== SCHEMA_RECORD && table === null) {
      throw new SourceError(
        'ERR_SOURCE_INVALID_RECORD',
        `${this.description}: ${quoteName(name)} is not a record of a sqlite source`,
        {
          record: name,
        },
      );
    }
    const openTarget = () => this.#targetDb();
    const bodyError = (err: unknown) => new BodyError(err);
    try {
      if (table === null) await restoreSchema(openTarget, body, name, bodyError);
      else await restoreTable(openTarget, body, name, table, bodyError);
      return { written: true };
    } catch (err) {
      if (err instanceof BodyError) throw err.inner;
      throw this.#writeError(err, name, 'write');
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writes;
    this.#target?.close();
    this.#target = undefined;
    const capture = this.#capture;
    this.#capture = undefined;
    if (capture !== undefined) {
      const c = await capture.catch(() => undefined);
      if (c !== undefined) await rm(c.dir, { recursive: true, force: true });
    }
  }
}
