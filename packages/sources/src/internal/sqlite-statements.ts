/**
 * The only SQL a SQLite restore takes from an archive is the schema text SQLite itself stored in
 * `sqlite_schema`: one CREATE statement per object. An archive is data, and a hostile or corrupt
 * one could carry anything in those strings (`ATTACH '/elsewhere' AS x`, `PRAGMA writable_schema`,
 * a CREATE followed by more statements). So each string is checked before anything runs:
 *
 * - it holds exactly one statement (whatever follows it is whitespace, comments or `;`), which
 *   better-sqlite3's `prepare` checks again when the statement runs (it refuses a non-empty tail);
 * - that statement is the CREATE its entry stands for (table, virtual table, index, view,
 *   trigger), main schema only (no TEMP, no other schema name), never `CREATE TABLE .. AS SELECT`;
 * - it creates the object the entry names (when the entry names one), and an index or trigger of
 *   a table record is on that table (checked after it runs, inside the record's transaction).
 *
 * A refusal is ERR_SOURCE_UNSAFE_STATEMENT, raised before the first statement of the record runs.
 */
import type Database from 'better-sqlite3';
import { quoteName, SourceError } from '../errors.ts';

export type SchemaKind = 'table' | 'virtual-table' | 'index' | 'view' | 'trigger';

interface Token {
  /** `word` (keyword or bare identifier), `id` (quoted identifier), `str`, `num`, `punct`. */
  type: 'word' | 'id' | 'str' | 'num' | 'punct' | 'other';
  /** Upper-cased for words; the unquoted name for identifiers; the character for punctuation. */
  value: string;
}

class Unsafe extends Error {}

/** SQLite's tokens, enough to find statement boundaries: comments, strings and quoted names. */
function tokenize(sql: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const n = sql.length;
  while (i < n) {
    const c = sql[i] as string;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl === -1 ? n : nl + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      // An unterminated comment runs to the end of the text, as in SQLite.
      i = end === -1 ? n : end + 2;
    } else if (c === "'" || c === '"' || c === '`' || c === '[') {
      const close = c === '[' ? ']' : c;
      let j = i + 1;
      let value = '';
      for (;;) {
        if (j >= n) throw new Unsafe('unterminated quoted text');
        if (sql[j] === close) {
          if (close !== ']' && sql[j + 1] === close) {
            value += close;
            j += 2;
            continue;
          }
          break;
        }
        value += sql[j];
        j++;
      }
      out.push({ type: c === "'" ? 'str' : 'id', value });
      i = j + 1;
    } else if (/[A-Za-z_\u0080-\uffff]/.test(c)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$\u0080-\uffff]/.test(sql[j] as string)) j++;
      out.push({ type: 'word', value: sql.slice(i, j).toUpperCase() });
      i = j;
    } else if (/[0-9]/.test(c)) {
      let j = i + 1;
      while (j < n && /[0-9A-Za-z_.]/.test(sql[j] as string)) j++;
      out.push({ type: 'num', value: sql.slice(i, j) });
      i = j;
    } else {
      out.push({ type: 'punct', value: c });
      i++;
    }
  }
  return out;
}

const isWord = (t: Token | undefined, w: string) => t?.type === 'word' && t.value === w;

/** The end of a CREATE TRIGGER body: the END that follows a `;` (as sqlite3_complete reads it). */
function triggerEnd(tokens: Token[], from: number): number {
  for (let k = from; k < tokens.length; k++) {
    if (isWord(tokens[k], 'END') && tokens[k - 1]?.value === ';' && tokens[k - 1]?.type === 'punct') {
      return k + 1;
    }
  }
  throw new Unsafe('trigger body without END');
}

/** Reads `[main .] name` at `k`; returns the name and the index after it. */
function objectName(tokens: Token[], k: number): { name: string; next: number } {
  const first = tokens[k];
  if (first === undefined || (first.type !== 'word' && first.type !== 'id' && first.type !== 'str'))
    throw new Unsafe('no object name');
  if (tokens[k + 1]?.type === 'punct' && tokens[k + 1]?.value === '.') {
    // SQLite may keep a `main.` qualifier in the stored text; any other schema is not this file.
    if (first.value.toLowerCase() !== 'main') throw new Unsafe('names another schema');
    const second = tokens[k + 2];
    if (second === undefined || (second.type !== 'word' && second.type !== 'id' && second.type !== 'str'))
      throw new Unsafe('no object name');
    return { name: second.value, next: k + 3 };
  }
  return { name: first.value, next: k + 1 };
}

/** Skips `IF NOT EXISTS` at `k`. */
function skipIfNotExists(tokens: Token[], k: number): number {
  if (isWord(tokens[k], 'IF') && isWord(tokens[k + 1], 'NOT') && isWord(tokens[k + 2], 'EXISTS'))
    return k + 3;
  return k;
}

interface Checked {
  /** The object the statement creates (as written, unquoted). */
  name: string;
  /** For an index: the table it is on. */
  on: string | null;
}

function check(sql: string, kind: SchemaKind): Checked {
  const tokens = tokenize(sql);
  if (!isWord(tokens[0], 'CREATE')) throw new Unsafe('not a CREATE statement');
  let k = 1;
  if (isWord(tokens[k], 'TEMP') || isWord(tokens[k], 'TEMPORARY')) throw new Unsafe('creates a TEMP object');
  let on: string | null = null;
  let name: string;
  switch (kind) {
    case 'table': {
      if (!isWord(tokens[k], 'TABLE')) throw new Unsafe('not a CREATE TABLE');
      ({ name, next: k } = objectName(tokens, skipIfNotExists(tokens, k + 1)));
      // `CREATE TABLE x AS SELECT` runs a query; sqlite_schema never stores that form.
      if (tokens[k]?.value !== '(' || tokens[k]?.type !== 'punct') throw new Unsafe('not a column list');
      break;
    }
    case 'virtual-table': {
      if (!isWord(tokens[k], 'VIRTUAL') || !isWord(tokens[k + 1], 'TABLE'))
        throw new Unsafe('not a CREATE VIRTUAL TABLE');
      ({ name, next: k } = objectName(tokens, skipIfNotExists(tokens, k + 2)));
      if (!isWord(tokens[k], 'USING')) throw new Unsafe('no USING clause');
      break;
    }
    case 'index': {
      if (isWord(tokens[k], 'UNIQUE')) k++;
      if (!isWord(tokens[k], 'INDEX')) throw new Unsafe('not a CREATE INDEX');
      ({ name, next: k } = objectName(tokens, skipIfNotExists(tokens, k + 1)));
      if (!isWord(tokens[k], 'ON')) throw new Unsafe('no ON clause');
      on = objectName(tokens, k + 1).name;
      break;
    }
    case 'view': {
      if (!isWord(tokens[k], 'VIEW')) throw new Unsafe('not a CREATE VIEW');
      ({ name, next: k } = objectName(tokens, skipIfNotExists(tokens, k + 1)));
      break;
    }
    case 'trigger': {
      if (!isWord(tokens[k], 'TRIGGER')) throw new Unsafe('not a CREATE TRIGGER');
      ({ name, next: k } = objectName(tokens, skipIfNotExists(tokens, k + 1)));
      let begin = k;
      while (begin < tokens.length && !isWord(tokens[begin], 'BEGIN')) begin++;
      if (begin === tokens.length) throw new Unsafe('trigger without BEGIN');
      k = triggerEnd(tokens, begin + 1);
      break;
    }
  }
  // One statement only: past its end, nothing but `;` (better-sqlite3 refuses a tail again).
  if (kind !== 'trigger') {
    while (k < tokens.length && !(tokens[k]?.type === 'punct' && tokens[k]?.value === ';')) k++;
  }
  for (; k < tokens.length; k++) {
    if (!(tokens[k]?.type === 'punct' && tokens[k]?.value === ';'))
      throw new Unsafe('more than one statement');
  }
  return { name, on };
}

export interface SchemaStatement {
  sql: string;
  kind: SchemaKind;
  /** The object the entry names; the statement must create exactly that one. */
  name?: string;
  /** For an index or trigger of a table record: the table it must be on. */
  table?: string;
}

const SCHEMA_TYPE: Record<SchemaKind, string> = {
  table: 'table',
  'virtual-table': 'table',
  index: 'index',
  view: 'view',
  trigger: 'trigger',
};

function refusal(record: string, s: SchemaStatement, why: string): SourceError {
  const what = s.name === undefined ? `a ${s.kind} entry` : `the ${s.kind} entry ${quoteName(s.name)}`;
  return new SourceError(
    'ERR_SOURCE_UNSAFE_STATEMENT',
    `sqlite record ${quoteName(record)}: ${what} is refused (${why}); a restore runs only the one CREATE statement each schema entry stands for`,
    { record },
  );
}

/**
 * Checks every statement of a record before any of them runs; returns the checked statements
 * with the object each one creates. Throws ERR_SOURCE_UNSAFE_STATEMENT.
 */
export function checkSchemaStatements(
  record: string,
  statements: SchemaStatement[],
): Array<SchemaStatement & { creates: string }> {
  return statements.map((s) => {
    let checked: Checked;
    try {
      checked = check(s.sql, s.kind);
    } catch (e) {
      if (e instanceof Unsafe) throw refusal(record, s, e.message);
      throw e;
    }
    if (s.name !== undefined && checked.name.toLowerCase() !== s.name.toLowerCase())
      throw refusal(record, s, 'creates another object than the entry names');
    if (s.kind === 'index' && s.table !== undefined && checked.on?.toLowerCase() !== s.table.toLowerCase())
      throw refusal(record, s, 'is on another table');
    return { ...s, creates: checked.name };
  });
}

/**
 * Runs one checked statement: `prepare` compiles exactly one statement and refuses a tail, and
 * the object it created must then be in sqlite_schema with the entry's type (and table).
 */
export function runSchemaStatement(
  db: Database.Database,
  record: string,
  s: SchemaStatement & { creates: string },
): void {
  let stmt: Database.Statement;
  try {
    stmt = db.prepare(s.sql);
  } catch (e) {
    if (e instanceof RangeError) throw refusal(record, s, 'more than one statement');
    throw e;
  }
  stmt.run();
  const row = db
    .prepare('SELECT type, tbl_name FROM sqlite_schema WHERE name = ? COLLATE NOCASE')
    .get(s.creates) as { type: string; tbl_name: string } | undefined;
  if (row === undefined || row.type !== SCHEMA_TYPE[s.kind])
    throw refusal(record, s, 'did not create the object its entry names');
  if (s.table !== undefined && row.tbl_name.toLowerCase() !== s.table.toLowerCase())
    throw refusal(record, s, 'is on another table');
}
