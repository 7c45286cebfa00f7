/**
 * The job (a configured backup) as TypeBox schemas: request validation on the routes
 * (routes/admin/jobs), the stored shape, and the type every reader of a job uses (jobs/job.ts);
 * documented in docs/jobs.md. Unknown properties are refused at every level: a job is a
 * whole-object upsert, so a misspelt field must fail loudly rather than be dropped. Endpoints and
 * credentials are never part of a job: a redis or s3 source names a connection that only the
 * deployment's configuration defines (ENGINE_CONNECTIONS_FILE, src/connections).
 */
import { type Static, Type } from 'typebox';

export const ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';
export const DEFAULT_DESTINATION = 'default';
export const MIN_CADENCE_SECONDS = 60;
export const MAX_CADENCE_SECONDS = 366 * 24 * 3600;
/** Ceiling of a job's `maxEntries` (the source listing cap, docs/jobs.md; default DEFAULT_MAX_ENTRIES). */
export const MAX_MAX_ENTRIES = 100_000_000;

const strict = { additionalProperties: false } as const;
const Id = Type.String({
  pattern: ID_PATTERN,
  description: 'letters, digits, dot, underscore, hyphen; 1-64',
});
const Path = Type.String({ minLength: 1, maxLength: 4096, pattern: '^/' });
const Selector = Type.Array(Type.String({ minLength: 1, maxLength: 1024 }), { maxItems: 256 });

export const FilesSource = Type.Object(
  {
    type: Type.Literal('files'),
    path: Path,
    include: Type.Optional(Selector),
    exclude: Type.Optional(Selector),
  },
  strict,
);

export const SqliteSource = Type.Object(
  {
    type: Type.Literal('sqlite'),
    path: Path,
    tables: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 1024 })),
  },
  strict,
);

/** A redis source names a connection of ENGINE_CONNECTIONS_FILE (never a URL or a credential). */
export const RedisSource = Type.Object(
  {
    type: Type.Literal('redis'),
    connection: Id,
    db: Type.Optional(Type.Integer({ minimum: 0, maximum: 1023 })),
    keyPrefix: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  strict,
);

/** An s3 source names a connection of ENGINE_CONNECTIONS_FILE and a bucket it allows. */
export const S3Source = Type.Object(
  {
    type: Type.Literal('s3'),
    connection: Id,
    bucket: Type.String({ minLength: 3, maxLength: 63, pattern: '^[a-z0-9][a-z0-9.-]+[a-z0-9]$' }),
    prefix: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  strict,
);

export const Source = Type.Union([FilesSource, SqliteSource, RedisSource, S3Source]);

export const Retention = Type.Object(
  {
    keepLast: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000 })),
    keepDays: Type.Optional(Type.Integer({ minimum: 1, maximum: 36500 })),
  },
  strict,
);

const jobFields = {
  id: Id,
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  cadenceSeconds: Type.Integer({ minimum: MIN_CADENCE_SECONDS, maximum: MAX_CADENCE_SECONDS }),
  enabled: Type.Optional(Type.Boolean()),
  source: Source,
  destinations: Type.Optional(Type.Array(Id, { minItems: 1, maxItems: 16, uniqueItems: true })),
  retention: Type.Optional(Retention),
  /** Record an unchanged source as `ok` with `unchangedFrom`, no new archive (docs/runs.md); default false. */
  skipUnchanged: Type.Optional(Type.Boolean()),
  /**
   * Seal runs in archive format 0.2 (docs/archive-format.md §12): chunks deduplicated against the
   * job's earlier runs, records whose change token is unchanged referenced unread; default false.
   */
  incremental: Type.Optional(Type.Boolean()),
  /** Most entries one run may list from the source (default 2,000,000, runs/executor.ts); more fails the run. */
  maxEntries: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_MAX_ENTRIES })),
  restoreTestCadenceSeconds: Type.Optional(
    Type.Union([Type.Integer({ minimum: 3600, maximum: MAX_CADENCE_SECONDS }), Type.Null()]),
  ),
  /** Read-only: accepted so a listed row can be sent back unchanged, and ignored. */
  configRev: Type.Optional(Type.Integer({ minimum: 0 })),
};

/** A job as sent by a client (defaults not yet applied). */
export const JobInput = Type.Object(jobFields, strict);
export type JobInput = Static<typeof JobInput>;

/** The body of `POST /admin/jobs`: a job plus the optional `ifMatchRev` precondition. */
export const UpsertBody = Type.Object(
  { ...jobFields, ifMatchRev: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])) },
  strict,
);
export type UpsertBody = Static<typeof UpsertBody>;

export const MAX_BATCH = 100;

/**
 * The body of `POST /admin/jobs/bulk`. Items are checked one by one in the handler (an invalid
 * item is an `error` outcome, not a refusal of the batch), so the item schema here is loose;
 * the batch cap is checked in the handler so that the refusal can echo `maxBatch`.
 */
export const BulkBody = Type.Object({ jobs: Type.Array(Type.Object({})) }, strict);
export type BulkBody = Static<typeof BulkBody>;

export const DeleteBody = Type.Object(
  { id: Id, ifMatchRev: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])) },
  strict,
);
export type DeleteBody = Static<typeof DeleteBody>;

/**
 * The stored job: the input with defaults applied and no precondition or revision fields. The
 * same schema gives the route validation (`JobInput`, `UpsertBody`), the stored shape and, through
 * `JobConfig`, the type the run executor, the scheduler, drills and restores read (jobs/job.ts).
 */
export const StoredJob = Type.Object(
  {
    id: Id,
    name: jobFields.name,
    cadenceSeconds: jobFields.cadenceSeconds,
    enabled: Type.Boolean(),
    source: Source,
    destinations: Type.Array(Id, { minItems: 1, maxItems: 16, uniqueItems: true }),
    retention: Type.Optional(Retention),
    skipUnchanged: Type.Optional(Type.Boolean()),
    incremental: Type.Optional(Type.Boolean()),
    maxEntries: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_MAX_ENTRIES })),
    restoreTestCadenceSeconds: Type.Union([
      Type.Integer({ minimum: 3600, maximum: MAX_CADENCE_SECONDS }),
      Type.Null(),
    ]),
  },
  strict,
);
export type JobConfig = Static<typeof StoredJob>;

/** Applies the documented defaults; drops `ifMatchRev` and `configRev`. */
export function normaliseJob(input: JobInput | UpsertBody): JobConfig {
  const job: JobConfig = {
    id: input.id,
    cadenceSeconds: input.cadenceSeconds,
    enabled: input.enabled ?? true,
    source: input.source,
    destinations: input.destinations ?? [DEFAULT_DESTINATION],
    restoreTestCadenceSeconds: input.restoreTestCadenceSeconds ?? null,
  };
  if (input.name !== undefined) job.name = input.name;
  if (input.retention !== undefined) job.retention = input.retention;
  if (input.skipUnchanged !== undefined) job.skipUnchanged = input.skipUnchanged;
  if (input.incremental !== undefined) job.incremental = input.incremental;
  if (input.maxEntries !== undefined) job.maxEntries = input.maxEntries;
  return job;
}
