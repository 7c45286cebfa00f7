/**
 * Restore planning (the dry run): specification "Restore plan (dry-run reply, `RestorePlan`)";
 * docs/restore.md is normative for every field and the selection rules.
 *
 * Security-relevant behaviour: a dry run writes nothing (the target is only asked `exists`); every
 * planned record is read back and its plaintext SHA-384 checked (`recordsVerified`), so a plan is
 * only ever made over bytes that verify; names that could leave a `files` target (`..`, absolute,
 * through a symbolic link already in the target) are never planned; a posture that cannot read
 * back (no operational key, a missing or unreadable run) is `ok: false` with a reason, never a throw.
 */
import {
  type IndexEntry,
  isArchiveError,
  type OpenedRun,
  openRun,
  type VerifiedManifest,
} from '@coffer/archive';
import type { ObjectStore } from '@coffer/objectstore';
import { openSource, type SourceConnector, SQLITE_SCHEMA_RECORD, sqliteTableOfRecord } from '@coffer/sources';
import { RestoreError } from './errors.ts';
import { verifyRecords } from './internal/verify-records.ts';
import { normaliseSelectors, type PlanDocument, planHashOf } from './plan-hash.ts';
import {
  parentChecker,
  type ResolvedTarget,
  redisNameFits,
  resolveTarget,
  unsafeFileName,
} from './target.ts';
import type {
  DependencyWarning,
  FidelityWarning,
  OverwriteCheck,
  PlanOptions,
  PlanSampleRow,
  RestorePlan,
  SkippedEntry,
  StoreChoice,
} from './types.ts';

/** Approval life counts from `plannedAt`; a plan older than this cannot be raised for approval. */
export const APPLY_WINDOW_MS = (24 * 60 + 30) * 60 * 1000;
/** Default sample rows. */
export const SAMPLE_ROWS = 50;
/** Most `skipped` entries listed (the total is `skippedCount`). */
export const SKIPPED_LIST_MAX = 1000;
const OVERWRITE_CHECK_LIMIT = 1000;

/** Everything an apply needs from a computed plan. */
export interface ComputedPlan {
  plan: RestorePlan;
  /** Set when `plan.ok`. */
  ctx?: {
    store: ObjectStore;
    destinationId: string;
    manifest: VerifiedManifest;
    run: OpenedRun;
    resolved: ResolvedTarget;
    records: IndexEntry[];
    doc: PlanDocument;
  };
}

/** Picks the store; throws ERR_RESTORE_UNKNOWN_DESTINATION. */
export function chooseStore(
  choice: StoreChoice,
  destinationId: string | undefined,
): { id: string; store: ObjectStore } {
  if (choice.stores !== undefined) {
    const ids = Object.keys(choice.stores);
    const id = destinationId ?? choice.defaultDestinationId ?? (ids.length === 1 ? ids[0]! : 'default');
    const store = Object.hasOwn(choice.stores, id) ? choice.stores[id] : undefined;
    if (store === undefined)
      throw new RestoreError(
        'ERR_RESTORE_UNKNOWN_DESTINATION',
        'destinationId names no configured destination',
      );
    return { id, store };
  }
  if (choice.store === undefined)
    throw new RestoreError('ERR_RESTORE_UNKNOWN_DESTINATION', 'no destination is configured');
  const id = choice.defaultDestinationId ?? 'default';
  if (destinationId !== undefined && destinationId !== id)
    throw new RestoreError(
      'ERR_RESTORE_UNKNOWN_DESTINATION',
      'destinationId names no configured destination',
    );
  return { id, store: choice.store };
}

function emptyPlan(runId: string, plannedAt: Date, onExisting: RestorePlan['onExisting']): RestorePlan {
  return {
    ok: false,
    runId,
    job: null,
    mode: 'dry-run',
    recordsVerified: 0,
    isLatest: false,
    plannedWrites: 0,
    bytes: 0,
    plannedAt: plannedAt.toISOString(),
    applyDeadline: new Date(plannedAt.getTime() + APPLY_WINDOW_MS).toISOString(),
    sample: [],
    skipped: [],
    skippedCount: 0,
    dependencyWarnings: [],
    fidelityWarnings: [],
    overwriteCheck: null,
    target: null,
    onExisting,
    planHash: null,
    advisories: [],
  };
}

function notReadable(plan: RestorePlan, reason: string): ComputedPlan {
  return { plan: { ...plan, ok: false, reason } };
}

/** Reads a record whole (verified: the reader throws at its end when the digest differs). */
export async function readVerified(run: OpenedRun, entry: IndexEntry): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const piece of run.readRecord(entry)) {
    parts.push(piece.slice());
    n += piece.length;
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function parentsOf(entry: IndexEntry, schema: Map<string, string[]> | null, table: string): string[] {
  const fromSchema = schema?.get(table.toLowerCase());
  if (fromSchema !== undefined) return fromSchema;
  const raw = entry.metadata.parents;
  if (typeof raw === 'string') {
    try {
      const v = JSON.parse(raw) as unknown;
      if (Array.isArray(v)) return v.filter((x): x is string => typeof x === 'string');
    } catch {
      return [];
    }
  }
  return [];
}

function databaseMatches(given: string, m: VerifiedManifest): boolean {
  const g = given.toLowerCase();
  const src = m.document.source;
  const names = [src.binding, src.namespace, src.namespace?.split('/').pop(), m.document.job];
  return names.some((n) => typeof n === 'string' && n.toLowerCase() === g);
}

/**
 * Computes a plan. With `verify` every planned record is read and hash-checked (the dry run);
 * without it (an apply, whose phase one verifies) only the index is read. Throws RestoreError for
 * request-class faults (unknown destination or target, outside the restore roots, d1Tables naming
 * unknown tables or another database, a sqlite target that is not fresh); never for a posture
 * that cannot read back (that is `ok: false`).
 *
 * With `advise` (a dry run, a verify: nothing is written) the refusals that depend only on where
 * an apply would write (outside the restore roots, a sqlite target that is not fresh, a failed
 * `targetChecks` entry) become `advisories` instead; the plan is still computed over the same
 * target identity, so its hash is the one an apply to that target would recompute. A target with
 * an advisory is never touched (no existence checks, no link checks, no database opened).
 */
export async function computePlan(
  options: PlanOptions,
  verify: boolean,
  checkTargets: boolean,
  advise = false,
): Promise<ComputedPlan> {
  const request = options.request;
  // `options.runId`: the run whose archive holds the records, when the engine resolved the
  // requested run to another (an unchanged run); the plan still echoes the requested one.
  const runId = options.runId ?? request.runId;
  const now = (options.now ?? (() => new Date()))();
  const plan = emptyPlan(request.runId, now, request.onExisting);
  plan.isLatest = options.isLatest === true;
  const { id: destinationId, store } = chooseStore(options, request.destinationId);

  const key = options.operationalSecretKey;
  if (!(key instanceof Uint8Array) || key.length === 0)
    return notReadable(plan, 'no operational key: this engine cannot read archives back');

  let run: OpenedRun;
  try {
    run = await openRun(store, {
      runId,
      secretKey: key,
      ...(options.job === undefined ? {} : { job: options.job }),
      ...(options.signerPublicKey === undefined ? {} : { signerPublicKey: options.signerPublicKey }),
      ...(options.knownRecords === undefined ? {} : { knownRecords: options.knownRecords }),
    });
  } catch (e) {
    if (isArchiveError(e, 'ERR_ARCHIVE_NOT_FOUND')) return notReadable(plan, 'run not found');
    if (isArchiveError(e, 'ERR_ARCHIVE_INVALID_ARGUMENT'))
      return notReadable(plan, 'operational key unusable');
    if (isArchiveError(e)) return notReadable(plan, `run cannot be read back: ${e.reason}`);
    return notReadable(plan, 'run cannot be read back: destination error');
  }
  const manifest = run.manifest;
  const doc = manifest.document;
  plan.job = doc.job;
  const sourceType = doc.source.type;

  plan.archiveRunId = doc.runId;
  const advisories = plan.advisories;
  const refuse = (e: RestoreError) => {
    if (!advise) throw e;
    advisories.push({ code: e.code, message: e.message });
  };
  const resolved = await resolveTarget({
    job: doc.job,
    sourceType,
    sourceBinding: doc.source.binding ?? doc.job,
    override: request.target,
    resolver: options.targetResolver,
    restoreRoots: options.restoreRoots,
    ...(advise ? { onRefused: refuse } : {}),
  });
  plan.target = resolved.target;
  for (const check of options.targetChecks ?? []) {
    const refusal = await check(resolved);
    if (refusal !== null) refuse(new RestoreError(refusal.code, refusal.message));
  }
  // An apply to this target would be refused: leave it alone (a dry run is open to every role).
  const touchTarget = advisories.length === 0;

  let entries: IndexEntry[];
  try {
    entries = [];
    for await (const e of run.records()) entries.push(e);
  } catch (e) {
    return notReadable(plan, `run cannot be read back: ${isArchiveError(e) ? e.reason : 'index unreadable'}`);
  }

  const skipped: SkippedEntry[] = [];
  let skippedCount = 0;
  const skip = (name: string, reason: string) => {
    skippedCount++;
    if (skipped.length < SKIPPED_LIST_MAX) skipped.push({ name, reason });
  };
  let selected: IndexEntry[] = [];
  const selectors: PlanDocument['selectors'] = {};
  let tables: PlanDocument['tables'];
  const dependencyWarnings: DependencyWarning[] = [];

  if (request.d1Tables !== undefined) {
    const sub = request.d1Tables;
    if (sourceType !== 'sqlite')
      throw new RestoreError(
        'ERR_RESTORE_INVALID_REQUEST',
        'd1Tables applies only to a run of a sqlite source',
      );
    if (!databaseMatches(sub.database, manifest))
      throw new RestoreError(
        'ERR_RESTORE_TABLES_NOT_FOUND',
        "d1Tables.database does not name this run's database",
      );
    const byTable = new Map<string, { table: string; entry: IndexEntry }>();
    let schemaEntry: IndexEntry | undefined;
    for (const e of entries) {
      if (e.name === SQLITE_SCHEMA_RECORD) schemaEntry = e;
      const t = sqliteTableOfRecord(e.name);
      if (t !== null) byTable.set(t.toLowerCase(), { table: t, entry: e });
    }
    const wanted = new Set(sub.tables.map((t) => t.toLowerCase()));
    const unknown = [...wanted].filter((t) => !byTable.has(t));
    if (unknown.length > 0)
      throw new RestoreError(
        'ERR_RESTORE_TABLES_NOT_FOUND',
        `d1Tables names tables the run does not hold: ${unknown
          .slice(0, 20)
          .map((t) => JSON.stringify(t.slice(0, 128)))
          .join(', ')}`,
      );
    let schema: Map<string, string[]> | null = null;
    if (schemaEntry !== undefined) {
      try {
        const parsed = JSON.parse(new TextDecoder().decode(await readVerified(run, schemaEntry))) as {
          tables?: Array<{ name?: unknown; foreignKeys?: Array<{ parent?: unknown }> }>;
        };
        schema = new Map();
        for (const t of parsed.tables ?? []) {
          if (typeof t.name !== 'string') continue;
          const parents = (t.foreignKeys ?? [])
            .map((f) => f.parent)
            .filter((p): p is string => typeof p === 'string');
          schema.set(t.name.toLowerCase(), parents);
        }
      } catch (e) {
        return notReadable(
          plan,
          `run cannot be read back: ${isArchiveError(e) ? e.reason : 'schema record unreadable'}`,
        );
      }
    }
    for (const e of entries) {
      const t = sqliteTableOfRecord(e.name);
      if (e === schemaEntry && !sub.createOnly) selected.push(e);
      else if (t !== null && wanted.has(t.toLowerCase())) {
        selected.push(e);
        for (const parent of parentsOf(e, schema, t)) {
          if (parent.toLowerCase() !== t.toLowerCase() && !wanted.has(parent.toLowerCase()))
            dependencyWarnings.push({ database: sub.database, table: t, missingParent: parent });
        }
      } else
        skip(
          e.name,
          e === schemaEntry ? 'schema record not restored (d1Tables createOnly)' : 'not in d1Tables',
        );
    }
    tables = {
      database: sub.database,
      tables: [...wanted].map((t) => byTable.get(t)!.table).sort(),
      createOnly: sub.createOnly,
    };
  } else if (request.recordName !== undefined) {
    selectors.recordName = request.recordName;
    for (const e of entries) {
      if (e.name === request.recordName) selected.push(e);
      else skippedCount++; // not listed: a single-record restore would list the whole run
    }
    if (selected.length === 0) plan.result = 'record-not-found';
  } else {
    const include = normaliseSelectors(request.include);
    const exclude = normaliseSelectors(request.exclude);
    if (include.length > 0) selectors.include = include;
    if (exclude.length > 0) selectors.exclude = exclude;
    for (const e of entries) {
      if (exclude.some((p) => e.name.startsWith(p))) skip(e.name, 'excluded by selector');
      else if (include.length > 0 && !include.some((p) => e.name.startsWith(p)))
        skip(e.name, 'not included by selector');
      else selected.push(e);
    }
  }

  // Names that cannot be written into this target are never planned.
  const fits: IndexEntry[] = [];
  const linkCheck =
    resolved.config.type === 'files' && touchTarget ? parentChecker(resolved.config.root) : null;
  for (const e of selected) {
    let why: string | null = null;
    if (resolved.config.type === 'files') why = unsafeFileName(e.name) ?? linkCheck?.(e.name) ?? null;
    else if (resolved.config.type === 'redis' && !redisNameFits(e.name, resolved.config.prefix ?? ''))
      why = 'key outside the target key prefix';
    if (why === null) fits.push(e);
    else skip(e.name, why);
  }
  selected = fits;

  if (request.maxRecords !== undefined) {
    selectors.maxRecords = request.maxRecords;
    for (const e of selected.slice(request.maxRecords)) skip(e.name, 'beyond maxRecords');
    selected = selected.slice(0, request.maxRecords);
  }

  const planDoc: PlanDocument = {
    kind: 'coffer-restore-plan',
    v: 1,
    job: doc.job,
    runId: doc.runId,
    manifest: manifest.digest,
    destinationId,
    target: resolved.identity,
    selectors,
    ...(tables === undefined ? {} : { tables }),
    ...(request.onExisting === 'skip' ? { onExisting: 'skip' as const } : {}),
    records: selected.map((e) => [e.name, e.sha384, e.size]),
  };

  // A sqlite restore writes into a fresh database only.
  let connector: SourceConnector | null = null;
  const open = () => {
    connector ??= openSource(resolved.config);
    return connector;
  };
  try {
    // Resuming an interrupted apply: the database holds what the earlier attempt wrote.
    if (
      resolved.config.type === 'sqlite' &&
      selected.length > 0 &&
      options.resuming !== true &&
      touchTarget
    ) {
      let used: boolean;
      try {
        used = await open().exists(SQLITE_SCHEMA_RECORD);
      } catch (e) {
        used = false;
        refuse(
          new RestoreError(
            'ERR_RESTORE_TARGET_NOT_FRESH',
            'the target database cannot be opened as a fresh SQLite file',
            { cause: e },
          ),
        );
      }
      if (used)
        refuse(
          new RestoreError(
            'ERR_RESTORE_TARGET_NOT_FRESH',
            'the target database already has tables: a sqlite restore writes into a fresh database file',
          ),
        );
    }

    if (verify) {
      const read = await verifyRecords(run, selected, 0, { cancelled: () => false, onVerified: () => {} });
      plan.recordsVerified = read.verified;
      const err = read.error;
      if (err !== undefined)
        return notReadable(
          plan,
          `record failed verification: ${isArchiveError(err) ? err.reason : 'read error'}`,
        );
    }

    const sampleRows = Math.min(SAMPLE_ROWS, request.maxRecords ?? SAMPLE_ROWS);
    const sample: PlanSampleRow[] = selected.slice(0, sampleRows).map((e) => ({
      name: e.name,
      sourceType: e.sourceType,
      binding: e.binding,
      namespace: e.namespace,
      plaintextSize: e.size,
    }));

    let overwriteCheck: OverwriteCheck | null = null;
    if (checkTargets && touchTarget && resolved.config.type !== 'sqlite') {
      const limit = options.overwriteCheckLimit ?? OVERWRITE_CHECK_LIMIT;
      const checked = selected.slice(0, limit);
      const results: Array<boolean | null> = new Array(checked.length).fill(null);
      const c = open();
      for (let i = 0; i < checked.length; i += 16) {
        await Promise.all(
          checked.slice(i, i + 16).map(async (e, k) => {
            try {
              results[i + k] = await c.exists(e.name);
            } catch {
              results[i + k] = null;
            }
          }),
        );
      }
      const existing = results.filter((r) => r === true).length;
      const absent = results.filter((r) => r === false).length;
      overwriteCheck = {
        onExisting: request.onExisting,
        checked: checked.length,
        existing,
        absent,
        unknown: checked.length - existing - absent,
        complete: checked.length === selected.length,
        limit,
      };
      if (resolved.config.type === 'redis' || resolved.config.type === 's3') {
        sample.forEach((row, i) => {
          const r = results[i];
          if (typeof r === 'boolean') row.targetExists = r;
        });
      }
    }

    const fidelityWarnings: FidelityWarning[] = [];
    if (sourceType === 'redis') {
      const deadline = now.getTime() + APPLY_WINDOW_MS;
      let expired = 0;
      let expiring = 0;
      for (const e of selected) {
        const at = e.metadata.expiresAt;
        if (typeof at !== 'number') continue;
        if (at <= now.getTime()) expired++;
        else if (at <= deadline) expiring++;
      }
      if (expired + expiring > 0)
        fidelityWarnings.push({
          name: '(kv expirations)',
          reason: `${expired} key(s) already expired (an apply does not write them); ${expiring} key(s) expire before the apply deadline`,
          expired,
          expiringBeforeDeadline: expiring,
        });
    }

    const result: RestorePlan = {
      ...plan,
      ok: true,
      plannedWrites: selected.length,
      bytes: selected.reduce((n, e) => n + e.size, 0),
      sample,
      skipped,
      skippedCount,
      dependencyWarnings,
      fidelityWarnings,
      overwriteCheck,
      planHash: planHashOf(planDoc),
    };
    return {
      plan: result,
      ctx: { store, destinationId, manifest, run, resolved, records: selected, doc: planDoc },
    };
  } finally {
    if (connector !== null) await (connector as SourceConnector).close().catch(() => undefined);
  }
}

/**
 * The dry run: a `RestorePlan` with every field of the specification. Reads and hash-verifies
 * every planned record; writes nothing. Returns `ok: false` with a reason (never throws) when the
 * run cannot be read back: no operational key, run not found, a manifest, index or record that
 * fails its checks. Throws RestoreError for request-class faults: ERR_RESTORE_UNKNOWN_DESTINATION,
 * ERR_RESTORE_UNKNOWN_TARGET, ERR_RESTORE_TARGET_MISMATCH, ERR_RESTORE_INVALID_REQUEST,
 * ERR_RESTORE_TABLES_NOT_FOUND. Where an apply would be refused because of its target (outside the
 * restore roots, a sqlite target that is not fresh, a `targetChecks` refusal) the plan is still
 * returned, with the refusal in `advisories`.
 */
export async function planRestore(options: PlanOptions): Promise<RestorePlan> {
  return (await computePlan(options, true, true, true)).plan;
}

/**
 * The plan as an apply would recompute it: from the index only (no record is read, so
 * `recordsVerified` is 0) and without asking the target. The engine uses it for the approval gate
 * and the request route, where only the plan hash and counts matter. Throws as `planRestore`.
 */
export async function planFromIndex(options: PlanOptions): Promise<RestorePlan> {
  const computed = await computePlan(options, false, false);
  if (computed.ctx !== undefined) prepared.set(computed.plan, computed);
  return computed.plan;
}

/**
 * The computed plans behind the plans `planFromIndex` returned, so that an apply handed one of
 * them (`ApplyOptions.prepared`) writes exactly what was gated, without computing it again.
 * Weak: a plan no caller holds any more takes its opened run with it.
 */
const prepared = new WeakMap<RestorePlan, ComputedPlan>();

/** The computed plan behind `plan` (from `planFromIndex`), or undefined. */
export function preparedPlan(plan: RestorePlan): ComputedPlan | undefined {
  return prepared.get(plan);
}
