/**
 * Jobs (src/jobs/): the job's schema (route validation, stored shape and type from one TypeBox
 * definition) and the typed view every reader of a stored job uses.
 */
export { type JobSource, jobDestinations, type RunJob, runJobOf } from './job.ts';
export * from './schema.ts';
