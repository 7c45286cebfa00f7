/**
 * `openState`: opens the engine's state store (SQLite file in the data dir by default, PostgreSQL
 * for several engine replicas), runs the code-defined migrations (serialised across processes),
 * and returns the repositories. Security: the connection URL's credentials never appear in
 * `description` or in any error.
 */
import type { OpenStateOptions, State } from './api.ts';
import { approvalsRepository } from './internal/approvals.ts';
import { auditRepository } from './internal/audit.ts';
import { credentialsRepository } from './internal/credentials.ts';
import { Db } from './internal/db.ts';
import { rolesRepository, sessionsRepository } from './internal/identity.ts';
import { jobsRepository } from './internal/jobs.ts';
import { keyValueRepository, updateStateRepository } from './internal/kv.ts';
import { leasesRepository } from './internal/leases.ts';
import { notificationsRepository } from './internal/notifications.ts';
import { identityRepository } from './internal/people.ts';
import { rateLimitsRepository } from './internal/rate-limits.ts';
import { checkpointsRepository, runsRepository } from './internal/runs.ts';

/**
 * Opens the state store and migrates it to the latest schema. Returns a State whose
 * repositories are ready; call `close()` on shutdown. Throws StateError: ERR_STATE_INVALID (bad
 * options or URL scheme), ERR_STATE_UNAVAILABLE (cannot open the file or connect), ERR_STATE_CORRUPT
 * (the SQLite file is not a database), ERR_STATE_MIGRATION (a migration failed, or the database
 * was migrated by a newer engine).
 */
export async function openState(options: OpenStateOptions): Promise<State> {
  const db = await Db.open(options);
  return {
    backend: db.backend,
    description: db.description,
    jobs: jobsRepository(db),
    runs: runsRepository(db),
    checkpoints: checkpointsRepository(db),
    leases: leasesRepository(db),
    rateLimits: rateLimitsRepository(db),
    settings: keyValueRepository(db, 'settings'),
    roles: rolesRepository(db),
    sessions: sessionsRepository(db),
    identity: identityRepository(db),
    approvals: approvalsRepository(db),
    audit: auditRepository(db),
    credentials: credentialsRepository(db),
    notifications: notificationsRepository(db),
    updates: updateStateRepository(db),
    ping: () => db.ping(),
    durability: () => db.durability(),
    close: () => db.close(),
  };
}
