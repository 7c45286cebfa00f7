/**
 * What a restore needs from the engine: the job's source as a connector configuration
 * (the restore target resolver), the run's job, whether a run is the job's latest, the approval
 * policy, and the allow-list of redis/s3 restore targets (`restoreTargetAllowed`). Connection
 * secrets are read from the environment variables the job's connection names, at resolve time, by
 * the run executor's own mapping (src/runs/source-config.ts); they never reach a reply.
 */
import type { ObjectStore } from '@coffer/objectstore';
import type { PlanOptions, RestoreRequest, TargetResolver } from '@coffer/restore';
import type { SourceConfig } from '@coffer/sources';
import type { SettingsRepository, State } from '@coffer/state';
import type { EngineConfig } from '../config.ts';
import type { ConnectionsConfig } from '../connections/config.ts';
import { restoreTargetRefusal } from '../connections/resolve.ts';
import type { EngineKeys } from '../keys.ts';
import type { ChunkedBaseCache } from '../runs/base-cache.ts';
import { type JobSource, jobSourceConfig } from '../runs/source-config.ts';
import { archiveRunOf } from '../runs/unchanged.ts';

/** The engine facts a restore plan is computed from. */
export interface RestoreDeps {
  state: State;
  keys: EngineKeys;
  config: EngineConfig;
  destinations: ReadonlyMap<string, ObjectStore>;
  /** The clock of restore planning and of the approval life-cycle. */
  now: () => Date;
  /** The bases the run service keeps for jobs' next runs (a restore of such a run shares its records). */
  bases?: ChunkedBaseCache | null;
}

/** Settings keys of the restore approval policy. */
export const APPROVAL_ENABLED_KEY = 'restore.approval.enabled';
export const APPROVAL_MIN_DELAY_KEY = 'restore.approval.minDelaySeconds';
export const DRILL_EVIDENCE_PREFIX = 'drill.evidence.';

/**
 * A job's `source` object as a @coffer/sources configuration, or null when it is not one: the run
 * executor's own mapping (src/runs/source-config.ts), so a restore writes back into exactly the
 * resource the run read.
 */
export function sourceConfigOf(
  source: Record<string, unknown> | undefined,
  binding: string,
  connections: ConnectionsConfig,
): SourceConfig | null {
  if (!source || typeof source.type !== 'string') return null;
  return jobSourceConfig(source as JobSource, binding, connections) as SourceConfig | null;
}

/**
 * Binding (job id) -> the job's source configuration. A job that names no usable connection
 * throws, which the planner reports as an unresolvable target.
 */
export function jobResolver(deps: Pick<RestoreDeps, 'state' | 'config'>): TargetResolver {
  return async (binding) => {
    const job = await deps.state.jobs.get(binding);
    return job
      ? sourceConfigOf(
          job.config.source as Record<string, unknown> | undefined,
          binding,
          deps.config.connections,
        )
      : null;
  };
}

/**
 * Why an apply of `request` into the target `binding` (the plan's resolved binding) would be
 * refused by the redis/s3 allow-list, or null when it is allowed: the target's connection must
 * have `restore: true`, and an s3 bucket (a `target.bucketName` override included) must be within
 * its `buckets` when set. The apply routes refuse with ERR_RESTORE_TARGET_NOT_ALLOWED; a dry run
 * can show the same sentence as an advisory.
 */
export async function restoreTargetAllowed(
  deps: Pick<RestoreDeps, 'state' | 'config'>,
  binding: string,
  request: Pick<RestoreRequest, 'target'>,
): Promise<string | null> {
  const job = await deps.state.jobs.get(binding);
  const override = (request.target as { bucketName?: string } | undefined)?.bucketName;
  return restoreTargetRefusal(job?.config.source as JobSource | undefined, override, deps.config.connections);
}

/**
 * The plan options of a request, with the engine's stores, keys, roots and run facts. A run
 * recorded `ok` with `unchangedFrom` is read from the archive that holds its data (`runId`).
 */
export async function planOptionsFor(
  deps: RestoreDeps,
  request: PlanOptions['request'],
): Promise<PlanOptions> {
  const { state, keys, config, destinations } = deps;
  const run = await state.runs.get(request.runId);
  let isLatest = false;
  if (run) isLatest = (await state.runs.latestOk(run.jobId))?.id === run.id;
  const archiveRun = run ? await archiveRunOf(state.runs, run) : undefined;
  // The base kept for the job's next run, when it is of the run read: the plan's reader shares its
  // records instead of parsing and holding them again (docs/operations.md "Memory").
  const store = destinations.get(request.destinationId ?? 'default');
  const operational = keys.operational?.publicKey;
  const known =
    run && archiveRun !== undefined && store !== undefined && operational !== undefined
      ? (deps.bases?.peek(store, run.jobId, archiveRun, operational) ?? null)
      : null;
  return {
    stores: Object.fromEntries(destinations),
    defaultDestinationId: 'default',
    ...(run ? { job: run.jobId, runId: archiveRun } : {}),
    ...(known === null ? {} : { knownRecords: known }),
    operationalSecretKey: keys.operational?.secretKey ?? null,
    signerPublicKey: keys.signer.publicKey,
    request,
    targetResolver: jobResolver(deps),
    restoreRoots: config.restoreRoots,
    // The redis/s3 allow-list: an advisory in a dry run or verify, a refusal of a request or apply.
    targetChecks: [
      async (t) => {
        const refused = await restoreTargetAllowed(deps, t.target.binding, request);
        return refused === null ? null : { code: 'ERR_RESTORE_TARGET_NOT_ALLOWED', message: refused };
      },
    ],
    isLatest,
    now: deps.now,
  };
}

export interface ApprovalPolicy {
  enabled: boolean;
  minDelaySeconds: number;
}

/** The owner's approval policy (dual control), as stored in the settings. */
export async function approvalPolicy(s: SettingsRepository): Promise<ApprovalPolicy> {
  const enabled = (await s.get<boolean>(APPROVAL_ENABLED_KEY)) === true;
  const d = await s.get<number>(APPROVAL_MIN_DELAY_KEY);
  return { enabled, minDelaySeconds: typeof d === 'number' && Number.isFinite(d) && d >= 0 ? d : 60 };
}
