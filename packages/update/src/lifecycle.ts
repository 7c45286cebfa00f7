/**
 * The update lifecycle as a pure state machine (engine HTTP interface, "Update lifecycle";
 * docs/updates.md, "Update lifecycle"). It does no I/O: each call returns a {@link Step} saying
 * "persist this record (if any), then do this effect", and the caller reports what the effect
 * gave with {@link advance}. {@link driveUpdate} runs that loop over an executor.
 *
 * Steps, in order, each with its failure outcome: no-update; anti-rollback floor; forward-only
 * (downgrade opt-in); schema epoch (a downgrade never crosses one); migration guard; compat guard;
 * artefact SHA-384 against the same signed document (mix-and-match refused); rollback target
 * recorded; dry-run stop (dryRun defaults to true); a configured destination; upload (inert);
 * read-back gate (warn records and proceeds, enforce stops); promote; settle by canary.
 *
 * Failure property: nothing goes live before every earlier step passed; the record naming the
 * rollback target is persisted before the first upload; on a dead canary the outcome
 * `rollback-failed` is persisted before the rollback deploy starts and replaced by `rolled-back`
 * only after every rollback deploy succeeded, so a crash mid-rollback leaves the true state
 * ("needs the operator") on record.
 */
import { createHash } from 'node:crypto';
import type { ChannelDocument, ComponentName, RecommendedRelease } from './channel.ts';
import { UpdateError, type UpdateErrorCode } from './errors.ts';
import { type ApplyPath, checkRollback, raiseFloor, runGuards } from './guards.ts';
import type { LifecycleStep, UpdateRecord } from './record.ts';

/**
 * What the caller does after an undecided canary verdict (specification: two further flights plus
 * one self-check retry, about three seconds in total); still undecided afterwards, the verified new
 * version is kept and awaits the scheduled canary.
 */
export const CANARY_RETRY_SCHEDULE: readonly {
  readonly check: 'flight' | 'self-check';
  readonly afterMs: number;
}[] = [
  { check: 'flight', afterMs: 1000 },
  { check: 'flight', afterMs: 1000 },
  { check: 'self-check', afterMs: 1000 },
];

export type CanaryVerdict = 'alive' | 'dead' | 'undecided';

/** The reply an apply, settle, ramp or rollback ends with. */
export interface UpdateReply {
  outcome:
    | 'no-update'
    | 'refused'
    | 'dry-run'
    | 'applied'
    | 'rolled-back'
    | 'rollback-failed'
    | 'awaiting-canary'
    | 'ramping';
  step?: LifecycleStep;
  code?: UpdateErrorCode;
  message?: string;
  /** The record as last persisted (or, for a dry run, as it would be). */
  record?: UpdateRecord;
}

/** What the caller must do next. */
export type Effect =
  | { do: 'verify-artefact'; component: ComponentName; version: string; sha384: string; size: number }
  | { do: 'read-live' }
  | { do: 'upload'; component: ComponentName; version: string }
  | { do: 'read-back'; component: ComponentName; version: string }
  | { do: 'promote'; component: ComponentName; version: string; percentage: number }
  | { do: 'canary'; check: 'flight' | 'self-check'; afterMs: number }
  | { do: 'rollback-deploy'; component: ComponentName; version: string | null }
  | { do: 'stop'; reply: UpdateReply };

/** What the caller reports after running an effect. */
export type UpdateEvent =
  | { type: 'artefact'; component: ComponentName; sha384: string; channelDigest: string }
  | { type: 'live'; versions: Partial<Record<ComponentName, string | null>> }
  | { type: 'uploaded'; component: ComponentName }
  | { type: 'read-back'; component: ComponentName; sha384: string }
  | { type: 'promoted'; component: ComponentName }
  | { type: 'canary'; verdict: CanaryVerdict }
  | { type: 'rolled-back'; component: ComponentName }
  | { type: 'failed'; code?: UpdateErrorCode; message?: string };

type Phase = 'verify' | 'live' | 'upload' | 'read-back' | 'promote' | 'canary' | 'rollback' | 'stopped';

/** The machine's state: serialisable, handed back to {@link advance}. */
export interface MachineState {
  phase: Phase;
  index: number;
  retry: number;
  record: UpdateRecord;
  expected: Partial<Record<ComponentName, { sha384: string; size: number }>>;
  dryRun: boolean;
  destinationConfigured: boolean;
  /** After the last promote: canary flights (apply), stop as `ramping` (ramp), or settle `applied` (ramp/settle). */
  afterPromote: 'canary' | 'ramping' | 'applied';
}

/** One step: persist `persist` first (when present), then run `effect`. */
export interface Step {
  state: MachineState;
  persist?: UpdateRecord;
  effect: Effect;
}

export interface ApplyInput {
  /** The verified channel (only the document and its digest are used). */
  channel: { document: ChannelDocument; digest: string };
  /** Components to update; default: every component the channel names. */
  components?: ComponentName[];
  /** The running versions (engine required; null: component not installed). */
  running: Partial<Record<ComponentName, string | null>> & { engine: string };
  /** Highest version ever settled per component (the anti-rollback floor). */
  floors: Partial<Record<ComponentName, string | null>>;
  runningSchemaEpoch: number;
  /** 'one-click' (default) or 'approved' (a second owner approved: migrations allowed). */
  path?: Exclude<ApplyPath, 'ramp'>;
  allowDowngrade?: boolean;
  /** Default true: stop after the rollback target is recorded. */
  dryRun?: boolean;
  /** Read-back gate mode; default 'warn'. */
  readBack?: 'warn' | 'enforce';
  destinationConfigured: boolean;
  id: string;
  now: string;
}

export interface RampInput extends Omit<ApplyInput, 'path' | 'components'> {
  components?: ComponentName[];
  /** Share of replicas to move, 1-100. */
  percentage: number;
}

const stop = (state: MachineState, reply: UpdateReply, persist?: UpdateRecord): Step => ({
  state: { ...state, phase: 'stopped' },
  ...(persist ? { persist } : {}),
  effect: { do: 'stop', reply },
});

function refuse(
  state: MachineState,
  step: LifecycleStep,
  code: UpdateErrorCode,
  message: string,
  persisted: boolean,
): Step {
  const record: UpdateRecord = { ...state.record, status: 'refused', phase: 'done', refusal: { step, code } };
  const next = { ...state, record };
  return stop(next, { outcome: 'refused', step, code, message, record }, persisted ? record : undefined);
}

function baseRecord(
  input: ApplyInput | RampInput,
  components: ComponentName[],
  shape: 'apply' | 'ramp',
): UpdateRecord {
  const doc = input.channel.document;
  const to: Partial<Record<ComponentName, string>> = {};
  for (const c of components) to[c] = doc.components[c]!.version;
  return {
    v: 1,
    id: input.id,
    shape,
    status: 'pending',
    phase: 'uploading',
    outcome: null,
    refusal: null,
    components,
    from: {},
    to,
    fromSchemaEpoch: input.runningSchemaEpoch,
    toSchemaEpoch: doc.recommended.schemaEpoch,
    risk: doc.recommended.risk,
    migration: doc.recommended.migration,
    channel: { sequence: doc.sequence, digest: input.channel.digest },
    readBack: { mode: input.readBack ?? 'warn', mismatched: [] },
    ramp: null,
    rollbackFailed: [],
    floors: null,
    createdAt: input.now,
    updatedAt: input.now,
  };
}

function begin(
  input: ApplyInput | RampInput,
  requested: ComponentName[] | undefined,
  path: ApplyPath,
  shape: 'apply' | 'ramp',
): Step {
  const doc = input.channel.document;
  const release: RecommendedRelease = doc.recommended;
  const components = (requested ?? (Object.keys(doc.components) as ComponentName[])).filter(
    (c, i, all) => all.indexOf(c) === i,
  );
  for (const c of components)
    if (doc.components[c] === undefined)
      throw new UpdateError('ERR_UPDATE_UNKNOWN_COMPONENT', `the channel names no ${c} artefact`);
  // The engine goes last: a failed promote of the engine leaves the console already switched,
  // which the machine then reverts; the console is never live on a version the engine refused.
  components.sort((a, b) => (a === 'engine' ? 1 : 0) - (b === 'engine' ? 1 : 0));
  const record = baseRecord(input, components, shape);
  if (shape === 'ramp') record.ramp = { percentage: (input as RampInput).percentage };
  const expected: MachineState['expected'] = {};
  for (const c of components)
    expected[c] = { sha384: doc.components[c]!.sha384, size: doc.components[c]!.size };
  const state: MachineState = {
    phase: 'verify',
    index: 0,
    retry: 0,
    record,
    expected,
    dryRun: input.dryRun ?? true,
    destinationConfigured: input.destinationConfigured,
    afterPromote: shape === 'ramp' ? 'ramping' : 'canary',
  };
  let pending = 0;
  for (const c of components) {
    const verdict = runGuards({
      target: doc.components[c]!.version,
      running: c === 'engine' ? input.running.engine : (input.running[c] ?? null),
      runningEngine: input.running.engine,
      floor: input.floors[c] ?? null,
      runningSchemaEpoch: input.runningSchemaEpoch,
      release,
      path,
      allowDowngrade: input.allowDowngrade ?? false,
    });
    if (verdict.ok) pending++;
    else if (verdict.code !== null) return refuse(state, verdict.step, verdict.code, verdict.message, false);
  }
  if (pending === 0)
    return stop(state, { outcome: 'no-update', step: 'no-update', message: 'already current' });
  return verifyNext(state);
}

/**
 * Starts an apply (`POST /admin/update/apply`). Runs the guards at once; the first step's effect is
 * either `stop` (no-update or a refusal) or the first artefact verification.
 * Throws ERR_UPDATE_UNKNOWN_COMPONENT when a requested component is not in the channel.
 */
export function startApply(input: ApplyInput): Step {
  return begin(input, input.components, input.path ?? 'one-click', 'apply');
}

/**
 * Starts a gradual rollout (`POST /admin/update/ramp`): the engine only (naming the console throws
 * ERR_UPDATE_RAMP_CONSOLE), never a migration release (refused at the migration guard). It runs
 * the same steps as an apply, but promote moves only `percentage` of replicas and the machine
 * stops with a pending ramp-shaped record (`ramping`) that only `ramp/settle` can settle.
 */
export function startRamp(input: RampInput): Step {
  const components = input.components ?? ['engine'];
  if (components.some((c) => c !== 'engine'))
    throw new UpdateError(
      'ERR_UPDATE_RAMP_CONSOLE',
      'the ramp moves the engine only; the console cannot ramp',
    );
  if (!Number.isInteger(input.percentage) || input.percentage < 1 || input.percentage > 100)
    throw new UpdateError('ERR_UPDATE_INVALID_ARGUMENT', 'percentage must be an integer from 1 to 100');
  return begin(input, components, 'ramp', 'ramp');
}

function touch(record: UpdateRecord, patch: Partial<UpdateRecord>): UpdateRecord {
  return { ...record, ...patch };
}

function verifyNext(state: MachineState): Step {
  const c = state.record.components[state.index];
  if (c === undefined) return { state: { ...state, phase: 'live', index: 0 }, effect: { do: 'read-live' } };
  const e = state.expected[c]!;
  return {
    state: { ...state, phase: 'verify' },
    effect: { do: 'verify-artefact', component: c, version: state.record.to[c]!, ...e },
  };
}

function perComponent(
  state: MachineState,
  phase: 'upload' | 'read-back' | 'promote',
  index: number,
): Effect | null {
  const c = state.record.components[index];
  if (c === undefined) return null;
  const version = state.record.to[c]!;
  if (phase === 'promote')
    return { do: 'promote', component: c, version, percentage: state.record.ramp?.percentage ?? 100 };
  return { do: phase, component: c, version };
}

function beginRollback(state: MachineState): Step {
  const record = touch(state.record, {
    status: 'settled',
    phase: 'rolling-back',
    outcome: 'rollback-failed',
    rollbackFailed: [],
  });
  const next: MachineState = { ...state, phase: 'rollback', index: 0, record };
  return { state: next, persist: record, effect: rollbackEffect(next, 0) };
}

function rollbackEffect(state: MachineState, index: number): Effect {
  // Reverse order of promote: the engine first, then the console.
  const list = [...state.record.components].reverse();
  const c = list[index]!;
  return { do: 'rollback-deploy', component: c, version: state.record.from[c] ?? null };
}

function settleWith(state: MachineState, verdict: CanaryVerdict): Step {
  if (verdict === 'alive') {
    const floors: Partial<Record<ComponentName, string>> = {};
    for (const c of state.record.components) floors[c] = raiseFloor(null, state.record.to[c]!);
    const record = touch(state.record, { status: 'settled', phase: 'done', outcome: 'applied', floors });
    return stop({ ...state, record }, { outcome: 'applied', step: 'settle', record }, record);
  }
  if (verdict === 'dead') return beginRollback(state);
  const retry = CANARY_RETRY_SCHEDULE[state.retry];
  if (retry !== undefined)
    return {
      state: { ...state, phase: 'canary', retry: state.retry + 1 },
      effect: { do: 'canary', ...retry },
    };
  const record = touch(state.record, { phase: 'awaiting-canary' });
  return stop({ ...state, record }, { outcome: 'awaiting-canary', step: 'settle', record }, record);
}

function failed(
  state: MachineState,
  event: UpdateEvent,
  step: LifecycleStep,
  fallback: UpdateErrorCode,
): Step {
  const code = event.type === 'failed' && event.code !== undefined ? event.code : fallback;
  const message = event.type === 'failed' && event.message !== undefined ? event.message : `${step} failed`;
  return refuse(state, step, code, message, state.phase !== 'verify' && state.phase !== 'live');
}

function unexpected(state: MachineState, event: UpdateEvent): never {
  throw new UpdateError(
    'ERR_UPDATE_INVALID_TRANSITION',
    `event ${event.type} does not fit phase ${state.phase}`,
  );
}

/**
 * Advances the machine with what the last effect gave. `at` (RFC 3339) stamps records persisted by
 * this step. Throws ERR_UPDATE_INVALID_TRANSITION for an event that does not answer the last
 * effect (another component, another phase, or after `stop`).
 */
export function advance(state: MachineState, event: UpdateEvent, at?: string): Step {
  const s: MachineState = {
    ...state,
    record: touch(state.record, { updatedAt: at ?? state.record.updatedAt }),
  };
  const current = s.record.components[s.index];
  const isFor = (c: ComponentName) => c === current || unexpected(s, event);
  switch (s.phase) {
    case 'verify': {
      if (event.type === 'failed') return failed(s, event, 'verify-artefact', 'ERR_UPDATE_ARTEFACT_HASH');
      if (event.type !== 'artefact' || !isFor(event.component)) return unexpected(s, event);
      if (event.channelDigest !== s.record.channel.digest || event.sha384 !== s.expected[current!]!.sha384)
        return refuse(
          s,
          'verify-artefact',
          'ERR_UPDATE_ARTEFACT_HASH',
          `the ${current} artefact was not verified against this channel document`,
          false,
        );
      return verifyNext({ ...s, index: s.index + 1 });
    }
    case 'live': {
      if (event.type === 'failed' || (event.type === 'live' && typeof event.versions.engine !== 'string'))
        return failed(s, { type: 'failed' }, 'record-rollback-target', 'ERR_UPDATE_NO_ROLLBACK_TARGET');
      if (event.type !== 'live') return unexpected(s, event);
      const from: UpdateRecord['from'] = {};
      for (const c of s.record.components) from[c] = event.versions[c] ?? null;
      const record = touch(s.record, { from });
      const next: MachineState = { ...s, record };
      if (s.dryRun) return stop(next, { outcome: 'dry-run', step: 'dry-run', record });
      if (!s.destinationConfigured)
        return refuse(
          next,
          'destination',
          'ERR_UPDATE_NO_DESTINATION',
          'no destination is configured',
          false,
        );
      return {
        state: { ...next, phase: 'upload', index: 0 },
        persist: record,
        effect: perComponent(next, 'upload', 0)!,
      };
    }
    case 'upload': {
      if (event.type === 'failed') return failed(s, event, 'upload', 'ERR_UPDATE_UPLOAD');
      if (event.type !== 'uploaded' || !isFor(event.component)) return unexpected(s, event);
      const effect = perComponent(s, 'upload', s.index + 1);
      if (effect) return { state: { ...s, index: s.index + 1 }, effect };
      return { state: { ...s, phase: 'read-back', index: 0 }, effect: perComponent(s, 'read-back', 0)! };
    }
    case 'read-back': {
      if (event.type !== 'read-back' && event.type !== 'failed') return unexpected(s, event);
      if (event.type === 'read-back') isFor(event.component);
      const ok = event.type === 'read-back' && event.sha384 === s.expected[current!]!.sha384;
      let next = s;
      if (!ok) {
        if (s.record.readBack.mode === 'enforce')
          return refuse(s, 'read-back', 'ERR_UPDATE_READ_BACK', `the uploaded ${current} bytes differ`, true);
        next = {
          ...s,
          record: touch(s.record, {
            readBack: { ...s.record.readBack, mismatched: [...s.record.readBack.mismatched, current!] },
          }),
        };
      }
      const effect = perComponent(next, 'read-back', s.index + 1);
      if (effect) return { state: { ...next, index: s.index + 1 }, effect };
      const record = touch(next.record, { phase: 'promoting' });
      return {
        state: { ...next, record, phase: 'promote', index: 0 },
        persist: record,
        effect: perComponent(next, 'promote', 0)!,
      };
    }
    case 'promote': {
      if (event.type === 'failed') {
        if (s.index === 0) return failed(s, event, 'promote', 'ERR_UPDATE_PROMOTE');
        // A later component failed: revert the ones already switched, then report the refusal.
        const promoted = s.record.components.slice(0, s.index);
        const record = touch(s.record, {
          status: 'refused',
          phase: 'rolling-back',
          refusal: { step: 'promote', code: event.code ?? 'ERR_UPDATE_PROMOTE' },
          components: promoted,
        });
        const next: MachineState = { ...s, record, phase: 'rollback', index: 0 };
        return { state: next, persist: record, effect: rollbackEffect(next, 0) };
      }
      if (event.type !== 'promoted' || !isFor(event.component)) return unexpected(s, event);
      const effect = perComponent(s, 'promote', s.index + 1);
      if (effect) return { state: { ...s, index: s.index + 1 }, effect };
      if (s.afterPromote === 'ramping') {
        const record = touch(s.record, { phase: 'ramping' });
        return stop({ ...s, record }, { outcome: 'ramping', step: 'promote', record }, record);
      }
      if (s.afterPromote === 'applied') return settleWith(s, 'alive');
      const record = touch(s.record, { phase: 'settling' });
      return {
        state: { ...s, record, phase: 'canary', retry: 0 },
        persist: record,
        effect: { do: 'canary', check: 'flight', afterMs: 0 },
      };
    }
    case 'canary': {
      if (event.type === 'failed') return settleWith(s, 'undecided');
      if (event.type !== 'canary') return unexpected(s, event);
      return settleWith(s, event.verdict);
    }
    case 'rollback': {
      const list = [...s.record.components].reverse();
      const c = list[s.index]!;
      if (event.type !== 'rolled-back' && event.type !== 'failed') return unexpected(s, event);
      if (event.type === 'rolled-back' && event.component !== c) return unexpected(s, event);
      const rollbackFailed =
        event.type === 'failed' ? [...s.record.rollbackFailed, c] : s.record.rollbackFailed;
      const next: MachineState = { ...s, record: touch(s.record, { rollbackFailed }), index: s.index + 1 };
      if (next.index < list.length) return { state: next, effect: rollbackEffect(next, next.index) };
      if (s.record.status === 'refused') {
        const record = touch(next.record, { phase: 'done' });
        const r = record.refusal!;
        return stop(
          { ...next, record },
          {
            outcome: 'refused',
            step: r.step,
            code: r.code,
            message: 'promote failed; prior version live',
            record,
          },
          record,
        );
      }
      const outcome = rollbackFailed.length === 0 ? 'rolled-back' : 'rollback-failed';
      const record = touch(next.record, { phase: 'done', outcome });
      return stop({ ...next, record }, { outcome, step: 'settle', record }, record);
    }
    default:
      return unexpected(s, event);
  }
}

function resume(record: UpdateRecord, phase: Phase, at: string): MachineState {
  const expected: MachineState['expected'] = {};
  return {
    phase,
    index: 0,
    retry: CANARY_RETRY_SCHEDULE.length,
    record: touch(record, { updatedAt: at }),
    expected,
    dryRun: false,
    destinationConfigured: true,
    afterPromote: 'canary',
  };
}

function pendingOrThrow(record: UpdateRecord | null): UpdateRecord {
  if (
    record === null ||
    record.status !== 'pending' ||
    !['settling', 'awaiting-canary', 'ramping'].includes(record.phase)
  )
    throw new UpdateError('ERR_UPDATE_NO_PENDING', 'no promoted update awaits a verdict');
  return record;
}

/**
 * Settles a pending apply record with a canary verdict (`POST /admin/update/settle`, or the
 * scheduled canary). Throws ERR_UPDATE_RAMP_RECORD for a ramp-shaped record and
 * ERR_UPDATE_NO_PENDING when nothing awaits a verdict. `alive` settles `applied` (with the floors
 * to persist); `dead` persists `rollback-failed` and asks for the rollback deploys; `undecided`
 * keeps the record awaiting the scheduled canary.
 */
export function settleRecord(record: UpdateRecord | null, verdict: CanaryVerdict, at: string): Step {
  if (record?.shape === 'ramp')
    throw new UpdateError('ERR_UPDATE_RAMP_RECORD', 'a ramp-shaped record is settled by ramp/settle');
  const r = pendingOrThrow(record);
  const state = resume(r, 'canary', at);
  if (verdict === 'undecided') {
    const rec = touch(state.record, { phase: 'awaiting-canary' });
    return stop({ ...state, record: rec }, { outcome: 'awaiting-canary', step: 'settle', record: rec }, rec);
  }
  return settleWith(state, verdict);
}

/**
 * Settles a ramp-shaped record (`POST /admin/update/ramp/settle`). Throws
 * ERR_UPDATE_NOT_RAMP_RECORD for an apply-shaped record and ERR_UPDATE_NO_PENDING when no ramp is
 * in flight. `alive` asks for a promote of the engine to 100 % and then settles `applied`; `dead`
 * rolls the ramp back as a dead canary does.
 */
export function settleRamp(record: UpdateRecord | null, verdict: 'alive' | 'dead', at: string): Step {
  if (record !== null && record.shape !== 'ramp')
    throw new UpdateError('ERR_UPDATE_NOT_RAMP_RECORD', 'an apply-shaped record is settled by settle');
  const r = pendingOrThrow(record);
  const state = resume(r, 'canary', at);
  if (verdict === 'dead') return beginRollback(state);
  // Promote to every replica, then settle `applied`.
  const rec = touch(state.record, { ramp: { percentage: 100 }, phase: 'promoting' });
  const next: MachineState = { ...state, record: rec, phase: 'promote', index: 0, afterPromote: 'applied' };
  return { state: next, persist: rec, effect: perComponent(next, 'promote', 0)! };
}

/**
 * Starts a manual rollback (`POST /admin/update/rollback`) of the record's components, or of one
 * (`console` alone). Throws ERR_UPDATE_NO_ROLLBACK_TARGET when the record has no earlier version
 * of it, and ERR_UPDATE_SCHEMA_EPOCH when the engine would cross a schema epoch (the console
 * holds no state and may always go back).
 */
export function startRollback(record: UpdateRecord | null, at: string, component?: ComponentName): Step {
  if (record === null || record.status === 'refused' || record.outcome === 'rolled-back')
    throw new UpdateError('ERR_UPDATE_NO_ROLLBACK_TARGET', 'no applied update to roll back');
  const components = component === undefined ? record.components : [component];
  for (const c of components) {
    if (!record.components.includes(c) || typeof record.from[c] !== 'string')
      throw new UpdateError('ERR_UPDATE_NO_ROLLBACK_TARGET', `no earlier ${c} version is recorded`);
    if (c === 'engine') {
      const refusal = checkRollback(
        { schemaEpoch: record.toSchemaEpoch },
        { schemaEpoch: record.fromSchemaEpoch },
      );
      if (refusal && !refusal.ok && refusal.code) throw new UpdateError(refusal.code, refusal.message);
    }
  }
  const state = resume(touch(record, { components, status: 'settled' }), 'rollback', at);
  return beginRollback(state);
}

/**
 * Whether the replica `instanceId` follows a ramp at `percentage` (1-100): a stable bucket
 * (SHA-384 of the version and the id, first 32 bits, modulo 100), so the same replicas stay in as
 * the percentage grows and a new version reshuffles them.
 */
export function inRamp(instanceId: string, version: string, percentage: number): boolean {
  const h = createHash('sha384').update(`${version}\n${instanceId}`).digest();
  return h.readUInt32BE(0) % 100 < percentage;
}

/** Runs one effect and reports what it gave. */
export interface UpdateExecutor {
  persist(record: UpdateRecord): Promise<void>;
  run(effect: Exclude<Effect, { do: 'stop' }>): Promise<UpdateEvent>;
  /** The time stamped on records; default new Date().toISOString(). */
  now?(): string;
}

/**
 * Drives a machine from `first` to its `stop`: persists each record before running the effect
 * that follows it, reports each effect's event, and resolves to the final reply. An executor that
 * throws is reported as a failed step (the error's `code` when it is an update code).
 */
export async function driveUpdate(first: Step, executor: UpdateExecutor): Promise<UpdateReply> {
  let step = first;
  for (;;) {
    if (step.persist) await executor.persist(step.persist);
    if (step.effect.do === 'stop') return step.effect.reply;
    let event: UpdateEvent;
    try {
      event = await executor.run(step.effect);
    } catch (e) {
      const code = e instanceof UpdateError ? e.code : undefined;
      event = {
        type: 'failed',
        ...(code ? { code } : {}),
        ...(e instanceof UpdateError ? { message: e.message } : {}),
      };
    }
    step = advance(step.state, event, executor.now?.() ?? new Date().toISOString());
  }
}
