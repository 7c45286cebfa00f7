/**
 * The persisted update record (docs/updates.md, "Update record"): what the engine stores after
 * each step that changes something, so a restart, a state restore or a second replica sees where
 * an update stands. The lifecycle machine returns every record it wants stored as `persist`, and
 * the caller stores it before running the effect that comes with it.
 */
import type { ComponentName, Risk } from './channel.ts';
import type { UpdateErrorCode } from './errors.ts';

/** The steps of the specification's lifecycle table, plus the two checks it names in its notes. */
export const LIFECYCLE_STEPS = [
  'no-update',
  'floor',
  'forward-only',
  'schema-epoch',
  'migration',
  'compat',
  'verify-artefact',
  'record-rollback-target',
  'dry-run',
  'destination',
  'upload',
  'read-back',
  'promote',
  'settle',
] as const;
export type LifecycleStep = (typeof LIFECYCLE_STEPS)[number];

/** Settled outcomes (specification "Update lifecycle"). */
export const SETTLED_OUTCOMES = ['applied', 'rolled-back', 'rollback-failed'] as const;
export type SettledOutcome = (typeof SETTLED_OUTCOMES)[number];

/** Where a record stands. */
export type RecordPhase =
  | 'uploading' // rollback target stored, nothing live changed yet
  | 'promoting' // uploads verified, promote running
  | 'settling' // promoted, canary flights running
  | 'awaiting-canary' // canary undecided after the retries: new version kept, scheduled canary decides
  | 'ramping' // ramp-shaped: the percentage of replicas follows the new version
  | 'rolling-back' // rollback deploy in progress (outcome already persisted as rollback-failed)
  | 'done';

export interface UpdateRecord {
  v: 1;
  id: string;
  /** `ramp` records are settled by `ramp/settle` only; `apply` records by `settle` only. */
  shape: 'apply' | 'ramp';
  /** pending: an update is in flight or awaits its verdict; settled: it has an outcome; refused. */
  status: 'pending' | 'settled' | 'refused';
  phase: RecordPhase;
  outcome: SettledOutcome | null;
  /** For refused records: the step and code that stopped it. */
  refusal: { step: LifecycleStep; code: UpdateErrorCode } | null;
  components: ComponentName[];
  /** The rollback target: versions live when the update started (null: none installed). */
  from: Partial<Record<ComponentName, string | null>>;
  to: Partial<Record<ComponentName, string>>;
  fromSchemaEpoch: number;
  toSchemaEpoch: number;
  risk: Risk;
  migration: boolean;
  /** The channel document the artefacts were verified against. */
  channel: { sequence: number; digest: string };
  readBack: { mode: 'warn' | 'enforce'; mismatched: ComponentName[] };
  /** Ramp-shaped records: the share of replicas (1-100) that follow `to`. */
  ramp: { percentage: number } | null;
  /** Components whose rollback deploy failed (outcome rollback-failed). */
  rollbackFailed: ComponentName[];
  /** When the outcome was `applied`: the floors the caller persists (highest version settled). */
  floors: Partial<Record<ComponentName, string>> | null;
  createdAt: string;
  updatedAt: string;
}
