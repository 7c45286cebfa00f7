/**
 * `openState`: opens the engine's state store (SQLite file in the data dir by default, PostgreSQL
 * for several engine replicas), runs the code-defined migrations (serialised across processes),
 * and returns the repositories. Security: the connection URL's credentials never appear in
 * `description` or in any error.
 */
import type { OpenStateOptions, State } from './api.ts';
import { StateError } from './errors.ts';
import { Db } from './internal/db.ts';
import { jobsRepository } from './internal/jobs.ts';

// Placeholder for repositories still being written: every call throws ERR_STATE_UNAVAILABLE.
function notYet<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get: () => async () => {
      throw new StateError('ERR_STATE_UNAVAILABLE', `state repository ${name} is not implemented yet`);
    },
  });
}

/**
 * Opens the state store. Returns a State whose repositories are ready; call `close()` on
 * shutdown. Throws StateError: ERR_STATE_INVALID (bad options/URL scheme), ERR_STATE_UNAVAILABLE
 * (cannot open or connect), ERR_STATE_MIGRATION (migration failed, or the database was migrated
 * by a newer engine).
 */
export async function openState(options: OpenStateOptions): Promise<State> {
  const db = await Db.open(options);
  return {
    backend: db.backend,
    description: db.description,
    jobs: jobsRepository(db),
    runs: notYet('runs'),
    checkpoints: notYet('checkpoints'),
    leases: notYet('leases'),
    settings: notYet('settings'),
    roles: notYet('roles'),
    sessions: notYet('sessions'),
    approvals: notYet('approvals'),
    audit: notYet('audit'),
    credentials: notYet('credentials'),
    notifications: notYet('notifications'),
    updates: notYet('updates'),
    ping: () => db.ping(),
    close: () => db.close(),
  };
}
