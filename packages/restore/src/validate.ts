/**
 * Validation of the `RestoreRequest` body at the route boundary (specification "Restore request
 * body"), before anything is read. Every refusal is ERR_RESTORE_INVALID_REQUEST (HTTP 400) whose
 * message is the exact `{ error }` text of docs/restore.md. Messages name fields, never values:
 * `cfConfig.token` and `mediaRestore.token` are never echoed.
 */
import { RestoreError } from './errors.ts';
import type { RestoreRequest, RestoreTargetOverride, TableSubset } from './types.ts';

const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const HASH = /^sha384:[0-9a-f]{96}$/;
const FIELDS = new Set([
  'runId',
  'confirm',
  'target',
  'include',
  'exclude',
  'maxRecords',
  'recordName',
  'destinationId',
  'cfConfig',
  'mediaRestore',
  'd1Tables',
  'onExisting',
  'planHash',
]);
/** Selector entries and names longer than this are refused (record names are at most 4096 bytes). */
const MAX_TEXT = 4096;
/** Most include / exclude entries and d1Tables tables. */
const MAX_ENTRIES = 1000;

function bad(message: string): RestoreError {
  return new RestoreError('ERR_RESTORE_INVALID_REQUEST', message);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function text(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_TEXT;
}

function selector(body: Record<string, unknown>, field: 'include' | 'exclude'): string[] {
  const v = body[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw bad(`${field} must be an array of non-empty strings`);
  if (v.length > MAX_ENTRIES) throw bad(`${field} has more than ${MAX_ENTRIES} entries`);
  v.forEach((entry, i) => {
    if (!text(entry)) throw bad(`${field}[${i}] must be a non-empty string`);
  });
  return [...(v as string[])];
}

function target(v: unknown): RestoreTargetOverride | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw bad('target must be an object');
  const out: RestoreTargetOverride = {};
  for (const [k, value] of Object.entries(v)) {
    if (k !== 'binding' && k !== 'namespaceId' && k !== 'bucketName')
      throw bad('target may only hold binding, namespaceId and bucketName');
    if (value === undefined || value === null) continue;
    if (!text(value)) throw bad(`target.${k} must be a non-empty string`);
    out[k] = value;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

function tables(v: unknown): TableSubset | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isObject(v)) throw bad('d1Tables must be an object');
  for (const k of Object.keys(v)) {
    if (k !== 'database' && k !== 'tables' && k !== 'createOnly')
      throw bad('d1Tables may only hold database, tables and createOnly');
  }
  if (!text(v.database)) throw bad('d1Tables.database must be a non-empty string');
  if (!Array.isArray(v.tables) || v.tables.length === 0 || v.tables.length > MAX_ENTRIES)
    throw bad('d1Tables.tables must be a non-empty array of non-empty strings');
  v.tables.forEach((t, i) => {
    if (!text(t)) throw bad(`d1Tables.tables[${i}] must be a non-empty string`);
  });
  if (v.createOnly !== undefined && typeof v.createOnly !== 'boolean')
    throw bad('d1Tables.createOnly must be a boolean');
  return { database: v.database, tables: [...(v.tables as string[])], createOnly: v.createOnly === true };
}

/**
 * Checks a request body and returns it typed and normalised (defaults filled in). Throws
 * RestoreError ERR_RESTORE_INVALID_REQUEST with the exact message for: a body that is not an
 * object, an unknown field, a missing or empty `runId`, a malformed one, a non-boolean `confirm`, a
 * bad `target`, an `include` / `exclude` that is not an array or has an empty or non-string entry,
 * a `maxRecords` that is not a positive integer, an empty `recordName` or `destinationId`, an
 * unknown `onExisting`, a malformed `d1Tables`, `d1Tables` with `recordName`, a malformed `planHash`,
 * and `cfConfig` / `mediaRestore` (no platform-configuration or media connector in this engine).
 */
export function validateRestoreRequest(body: unknown): RestoreRequest {
  if (!isObject(body)) throw bad('request body must be a JSON object');
  for (const k of Object.keys(body)) {
    if (!FIELDS.has(k)) throw bad(`unknown field ${JSON.stringify(k.slice(0, 64))}`);
  }
  const runId = body.runId;
  if (runId === undefined || runId === null || runId === '') throw bad('runId is required');
  if (typeof runId !== 'string') throw bad('runId must be a string');
  if (!ID.test(runId))
    throw bad('runId must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit');
  if (body.confirm !== undefined && typeof body.confirm !== 'boolean') throw bad('confirm must be a boolean');
  const include = selector(body, 'include');
  const exclude = selector(body, 'exclude');
  let maxRecords: number | undefined;
  if (body.maxRecords !== undefined && body.maxRecords !== null) {
    if (typeof body.maxRecords !== 'number' || !Number.isSafeInteger(body.maxRecords) || body.maxRecords < 1)
      throw bad('maxRecords must be a positive integer');
    maxRecords = body.maxRecords;
  }
  let recordName: string | undefined;
  if (body.recordName !== undefined && body.recordName !== null) {
    if (!text(body.recordName)) throw bad('recordName must be a non-empty string');
    recordName = body.recordName;
  }
  let destinationId: string | undefined;
  if (body.destinationId !== undefined && body.destinationId !== null) {
    if (!text(body.destinationId)) throw bad('destinationId must be a non-empty string');
    destinationId = body.destinationId;
  }
  const onExisting = body.onExisting ?? 'overwrite';
  if (onExisting !== 'overwrite' && onExisting !== 'skip')
    throw bad("onExisting must be 'overwrite' or 'skip'");
  if (body.cfConfig !== undefined && body.cfConfig !== null)
    throw bad('cfConfig is not supported: this engine has no platform-configuration connector');
  if (body.mediaRestore !== undefined && body.mediaRestore !== null)
    throw bad('mediaRestore is not supported: this engine has no media connector');
  const d1Tables = tables(body.d1Tables);
  if (d1Tables !== undefined && recordName !== undefined)
    throw bad('d1Tables cannot be combined with recordName');
  let planHash: string | undefined;
  if (body.planHash !== undefined && body.planHash !== null) {
    if (typeof body.planHash !== 'string' || !HASH.test(body.planHash))
      throw bad('planHash must be sha384:<96 lower-case hex digits>');
    planHash = body.planHash;
  }
  const t = target(body.target);
  return {
    runId,
    confirm: body.confirm === true,
    include,
    exclude,
    onExisting,
    ...(t === undefined ? {} : { target: t }),
    ...(maxRecords === undefined ? {} : { maxRecords }),
    ...(recordName === undefined ? {} : { recordName }),
    ...(destinationId === undefined ? {} : { destinationId }),
    ...(d1Tables === undefined ? {} : { d1Tables }),
    ...(planHash === undefined ? {} : { planHash }),
  };
}
