/**
 * The repository suite: ONE set of tests run against every backend (sqlite.test.ts on a real
 * temp file, postgres.test.ts on the real loopback server). A Target hands out State instances on
 * one fresh database, so tests can open two of them to play two engine processes.
 */
import type { Test } from 'tap';
import type { OpenStateOptions, PreconditionReason, State } from '../src/index.ts';
import { StateError } from '../src/index.ts';
import { auditSuite, leasesSuite, rateLimitsSuite } from './suite-concurrency.ts';
import { jobsSuite } from './suite-jobs.ts';
import { miscSuite } from './suite-misc.ts';
import { peopleSuite } from './suite-people.ts';
import { runsSuite } from './suite-runs.ts';

export interface Target {
  backend: 'sqlite' | 'postgres';
  /** Connection options of this target's database (url for PostgreSQL, dataDir for SQLite). */
  options: OpenStateOptions;
  /** Opens a State on this target's database; closed on teardown. */
  open(extra?: Partial<OpenStateOptions>): Promise<State>;
}

/** Creates a fresh, empty database for one test. */
export type MakeTarget = (t: Test) => Promise<Target>;

/** A settable clock shared by State instances (lease expiry, session expiry). */
export function clock(start = Date.parse('2030-01-01T00:00:00.000Z')) {
  let now = start;
  return {
    now: () => new Date(now),
    advance(ms: number) {
      now += ms;
    },
  };
}

/** Expects an ERR_STATE_PRECONDITION refusal with `reason`; returns the precondition object. */
export async function refusal(t: Test, p: Promise<unknown>, reason: PreconditionReason, what: string) {
  try {
    await p;
  } catch (e) {
    t.ok(e instanceof StateError, `${what}: a StateError`);
    const err = e as StateError;
    t.equal(err.code, 'ERR_STATE_PRECONDITION', `${what}: code`);
    t.equal(err.precondition?.reason, reason, `${what}: reason ${reason}`);
    return err.precondition as NonNullable<StateError['precondition']>;
  }
  t.fail(`${what}: expected a ${reason} refusal`);
  throw new Error('unreachable');
}

/** Expects a StateError with `code`. */
export async function failsWith(t: Test, p: Promise<unknown>, code: string, what: string) {
  try {
    await p;
  } catch (e) {
    t.equal((e as StateError).code, code, what);
    return e as StateError;
  }
  t.fail(`${what}: expected ${code}`);
  return undefined;
}

export function repositorySuite(t: Test, makeTarget: MakeTarget): void {
  t.test('jobs', (t) => jobsSuite(t, makeTarget));
  t.test('runs and checkpoints', (t) => runsSuite(t, makeTarget));
  t.test('leases', (t) => leasesSuite(t, makeTarget));
  t.test('rate limits', (t) => rateLimitsSuite(t, makeTarget));
  t.test('audit', (t) => auditSuite(t, makeTarget));
  t.test('people: passkeys, recovery codes, single-use tokens', (t) => peopleSuite(t, makeTarget));
  t.test('settings, roles, sessions, approvals, credentials, notifications, updates, migrations', (t) =>
    miscSuite(t, makeTarget),
  );
}
