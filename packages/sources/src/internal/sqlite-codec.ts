/**
 * The record formats of the `sqlite` connector (normative; see the package README):
 *
 * `schema.json`: one JSON object, `format: "coffer-sqlite-schema/1"` (SqliteSchema below).
 *
 * `tables/<encodeURIComponent(table)>.jsonl`: UTF-8 lines. Line 1 is the table header
 * (`format: "coffer-sqlite-table/1"`, TableHeader below) with everything needed to recreate the
 * table on its own; each further line is one row, a JSON array with one cell per header column:
 *   NULL -> null
 *   INTEGER -> a JSON number when it is a safe integer, else {"i":"<decimal>"}
 *   REAL -> a JSON number when it has a fraction (so it cannot be mistaken for an INTEGER), else
 *           {"r":<number>} or {"r":"Infinity"|"-Infinity"|"-0"}
 *   TEXT -> a JSON string
 *   BLOB -> {"b":"<base64>"}
 * Storage classes survive exactly: SQLite's dynamic typing means a column can hold any of them.
 */

export const SCHEMA_FORMAT = 'coffer-sqlite-schema/1';
export const TABLE_FORMAT = 'coffer-sqlite-table/1';
export const SCHEMA_RECORD = 'schema.json';
export const TABLE_PREFIX = 'tables/';
export const TABLE_SUFFIX = '.jsonl';

export interface ForeignKeyInfo {
  /** The referenced (parent) table. */
  parent: string;
  from: string[];
  to: (string | null)[];
}

export interface TableHeader {
  format: typeof TABLE_FORMAT;
  table: string;
  /** The columns each row line holds, in order (generated columns are left out). */
  columns: string[];
  /** The CREATE TABLE statement. */
  sql: string;
  withoutRowid: boolean;
  /** CREATE INDEX statements (automatic indexes of constraints are part of `sql`). */
  indexes: string[];
  /** CREATE TRIGGER statements; created after the rows so they do not fire on restore. */
  triggers: string[];
  /** The AUTOINCREMENT counter (sqlite_sequence), as a decimal string, or null. */
  autoincrement: string | null;
  foreignKeys: ForeignKeyInfo[];
  /** Row lines that follow. */
  rows: number;
}

export interface SchemaTable {
  name: string;
  record: string;
  sql: string;
  withoutRowid: boolean;
  strict: boolean;
  columns: string[];
  foreignKeys: ForeignKeyInfo[];
  indexes: string[];
  triggers: string[];
  rows: number;
}

export interface SqliteSchema {
  format: typeof SCHEMA_FORMAT;
  sqliteVersion: string;
  userVersion: number;
  applicationId: number;
  tables: SchemaTable[];
  views: { name: string; sql: string }[];
  /** INSTEAD OF triggers on views. */
  viewTriggers: string[];
  /** Virtual tables: their definitions only (contents are not captured; rebuild after restore). */
  virtualTables: { name: string; sql: string }[];
  /** Tables and objects not captured, with why. */
  skipped: { name: string; reason: string }[];
}

/** The record name of a table. */
export function tableRecordName(table: string): string {
  return `${TABLE_PREFIX}${encodeURIComponent(table)}${TABLE_SUFFIX}`;
}

/** The table a record name stands for, or null when it is not a table record name. */
export function tableOfRecord(name: string): string | null {
  if (!name.startsWith(TABLE_PREFIX) || !name.endsWith(TABLE_SUFFIX)) return null;
  const middle = name.slice(TABLE_PREFIX.length, name.length - TABLE_SUFFIX.length);
  if (middle.length === 0) return null;
  try {
    return decodeURIComponent(middle);
  } catch {
    return null;
  }
}

/** Quotes an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER);
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** Encodes one value read with safeIntegers(true) (integers arrive as bigint). */
export function encodeCell(v: unknown): unknown {
  if (v === null || typeof v === 'string') return v;
  if (typeof v === 'bigint') return v >= MIN_SAFE && v <= MAX_SAFE ? Number(v) : { i: v.toString() };
  if (typeof v === 'number') {
    if (Object.is(v, -0)) return { r: '-0' };
    if (!Number.isFinite(v)) return { r: String(v) };
    return Number.isInteger(v) ? { r: v } : v;
  }
  if (v instanceof Uint8Array)
    return { b: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  throw new TypeError('unexpected SQLite value');
}

/** Decodes one cell for binding: INTEGER as bigint, REAL as number, BLOB as Buffer. Throws TypeError. */
export function decodeCell(c: unknown): bigint | number | string | Buffer | null {
  if (c === null || typeof c === 'string') return c;
  if (typeof c === 'number') return Number.isInteger(c) ? BigInt(c) : c;
  if (typeof c === 'object') {
    const o = c as Record<string, unknown>;
    const keys = Object.keys(o);
    if (keys.length === 1) {
      if (typeof o.i === 'string' && /^-?\d{1,20}$/.test(o.i)) return BigInt(o.i);
      if (typeof o.r === 'number') return o.r;
      if (o.r === 'Infinity' || o.r === '-Infinity' || o.r === '-0') return Number(o.r);
      if (typeof o.b === 'string') return Buffer.from(o.b, 'base64');
    }
  }
  throw new TypeError('malformed cell');
}

/** Checks a parsed header line; returns it typed, or null when it is not one. */
export function asTableHeader(v: unknown): TableHeader | null {
  if (typeof v !== 'object' || v === null) return null;
  const h = v as Record<string, unknown>;
  const strings = (x: unknown) => Array.isArray(x) && x.every((s) => typeof s === 'string');
  if (
    h.format !== TABLE_FORMAT ||
    typeof h.table !== 'string' ||
    typeof h.sql !== 'string' ||
    !strings(h.columns) ||
    !strings(h.indexes) ||
    !strings(h.triggers) ||
    !Number.isSafeInteger(h.rows) ||
    (h.autoincrement !== null &&
      (typeof h.autoincrement !== 'string' || !/^-?\d{1,20}$/.test(h.autoincrement)))
  ) {
    return null;
  }
  return v as TableHeader;
}

/** Checks a parsed schema record; returns it typed, or null. */
export function asSchema(v: unknown): SqliteSchema | null {
  if (typeof v !== 'object' || v === null) return null;
  const s = v as Record<string, unknown>;
  if (s.format !== SCHEMA_FORMAT || !Array.isArray(s.tables) || !Array.isArray(s.views)) return null;
  for (const t of s.tables as unknown[]) {
    const tt = t as Record<string, unknown>;
    if (typeof tt?.name !== 'string' || typeof tt.sql !== 'string') return null;
  }
  for (const w of s.views as unknown[]) {
    const ww = w as Record<string, unknown>;
    if (typeof ww?.name !== 'string' || typeof ww.sql !== 'string') return null;
  }
  if (!Array.isArray(s.viewTriggers ?? []) || !Array.isArray(s.virtualTables ?? [])) return null;
  return v as SqliteSchema;
}
