/**
 * The engine's job and run shapes as the console reads them (apps/engine/src/jobs/schema.ts,
 * apps/engine/src/runs/view.ts, docs/jobs.md, docs/runs.md), the queries that load them and the
 * small pure helpers the screens share (conflict diff, error-to-field mapping, durations).
 */
import { useQuery } from '@tanstack/react-query';
import { api } from '../../api/client.ts';
import { ApiError } from '../../api/errors.ts';

export interface FilesSource {
  type: 'files';
  path: string;
  include?: string[];
  exclude?: string[];
}
export interface SqliteSource {
  type: 'sqlite';
  path: string;
  tables?: string[];
}
export interface RedisSource {
  type: 'redis';
  connection: string;
  db?: number;
  keyPrefix?: string;
}
export interface S3Source {
  type: 's3';
  connection: string;
  bucket: string;
  prefix?: string;
}
export type JobSource = FilesSource | SqliteSource | RedisSource | S3Source;
export type SourceType = JobSource['type'];

export interface Retention {
  keepLast?: number;
  keepDays?: number;
}

/** The stored job (`StoredJob`): what `POST /admin/jobs` answers in `job` and `GET /admin/jobs` lists. */
export interface JobConfig {
  id: string;
  name?: string;
  cadenceSeconds: number;
  enabled: boolean;
  source: JobSource;
  destinations: string[];
  retention?: Retention;
  skipUnchanged?: boolean;
  maxEntries?: number;
  restoreTestCadenceSeconds: number | null;
}

/** `POST /admin/jobs` body: a whole job plus the optional `ifMatchRev` precondition. */
export interface UpsertBody extends Omit<JobConfig, 'enabled' | 'destinations'> {
  enabled?: boolean;
  destinations?: string[];
  ifMatchRev?: number | null;
}

export interface UpsertReply {
  ok: true;
  id: string;
  configRev: number;
  created: boolean;
  job: JobConfig;
}

export type RunStatus = 'running' | 'parked' | 'ok' | 'failed' | 'abandoned';

/** Per destination of a run: `pending`, `writing`, `written`, `verified`, `failed`, `pruned`. */
export interface RunDestination {
  state: string;
  reason?: string | null;
  causeDigest?: string | null;
  shards?: number;
  bytes?: number;
  verifiedAt?: string;
  updatedAt?: string;
}

/** The run object of docs/runs.md. */
export interface RunObject {
  runId: string;
  job: string;
  seq: number;
  status: RunStatus;
  reason: string | null;
  causeDigest: string | null;
  warnings: number;
  records: number;
  bytes: number;
  trigger: string;
  startedAt: string;
  updatedAt: string;
  finishedAt: string | null;
  prevRunId: string | null;
  prevRunIdStatus: 'none' | 'retained' | 'pruned' | 'unknown';
  prunedAt: string | null;
  destinations: Record<string, RunDestination>;
  retryAt: string | null;
  strikes: number;
  unchangedFrom: string | null;
}

/** One row of `GET /admin/jobs`. */
export interface JobRow extends JobConfig {
  configRev: number;
  state: { paused: boolean; lastRun: RunObject | null };
}

/** `GET /admin/history?id=` */
export interface JobHistory {
  id: string;
  runs: RunObject[];
  runsRecordedTotal?: number;
  runsRetainedCount?: number;
  runsRolledOverCount?: number;
  runlogCounterReset?: boolean;
}

/** `GET /admin/runs/at?job=&at=` */
export type RunAt =
  | { found: true; job: string; at: string; run: RunObject }
  | {
      found: false;
      job: string;
      at: string;
      window: { oldest: string; newest: string; count: number } | null;
    };

/** `POST /admin/trigger` */
export interface TriggerReply {
  ok: true;
  id: string;
  runId: string;
  status: 'running';
}

/**
 * A save or delete held for a second person while configuration approval is on: the engine
 * answers 202 (docs/config-control.md "Pending changes"); it applies once approved on the
 * Configuration screen.
 */
export interface PendingChangeReply {
  ok: true;
  pending: true;
  changeId: string;
  status: 'pending';
  kind: 'job-upsert' | 'job-delete';
  id: string;
  baseRev: number | null;
  changedFields?: string[];
  expiresAt: string;
}

export function isPendingChange(x: unknown): x is PendingChangeReply {
  return typeof x === 'object' && x !== null && (x as PendingChangeReply).pending === true;
}

export interface DeleteReply {
  ok: true;
  id: string;
  deletedRev: number;
}

/** The 409 body of an `ifMatchRev` refusal (apps/engine/src/routes/admin/jobs/preconditions.ts). */
export interface PreconditionRefusal {
  error: string;
  refusal: 'precondition-failed';
  precondition: {
    reason:
      | 'base-moved'
      | 'deleted-under-you'
      | 'already-exists'
      | 'resurrect-refused'
      | 'already-deleted'
      | 'precondition-unreadable';
    id: string;
    yourRev?: number | null;
    currentRev: number | null;
    changedFields: string[];
    changedAt: string | null;
  };
}

export function preconditionOf(err: unknown): PreconditionRefusal['precondition'] | null {
  if (!(err instanceof ApiError) || err.status !== 409) return null;
  const body = err.body as Partial<PreconditionRefusal> | undefined;
  return body?.refusal === 'precondition-failed' && body.precondition ? body.precondition : null;
}

/** `GET /admin/destination` */
export interface DestinationList {
  destinations: { id: string; default: boolean; kind: 'fs' | 's3'; description: string; jobs: string[] }[];
}

/** `GET /admin/connections` */
export interface ConnectionList {
  connections: { id: string; type: 'redis' | 's3'; host: string; buckets?: string[]; restore: boolean }[];
}

export const JOBS_KEY = ['jobs'] as const;
export const historyKey = (id: string) => ['history', id] as const;

const inFlight = (run: RunObject | null | undefined) => run?.status === 'running' || run?.status === 'parked';

export function useJobs() {
  return useQuery({
    queryKey: JOBS_KEY,
    queryFn: () => api.get<{ jobs: JobRow[] }>('/admin/jobs'),
    // A run in flight: keep its row's last run current; otherwise notice scheduled runs now and then.
    refetchInterval: (q) =>
      q.state.status === 'error'
        ? false
        : q.state.data?.jobs.some((j) => inFlight(j.state.lastRun))
          ? 2000
          : 10_000,
  });
}

export function useHistory(id: string) {
  return useQuery({
    queryKey: historyKey(id),
    queryFn: () => api.get<JobHistory>(`/admin/history?id=${encodeURIComponent(id)}`),
    // Live progress: poll every second while a run of this job is running or parked; otherwise
    // every few seconds, so a run the scheduler starts appears without a reload.
    refetchInterval: (q) =>
      q.state.status === 'error' ? false : q.state.data?.runs.some((r) => inFlight(r)) ? 1000 : 5000,
  });
}

export function useDestinations() {
  return useQuery({
    queryKey: ['destinations'],
    queryFn: () => api.get<DestinationList>('/admin/destination'),
    staleTime: 60_000,
  });
}

export function useConnections(enabled: boolean) {
  return useQuery({
    queryKey: ['connections'],
    queryFn: () => api.get<ConnectionList>('/admin/connections'),
    staleTime: 60_000,
    enabled,
  });
}

/** The stored job of a listed row (no `configRev`, no `state`). */
export function configOf(row: JobRow): JobConfig {
  const { configRev: _rev, state: _state, ...config } = row;
  return config;
}

/** People-facing names of the job's fields (the engine's key follows in messages). */
export const FIELD_LABELS: Record<string, string> = {
  id: 'ID',
  name: 'Name',
  cadenceSeconds: 'Cadence',
  enabled: 'Paused',
  source: 'Source',
  destinations: 'Destinations',
  retention: 'Retention',
  skipUnchanged: 'Skip unchanged sources',
  maxEntries: 'Listing cap',
  restoreTestCadenceSeconds: 'Restore-test cadence',
};

export function fieldLabel(key: string): string {
  const label = FIELD_LABELS[key];
  return label ? `${label} (${key})` : key;
}

function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v ?? null);
}

/** Top-level fields whose values differ between two versions of a job. */
export function changedFields(a: JobConfig, b: JobConfig): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys]
    .filter(
      (k) =>
        stable((a as unknown as Record<string, unknown>)[k]) !==
        stable((b as unknown as Record<string, unknown>)[k]),
    )
    .sort();
}

/**
 * Which form field a 400 from the engine is about: schema errors name `body/<path>`
 * ("body/cadenceSeconds must be >= 60"), source refusals carry a code (docs/jobs.md).
 * Returns the field key (`cadenceSeconds`, `source.path`, `retention.keepLast`) and the rule.
 */
export function fieldOfError(err: unknown): { field: string; message: string } | null {
  if (!(err instanceof ApiError) || err.status !== 400) return null;
  const body = (err.body ?? {}) as { code?: string; error?: string };
  const text = body.error ?? '';
  const byCode: Record<string, string> = {
    ERR_JOB_PATH_NOT_ALLOWED: 'source.path',
    ERR_JOB_UNKNOWN_CONNECTION: 'source.connection',
    ERR_JOB_CONNECTION_TYPE: 'source.connection',
    ERR_JOB_INLINE_CONNECTION: 'source.connection',
    ERR_JOB_BUCKET_NOT_ALLOWED: 'source.bucket',
  };
  if (body.code && byCode[body.code]) return { field: byCode[body.code]!, message: text };
  const m = /^body\/([A-Za-z0-9/]+?)(?:\/\d+)?\s+(.*)$/.exec(text);
  if (!m) return null;
  return { field: m[1]!.replace(/\//g, '.'), message: m[2]! };
}

const UNITS: [number, string][] = [
  [86_400, 'day'],
  [3600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

/** 3600 -> "1 hour", 5400 -> "90 minutes". */
export function describeSeconds(s: number | null | undefined): string {
  if (s === null || s === undefined || !Number.isFinite(s) || s <= 0) return '–';
  for (const [size, unit] of UNITS) {
    if (s % size === 0) {
      const n = s / size;
      return `${n} ${unit}${n === 1 ? '' : 's'}`;
    }
  }
  return `${s} seconds`;
}

/** "1 min 5 s" between two times (or until now). */
export function elapsed(from: string, to?: string | null): string {
  const ms = (to ? Date.parse(to) : Date.now()) - Date.parse(from);
  if (!Number.isFinite(ms) || ms < 0) return '–';
  const s = Math.round(ms / 1000);
  if (s < 1) return `${ms} ms`;
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function runInFlight(run: RunObject | null | undefined): boolean {
  return inFlight(run);
}
