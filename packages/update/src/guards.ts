/**
 * The version guards of the update lifecycle (engine HTTP interface, "Update lifecycle" and
 * "Versioning"), pure functions over semantic versions (the `semver` package).
 *
 * In order: already current (`no-update`), the anti-rollback floor (the highest version ever
 * settled, supplied by the caller from persisted state; refused always, even with the downgrade
 * opt-in), forward-only (an older or uncomparable target needs the explicit downgrade opt-in),
 * schema epoch (a downgrade never crosses a schema epoch), the migration guard (a release that
 * migrates state cannot take one-click apply or the gradual ramp) and the compat guard (the
 * running engine must be at least the release's minimum engine version).
 */
import semver from 'semver';
import type { RecommendedRelease } from './channel.ts';
import type { UpdateErrorCode } from './errors.ts';

/** How an apply reaches the guards: one click, after a second owner approved, or the ramp. */
export type ApplyPath = 'one-click' | 'approved' | 'ramp';

/** The guard steps, in the order they run. */
export const GUARD_STEPS = [
  'no-update',
  'floor',
  'forward-only',
  'schema-epoch',
  'migration',
  'compat',
] as const;
export type GuardStep = (typeof GUARD_STEPS)[number];

export interface GuardInput {
  /** The component's target version (from the verified channel). */
  target: string;
  /** The component's running version; null when none is installed (first install). */
  running: string | null;
  /** The running engine's version (the compat guard compares the release's minimum with it). */
  runningEngine: string;
  /** The highest version of this component ever settled (`applied`); null when none. */
  floor: string | null;
  /** The schema epoch the running engine is on. */
  runningSchemaEpoch: number;
  release: RecommendedRelease;
  path: ApplyPath;
  allowDowngrade?: boolean;
}

/** A guard's verdict: pass, `no-update`, or a refusal with its step and stable code. */
export type GuardVerdict =
  | { ok: true; downgrade: boolean }
  | { ok: false; step: 'no-update'; code: null; message: string }
  | { ok: false; step: Exclude<GuardStep, 'no-update'>; code: UpdateErrorCode; message: string };

/** -1, 0 or 1 for two valid versions; null when either is not a semantic version. */
export function compareVersions(
  a: string | null | undefined,
  b: string | null | undefined,
): -1 | 0 | 1 | null {
  if (typeof a !== 'string' || typeof b !== 'string' || !semver.valid(a) || !semver.valid(b)) return null;
  return semver.compare(a, b);
}

/** The higher of the persisted floor and a newly settled version (what the caller persists). */
export function raiseFloor(floor: string | null, settled: string): string {
  const c = compareVersions(floor, settled);
  return c === null ? (semver.valid(settled) ? settled : (floor ?? settled)) : c >= 0 ? floor! : settled;
}

/**
 * Runs the guards in order and returns the first that does not pass. Pure; never throws.
 */
export function runGuards(input: GuardInput): GuardVerdict {
  const { target, running, floor, release } = input;
  if (running !== null && running === target)
    return { ok: false, step: 'no-update', code: null, message: `already on ${target}` };
  const belowFloor = floor !== null && compareVersions(target, floor);
  if (belowFloor === null || belowFloor === -1)
    return {
      ok: false,
      step: 'floor',
      code: 'ERR_UPDATE_BELOW_FLOOR',
      message: `${target} is below the highest version ever settled (${floor})`,
    };
  let downgrade = false;
  if (running !== null) {
    const c = compareVersions(target, running);
    if (c === null)
      return {
        ok: false,
        step: 'forward-only',
        code: 'ERR_UPDATE_FORWARD_ONLY',
        message: `${target} cannot be compared with the running version`,
      };
    if (c < 0) {
      if (!input.allowDowngrade)
        return {
          ok: false,
          step: 'forward-only',
          code: 'ERR_UPDATE_FORWARD_ONLY',
          message: `${target} is older than the running ${running} and downgrade is not allowed`,
        };
      downgrade = true;
      if (release.schemaEpoch !== input.runningSchemaEpoch)
        return {
          ok: false,
          step: 'schema-epoch',
          code: 'ERR_UPDATE_SCHEMA_EPOCH',
          message: `a downgrade may not cross schema epochs (${input.runningSchemaEpoch} to ${release.schemaEpoch})`,
        };
    }
  }
  if (release.migration && input.path !== 'approved')
    return {
      ok: false,
      step: 'migration',
      code: 'ERR_UPDATE_MIGRATION_GUARD',
      message:
        input.path === 'ramp'
          ? 'a release that migrates state cannot use the gradual ramp'
          : 'a release that migrates state cannot use one-click apply',
    };
  if (release.minEngineVersion !== undefined) {
    const c = compareVersions(input.runningEngine, release.minEngineVersion);
    if (c === null || c < 0)
      return {
        ok: false,
        step: 'compat',
        code: 'ERR_UPDATE_INCOMPATIBLE',
        message: `the release needs engine ${release.minEngineVersion} or newer`,
      };
  }
  return { ok: true, downgrade };
}

/**
 * Whether a rollback from the version now live to the recorded target may run: refused when the
 * two lie in different schema epochs (state migrated in between). Returns null when allowed.
 */
export function checkRollback(
  from: { schemaEpoch: number },
  to: { schemaEpoch: number },
): GuardVerdict | null {
  if (from.schemaEpoch === to.schemaEpoch) return null;
  return {
    ok: false,
    step: 'schema-epoch',
    code: 'ERR_UPDATE_SCHEMA_EPOCH',
    message: `rollback across schema epochs (${from.schemaEpoch} to ${to.schemaEpoch}) is refused`,
  };
}
