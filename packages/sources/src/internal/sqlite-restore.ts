/**
 * Restore side of the `sqlite` connector: writes `schema.json` and `tables/<name>.jsonl` records
 * into a database file, meant to be a fresh one (the `d1Tables` restore of the specification).
 *
 * - `schema.json` creates every table (empty), the views, the INSTEAD OF triggers of views and the
 *   virtual tables (empty), and sets user_version and application_id. A table that already exists
 *   is refused (ERR_SOURCE_TARGET_EXISTS): restore never merges into existing tables.
 * - A table record is self-contained: it creates its table when absent (so a table subset can be
 *   restored without the schema record, `createOnly`), refuses a table that already has rows,
 *   inserts the rows, then creates the table's indexes and triggers (after the rows, so triggers do
 *   not fire on restored rows) and sets its AUTOINCREMENT counter. Everything for one table happens
 *   in one transaction: a failed or truncated record leaves no trace.
 * - The SQL of a record is archive data, never trusted: each string must be the one CREATE
 *   statement its entry stands for, checked before the record touches the target (the target file
 *   is not even opened for a refused record; sqlite-statements.ts, ERR_SOURCE_UNSAFE_STATEMENT).
 * - Foreign keys are not enforced while restoring (a subset may lack parent tables; the restore
 *   plan reports them as dependency warnings from the records' metadata).
 */
import type Database from 'better-sqlite3';
import { quoteName, SourceError } from '../errors.ts';
import type { RecordBody } from '../types.ts';
import { chunksOf } from './common.ts';
import { asSchema, asTableHeader, decodeCell, quoteIdent, type SqliteSchema } from './sqlite-codec.ts';
import { checkSchemaStatements, runSchemaStatement } from './sqlite-statements.ts';

const MAX_LINE = 512 * 1024 * 1024;
const MAX_SCHEMA = 64 * 1024 * 1024;

function invalid(name: string, why: string): SourceError {
  return new SourceError('ERR_SOURCE_INVALID_RECORD', `sqlite record ${quoteName(name)}: ${why}`, {
    record: name,
  });
}

/** Splits a body into lines (without the '\n'). */
async function* linesOf(
  body: RecordBody,
  name: string,
  onBodyError: (err: unknown) => unknown,
): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let rest = '';
  const it = chunksOf(body)[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<Uint8Array>;
    try {
      next = await it.next();
    } catch (err) {
      throw onBodyError(err);
    }
    let text: string;
    try {
      text = next.done === true ? decoder.decode() : decoder.decode(next.value, { stream: true });
    } catch {
      throw invalid(name, 'not valid UTF-8');
    }
    rest += text;
    let nl = rest.indexOf('\n');
    while (nl !== -1) {
      yield rest.slice(0, nl);
      rest = rest.slice(nl + 1);
      nl = rest.indexOf('\n');
    }
    if (rest.length > MAX_LINE) throw invalid(name, 'line too long');
    if (next.done === true) break;
  }
  if (rest.length > 0) yield rest;
}

function objectExists(db: Database.Database, name: string): { type: string } | undefined {
  return db.prepare('SELECT type FROM sqlite_schema WHERE name = ? COLLATE NOCASE').get(name) as
    | { type: string }
    | undefined;
}

function hasRows(db: Database.Database, table: string): boolean {
  return db.prepare(`SELECT 1 FROM ${quoteIdent(table)} LIMIT 1`).get() !== undefined;
}

/** Runs `fn` inside BEGIN IMMEDIATE .. COMMIT, rolling back on any error. */
async function inTransaction<T>(db: Database.Database, fn: () => Promise<T>): Promise<T> {
  db.exec('BEGIN IMMEDIATE');
  try {
    const out = await fn();
    db.exec('COMMIT');
    return out;
  } catch (err) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw err;
  }
}

/** Writes the schema record. */
export async function restoreSchema(
  openTarget: () => Database.Database,
  body: RecordBody,
  name: string,
  onBodyError: (err: unknown) => unknown,
): Promise<void> {
  let text = '';
  for await (const line of linesOf(body, name, onBodyError)) {
    text += `${line}\n`;
    if (text.length > MAX_SCHEMA) throw invalid(name, 'schema record too large');
  }
  let schema: SqliteSchema | null;
  try {
    schema = asSchema(JSON.parse(text));
  } catch {
    schema = null;
  }
  if (schema === null) throw invalid(name, 'not a coffer-sqlite-schema/1 record');
  const s = schema;
  // Every statement is checked before the first one runs (sqlite-statements.ts).
  const tables = checkSchemaStatements(
    name,
    s.tables.map((t) => ({ sql: t.sql, kind: 'table' as const, name: t.name })),
  );
  const virtualTables = checkSchemaStatements(
    name,
    (s.virtualTables ?? []).map((v) => ({ sql: v.sql, kind: 'virtual-table' as const, name: v.name })),
  );
  const views = checkSchemaStatements(
    name,
    s.views.map((v) => ({ sql: v.sql, kind: 'view' as const, name: v.name })),
  );
  const viewTriggers = checkSchemaStatements(
    name,
    (s.viewTriggers ?? []).map((sql) => ({ sql: String(sql), kind: 'trigger' as const })),
  );
  // Opened only now: a refused record leaves no target file behind.
  const db = openTarget();
  await inTransaction(db, async () => {
    for (const t of tables) {
      if (objectExists(db, t.creates) !== undefined) {
        throw new SourceError(
          'ERR_SOURCE_TARGET_EXISTS',
          `sqlite: table ${quoteName(t.creates)} already exists in the target`,
          {
            record: name,
          },
        );
      }
      runSchemaStatement(db, name, t);
    }
    for (const v of virtualTables)
      if (objectExists(db, v.creates) === undefined) runSchemaStatement(db, name, v);
    for (const v of views) if (objectExists(db, v.creates) === undefined) runSchemaStatement(db, name, v);
    for (const trigger of viewTriggers) runSchemaStatement(db, name, trigger);
    if (Number.isSafeInteger(s.userVersion)) db.pragma(`user_version = ${s.userVersion | 0}`);
    if (Number.isSafeInteger(s.applicationId)) db.pragma(`application_id = ${s.applicationId | 0}`);
  });
}

/** Writes one table record; returns the number of rows inserted. */
export async function restoreTable(
  openTarget: () => Database.Database,
  body: RecordBody,
  name: string,
  expectedTable: string,
  onBodyError: (err: unknown) => unknown,
): Promise<number> {
  const lines = linesOf(body, name, onBodyError);
  const first = await lines.next();
  if (first.done === true) throw invalid(name, 'empty record');
  let parsed: unknown;
  try {
    parsed = JSON.parse(first.value);
  } catch {
    parsed = null;
  }
  const header = asTableHeader(parsed);
  if (header === null) throw invalid(name, 'first line is not a coffer-sqlite-table/1 header');
  if (header.table.toLowerCase() !== expectedTable.toLowerCase()) {
    throw invalid(name, 'header names another table');
  }
  // Every statement is checked before the first one runs (sqlite-statements.ts).
  const create = checkSchemaStatements(name, [{ sql: header.sql, kind: 'table', name: header.table }])[0]!;
  const indexes = checkSchemaStatements(
    name,
    header.indexes.map((sql) => ({ sql, kind: 'index' as const, table: header.table })),
  );
  const triggers = checkSchemaStatements(
    name,
    header.triggers.map((sql) => ({ sql, kind: 'trigger' as const, table: header.table })),
  );
  const db = openTarget();
  return inTransaction(db, async () => {
    const existing = objectExists(db, header.table);
    if (existing === undefined) runSchemaStatement(db, name, create);
    else if (existing.type !== 'table' || hasRows(db, header.table)) {
      throw new SourceError(
        'ERR_SOURCE_TARGET_EXISTS',
        `sqlite: table ${quoteName(header.table)} already exists in the target with rows`,
        { record: name },
      );
    }
    const cols = header.columns;
    const insert =
      cols.length > 0
        ? db.prepare(
            `INSERT INTO ${quoteIdent(header.table)} (${cols.map(quoteIdent).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`,
          )
        : db.prepare(`INSERT INTO ${quoteIdent(header.table)} DEFAULT VALUES`);
    let rows = 0;
    for await (const line of lines) {
      if (line.length === 0) continue;
      let cells: unknown;
      try {
        cells = JSON.parse(line);
      } catch {
        throw invalid(name, `row ${rows + 1} is not JSON`);
      }
      if (!Array.isArray(cells) || cells.length !== cols.length)
        throw invalid(name, `row ${rows + 1} has the wrong shape`);
      let values: ReturnType<typeof decodeCell>[];
      try {
        values = cells.map(decodeCell);
      } catch {
        throw invalid(name, `row ${rows + 1} has a malformed cell`);
      }
      insert.run(...values);
      rows++;
    }
    if (rows !== header.rows)
      throw invalid(name, `holds ${rows} rows, its header says ${header.rows} (truncated?)`);
    for (const index of indexes) runSchemaStatement(db, name, index);
    for (const trigger of triggers) runSchemaStatement(db, name, trigger);
    if (header.autoincrement !== null) {
      const seq = BigInt(header.autoincrement);
      const updated = db.prepare('UPDATE sqlite_sequence SET seq = ? WHERE name = ?').run(seq, header.table);
      if (updated.changes === 0)
        db.prepare('INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)').run(header.table, seq);
    }
    return rows;
  });
}
