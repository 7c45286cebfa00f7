/**
 * @coffer/state: the engine's state store (the specification's per-account scheduler state
 * object and everything else the engine keeps): jobs with `configRev` and the `ifMatchRev`
 * precondition, run history rings and counters, sealed run checkpoints, leases (run lock,
 * scheduler tick), settings, roles and custom roles, sessions, approvals, the append-only audit
 * chain, pull credentials, notifications and update state.
 *
 * One code base over SQLite (embedded default, `<dataDir>/state.sqlite`) and PostgreSQL (several
 * engine replicas), through Kysely. Security-relevant behaviour: writes the specification makes
 * atomic are single transactions serialised across processes; no error message carries a
 * connection-string password or a driver message; the store never holds a pull-credential
 * secret (only its verifier) or a session cookie value (only its digest, by contract).
 *
 * Usage: `const state = await openState({ url: process.env.ENGINE_DATABASE_URL, dataDir });`
 * ... `await state.close();`
 */
export type * from './api.ts';
export type { StateErrorCode } from './errors.ts';
export { isStateError, STATE_ERROR_CODES, StateError } from './errors.ts';
export {
  holdLease,
  type KeepLeaseOptions,
  keepLease,
  LEASE_TAKEN,
  LEASE_UNRENEWABLE,
} from './held-lease.ts';
export { openState } from './open.ts';
