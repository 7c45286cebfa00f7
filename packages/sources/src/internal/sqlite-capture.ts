/**
 * The consistent capture of a live SQLite database (runs in a worker thread, see sqlite-worker.ts):
 *
 * 1. Open the source read-only (busy timeout 30 s) and `VACUUM INTO` a private snapshot file. The
 *    copy is made inside one read transaction, so it is a transaction-consistent point in time
 *    while other processes keep writing (in WAL mode writers are never blocked; in rollback-journal
 *    mode they wait for the copy through their own busy timeout). Unlike the page-by-page backup
 *    API, a copy cannot be restarted forever by a continuous writer.
 * 2. Close the source. Everything after this reads only the snapshot.
 * 3. Read the schema: tables (with columns, foreign keys, indexes, triggers, AUTOINCREMENT
 *    counters), views, view triggers, virtual tables (definitions only), user_version,
 *    application_id.
 * 4. Write one `tables/<name>.jsonl` file per table (header line, then rows in rowid or primary-key
 *    order) and `schema.json`, then delete the snapshot.
 */
import { closeSync, openSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  encodeCell,
  type ForeignKeyInfo,
  quoteIdent,
  SCHEMA_FORMAT,
  SCHEMA_RECORD,
  type SchemaTable,
  type SqliteSchema,
  TABLE_FORMAT,
  type TableHeader,
  tableRecordName,
} from './sqlite-codec.ts';

export interface CapturedRecord {
  name: string;
  file: string;
  size: number;
  metadata: Record<string, unknown>;
}

export interface CaptureResult {
  records: CapturedRecord[];
  skipped: { name: string; reason: string }[];
}

/** A failure with the SQLite or errno code only (the message of the dependency stays behind). */
export interface CaptureFailure {
  failed: true;
  stage: 'open' | 'snapshot' | 'read' | 'write';
  code: string;
}

const FLUSH_BYTES = 1024 * 1024;

function codeOf(err: unknown): string {
  const e = err as { code?: unknown };
  return typeof e?.code === 'string' ? e.code : 'error';
}

/** Runs the capture into `dir` (an empty private directory). Returns the records or a failure. */
export function captureDatabase(sourcePath: string, dir: string): CaptureResult | CaptureFailure {
  const snapshot = join(dir, 'snapshot.sqlite');
  let stage: CaptureFailure['stage'] = 'open';
  try {
    statSync(sourcePath); // ENOENT / EACCES before SQLite turns them into CANTOPEN
    const src = new Database(sourcePath, { readonly: true, fileMustExist: true });
    try {
      src.pragma('busy_timeout = 30000');
      stage = 'snapshot';
      src.prepare('VACUUM INTO ?').run(snapshot);
    } finally {
      src.close();
    }
    stage = 'read';
    const db = new Database(snapshot, { readonly: true, fileMustExist: true });
    try {
      return readSnapshot(db, dir, () => {
        stage = 'write';
      });
    } finally {
      db.close();
    }
  } catch (err) {
    return { failed: true, stage, code: codeOf(err) };
  } finally {
    rmSync(snapshot, { force: true });
  }
}

interface TableListRow {
  name: string;
  type: string;
  wr: number;
  strict: number;
}

function readSnapshot(db: Database.Database, dir: string, writing: () => void): CaptureResult {
  const capturedAt = new Date().toISOString();
  const objects = db
    .prepare(
      'SELECT type, name, tbl_name AS tbl, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid',
    )
    .all() as { type: string; name: string; tbl: string; sql: string }[];
  const kinds = new Map<string, TableListRow>();
  for (const row of db
    .prepare("SELECT name, type, wr, strict FROM pragma_table_list WHERE schema = 'main'")
    .all()) {
    const r = row as TableListRow;
    kinds.set(r.name, r);
  }
  const sequences = new Map<string, string>();
  if (kinds.has('sqlite_sequence')) {
    const seq = db.prepare('SELECT name, seq FROM sqlite_sequence').safeIntegers(true).all() as {
      name: string;
      seq: bigint | null;
    }[];
    for (const s of seq) if (s.seq !== null) sequences.set(s.name, s.seq.toString());
  }
  const schema: SqliteSchema = {
    format: SCHEMA_FORMAT,
    sqliteVersion: (db.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v,
    userVersion: Number(db.pragma('user_version', { simple: true })),
    applicationId: Number(db.pragma('application_id', { simple: true })),
    tables: [],
    views: [],
    viewTriggers: [],
    virtualTables: [],
    skipped: [],
  };
  const records: CapturedRecord[] = [];
  const skipped: { name: string; reason: string }[] = [];
  const views = new Set(objects.filter((o) => o.type === 'view').map((o) => o.name));
  for (const o of objects) {
    if (o.type === 'view') schema.views.push({ name: o.name, sql: o.sql });
    if (o.type === 'trigger' && views.has(o.tbl)) schema.viewTriggers.push(o.sql);
  }
  let fileNo = 0;
  for (const o of objects) {
    if (o.type !== 'table' || o.name.startsWith('sqlite_')) continue;
    const kind = kinds.get(o.name);
    if (kind?.type === 'virtual') {
      schema.virtualTables.push({ name: o.name, sql: o.sql });
      const reason =
        'virtual table: definition kept in schema.json, contents not captured (rebuild after restore)';
      schema.skipped.push({ name: o.name, reason });
      skipped.push({ name: tableRecordName(o.name), reason });
      continue;
    }
    if (kind?.type === 'shadow') continue; // a virtual table's own storage: recreated with it
    const xinfo = db.prepare('SELECT name, hidden FROM pragma_table_xinfo(?)').all(o.name) as {
      name: string;
      hidden: number;
    }[];
    // hidden 2 and 3 are generated columns: SQLite computes them, they cannot be inserted.
    const columns = xinfo.filter((c) => c.hidden === 0).map((c) => c.name);
    const fkRows = db
      .prepare(
        'SELECT id, "table" AS parent, "from" AS src, "to" AS dst FROM pragma_foreign_key_list(?) ORDER BY id, seq',
      )
      .all(o.name) as {
      id: number;
      parent: string;
      src: string;
      dst: string | null;
    }[];
    const fks = new Map<number, ForeignKeyInfo>();
    for (const r of fkRows) {
      let fk = fks.get(r.id);
      if (fk === undefined) {
        fk = { parent: r.parent, from: [], to: [] };
        fks.set(r.id, fk);
      }
      fk.from.push(r.src);
      fk.to.push(r.dst);
    }
    const withoutRowid = kind?.wr === 1;
    const table: SchemaTable = {
      name: o.name,
      record: tableRecordName(o.name),
      sql: o.sql,
      withoutRowid,
      strict: kind?.strict === 1,
      columns,
      foreignKeys: [...fks.values()],
      indexes: objects.filter((x) => x.type === 'index' && x.tbl === o.name).map((x) => x.sql),
      triggers: objects.filter((x) => x.type === 'trigger' && x.tbl === o.name).map((x) => x.sql),
      rows: Number((db.prepare(`SELECT count(*) AS n FROM ${quoteIdent(o.name)}`).get() as { n: number }).n),
    };
    schema.tables.push(table);
    const header: TableHeader = {
      format: TABLE_FORMAT,
      table: o.name,
      columns,
      sql: o.sql,
      withoutRowid,
      indexes: table.indexes,
      triggers: table.triggers,
      autoincrement: sequences.get(o.name) ?? null,
      foreignKeys: table.foreignKeys,
      rows: table.rows,
    };
    const file = join(dir, `table-${fileNo++}.jsonl`);
    writing();
    writeTable(db, header, file);
    records.push({
      name: table.record,
      file,
      size: statSync(file).size,
      metadata: {
        kind: 'table',
        table: o.name,
        columns,
        rows: table.rows,
        withoutRowid,
        parents: [...new Set(table.foreignKeys.map((f) => f.parent))],
        foreignKeys: table.foreignKeys,
        capturedAt,
      },
    });
  }
  const schemaFile = join(dir, 'schema.json');
  writing();
  writeFileSync(schemaFile, `${JSON.stringify(schema)}\n`, { mode: 0o600 });
  records.unshift({
    name: SCHEMA_RECORD,
    file: schemaFile,
    size: statSync(schemaFile).size,
    metadata: { kind: 'schema', tables: schema.tables.map((t) => t.name), capturedAt },
  });
  return { records, skipped };
}

function writeTable(db: Database.Database, header: TableHeader, file: string): void {
  const fd = openSync(file, 'wx', 0o600);
  try {
    let buf: string[] = [`${JSON.stringify(header)}\n`];
    let pending = buf[0]!.length;
    const cols = header.columns.map(quoteIdent).join(', ');
    const order = header.withoutRowid ? '' : ' ORDER BY rowid';
    const stmt = db
      .prepare(`SELECT ${cols.length > 0 ? cols : 'NULL'} FROM ${quoteIdent(header.table)}${order}`)
      .raw(true)
      .safeIntegers(true);
    for (const row of stmt.iterate() as Iterable<unknown[]>) {
      const line = `${JSON.stringify(header.columns.length > 0 ? row.map(encodeCell) : [])}\n`;
      buf.push(line);
      pending += line.length;
      if (pending >= FLUSH_BYTES) {
        writeSync(fd, buf.join(''));
        buf = [];
        pending = 0;
      }
    }
    if (buf.length > 0) writeSync(fd, buf.join(''));
  } finally {
    closeSync(fd);
  }
}
