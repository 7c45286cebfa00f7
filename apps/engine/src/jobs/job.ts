/**
 * How the engine reads a stored job: one typed view (`runJobOf`) instead of a cast at every
 * reader, and the one rule for a job's destinations (`jobDestinations`).
 */
import type { JobRecord } from '@coffer/state';
import { DEFAULT_DESTINATION, type JobConfig } from './schema.ts';

/** A job's `source` object as stored: its `type`, and that type's fields (jobs/schema.ts `Source`). */
export type JobSource = { type: string } & Record<string, unknown>;

/**
 * What the run machinery, drills and restores read of a stored job: the schema's job
 * (`JobConfig`), with the source as stored. A job written before named connections may still hold
 * an inline redis/s3 source that could not be migrated (src/connections/migrate.ts); its runs fail
 * ERR_RUN_CONNECTION_UNCONFIGURED, so the source is typed by its `type` only.
 */
export type RunJob = Omit<Partial<JobConfig>, 'id' | 'source'> & { id: string; source: JobSource };

function isSource(v: unknown): v is JobSource {
  return typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string';
}

/**
 * The typed view of a stored job. A row without a usable source (it cannot be written through the
 * routes) reads as source type `unknown`, so its runs fail `unsupported source type` instead of
 * throwing inside the scheduler.
 */
export function runJobOf(record: Pick<JobRecord, 'id' | 'config'>): RunJob {
  const { config } = record;
  const source = isSource(config.source) ? config.source : { type: 'unknown' };
  return { ...(config as Omit<RunJob, 'id' | 'source'>), id: record.id, source };
}

/** The destinations a job writes to: its list, or the embedded default when it names none. */
export function jobDestinations(job: object): string[] {
  const d = (job as { destinations?: unknown }).destinations;
  return Array.isArray(d) && d.length > 0 && d.every((x) => typeof x === 'string')
    ? [...(d as string[])]
    : [DEFAULT_DESTINATION];
}
