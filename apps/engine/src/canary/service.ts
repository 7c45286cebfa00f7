/**
 * The integrity canary (specification "Canary: hourly per destination, inside its own
 * namespace"): `CanaryService` flies a flight set (one flight per configured destination, in
 * parallel; flight.ts) on a timer, on the test-fault `canary-tick`, and when the update lifecycle
 * asks (`settle`, `boot`), and keeps the verdicts.
 *
 * - `fly(trigger)`: one flight set; calls made while a set is in flight share it. The set's verdict
 *   is dead if any destination is dead, alive if every destination is alive, else undecided (also
 *   with no destination at all). After the set: the flights are stored (history.ts), a dead flight
 *   writes one `canary-dead` audit row, and the `onVerdict` listeners run (awaited, one after the
 *   other, errors logged), except for a `settle` set, whose caller acts on the verdict itself. A
 *   listener may fly again: by then the set is no longer in flight, so it starts a new one.
 * - `selfCheck()`: the same seal, sign and verify round trip in memory (no destination).
 * - `start()` / `stop()`: the schedule, first flight one interval after start; the timer is unref'd.
 *
 * Destinations are the ones runs see (`app.runs.stores`), so the test-fault wrapper
 * (HARNESS_TEST_FAULTS) applies to canary writes as it does to runs. Each destination is seen
 * through the canary namespace `_canary/` only (store.ts): a flight cannot touch a run's objects,
 * and runs, retention, restores and the pull endpoints never list the canary's.
 *
 * Security-relevant behaviour: flights, log lines and audit rows carry ids, verdicts, codes and
 * fixed messages only; never a key, credential, endpoint URL, object key or raw error text.
 */
import type { AuditEventInput } from '@coffer/audit';
import type { ObjectStore } from '@coffer/objectstore';
import type { SettingsRepository } from '@coffer/state';
import { ENGINE_ACTOR } from '../audit/index.ts';
import { newRunId } from '../runs/instance-id.ts';
import { ENGINE_VERSION } from '../version.ts';
import { type CanaryKeys, flightTime, flyOnce, sweep } from './flight.ts';
import { CanaryHistory } from './history.ts';
import { canaryStore, memoryStore } from './store.ts';
import {
  type CanaryFlight,
  type CanaryResult,
  type CanarySet,
  type CanaryTrigger,
  type CanaryVerdict,
  type CanaryView,
  overallVerdict,
} from './types.ts';

export interface CanaryLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

export type CanaryListener = (result: CanaryResult) => void | Promise<void>;

export interface CanaryServiceOptions {
  settings: SettingsRepository;
  keys: CanaryKeys;
  /** The destinations as runs see them (fault-wrapped under HARNESS_TEST_FAULTS), read per set. */
  destinations: () => ReadonlyMap<string, ObjectStore>;
  log: CanaryLogger;
  /** Where a dead flight is recorded (`canary-dead`); never throws (app.audit.append). */
  audit?: { append(input: AuditEventInput): Promise<unknown> } | null;
  /** The engine's stable instance id (the run holder id). */
  instanceId: string;
  /** ENGINE_CANARY_INTERVAL_SECONDS. */
  intervalSeconds: number;
  /** Test-only: the interval in milliseconds (overrides intervalSeconds for the timer only). */
  intervalMs?: number;
  /** Default ENGINE_VERSION. */
  engineVersion?: string;
  /** A flight not read back after this long is undecided (default 60 s). */
  flightTimeoutMs?: number;
  /**
   * Earlier flights are swept only when they started at least this long before the new one
   * (default 10 minutes: another replica may still be flying a younger one).
   */
  sweepGraceMs?: number;
  /** Archive worker threads (default: the archive's default, as runs). */
  workers?: number;
  now?: () => Date;
}

const DEFAULT_TIMEOUT_MS = 60_000;
const SELF_CHECK_TIMEOUT_MS = 120_000;
const DEFAULT_SWEEP_GRACE_MS = 10 * 60_000;
/** How long `stop()` waits for a set in flight. */
const STOP_WAIT_MS = 5_000;

export class CanaryService {
  readonly intervalSeconds: number;
  readonly engineVersion: string;
  readonly instanceId: string;
  readonly #o: CanaryServiceOptions;
  readonly #history: CanaryHistory;
  readonly #listeners: CanaryListener[] = [];
  readonly #now: () => Date;
  /** The flights of the set in flight (before its listeners run). */
  #flying: Promise<CanaryResult> | null = null;
  /** The same set including its listeners: what joining callers wait for. */
  #joined: Promise<CanaryResult> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;

  constructor(options: CanaryServiceOptions) {
    this.#o = options;
    this.intervalSeconds = options.intervalSeconds;
    this.engineVersion = options.engineVersion ?? ENGINE_VERSION;
    this.instanceId = options.instanceId;
    this.#history = new CanaryHistory(options.settings);
    this.#now = options.now ?? (() => new Date());
  }

  /** Registers a listener called after every flight set except `settle` ones. */
  onVerdict(listener: CanaryListener): void {
    this.#listeners.push(listener);
  }

  /** Flies one set (or joins the one in flight). Never throws. */
  fly(trigger: CanaryTrigger): Promise<CanaryResult> {
    // Shutting down: nothing flies, nothing is recorded, no listener runs.
    if (this.#stopped) return Promise.resolve({ verdict: 'undecided', flights: [] });
    if (this.#flying !== null && this.#joined !== null) return this.#joined;
    const flying = this.#flySet(trigger).catch((err: unknown): CanaryResult => {
      this.#o.log.error(
        { event: 'canary-set-failed', trigger, code: (err as { code?: string }).code },
        `canary ${trigger}: the flight set failed; undecided`,
      );
      return { verdict: 'undecided', flights: [] };
    });
    this.#flying = flying;
    const joined = flying.then(async (result) => {
      // No longer in flight: a listener that flies again starts a new set instead of waiting here.
      if (this.#flying === flying) {
        this.#flying = null;
        this.#joined = null;
      }
      if (trigger !== 'settle') await this.#notify(result);
      return result;
    });
    this.#joined = joined;
    return joined;
  }

  /**
   * The seal, sign and verify round trip with the engine's keys in memory: `alive` when this build
   * can seal an archive and read it back, else `dead` (logged with its code). Never throws.
   */
  async selfCheck(): Promise<'alive' | 'dead'> {
    const id = newRunId(this.#now());
    const outcome = await flyOnce(memoryStore(), {
      id,
      keys: this.#o.keys,
      engineVersion: this.engineVersion,
      timeoutMs: SELF_CHECK_TIMEOUT_MS,
      ...(this.#o.workers !== undefined ? { workers: this.#o.workers } : {}),
    });
    if (outcome.verdict === 'alive') return 'alive';
    this.#o.log.error(
      { event: 'canary-self-check', verdict: 'dead', code: outcome.code },
      `canary self-check failed: ${outcome.message}`,
    );
    return 'dead';
  }

  /** What `GET /admin/canary` shows: the interval, the latest set and each destination's flights. */
  async last(): Promise<CanaryView> {
    const set = await this.#history.lastSet();
    const destinations = [];
    for (const destination of this.#o.destinations().keys()) {
      const flights = await this.#history.flights(destination);
      destinations.push({ destination, last: flights[0] ?? null, flights });
    }
    return {
      intervalSeconds: this.intervalSeconds,
      verdict: set?.verdict ?? null,
      lastFlightAt: set?.finishedAt ?? null,
      destinations,
    };
  }

  /** Starts the schedule: a set every interval, the first one interval from now. */
  start(): void {
    this.#stopped = false;
    if (this.#timer !== null) return;
    const every = this.#o.intervalMs ?? this.intervalSeconds * 1000;
    this.#timer = setInterval(() => {
      void this.fly('schedule');
    }, every);
    this.#timer.unref();
  }

  /** Stops the schedule and waits (a few seconds at most) for a set in flight. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    const joined = this.#joined;
    if (joined === null) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      joined.then(() => undefined),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, STOP_WAIT_MS);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }

  // -------------------------------------------------------------------------------------------

  async #flySet(trigger: CanaryTrigger): Promise<CanaryResult> {
    const startedAt = this.#now().toISOString();
    const destinations = [...this.#o.destinations()];
    const flights = await Promise.all(destinations.map(([id, store]) => this.#flyTo(id, store, trigger)));
    const verdict: CanaryVerdict = overallVerdict(flights);
    const set: CanarySet = {
      verdict,
      trigger,
      startedAt,
      finishedAt: this.#now().toISOString(),
      destinations: flights.map((f) => f.destination),
      engineVersion: this.engineVersion,
      instanceId: this.instanceId,
    };
    try {
      await this.#history.record(set, flights);
    } catch (err) {
      this.#o.log.error(
        { event: 'canary-record-failed', code: (err as { code?: string }).code },
        'canary flights not recorded in the state store',
      );
    }
    for (const f of flights.filter((x) => x.verdict === 'dead')) {
      await this.#o.audit
        ?.append({
          action: 'canary-dead',
          actor: { ...ENGINE_ACTOR },
          outcome: 'failed',
          target: f.destination,
          detail: { destination: f.destination, code: f.code, flight: f.id, trigger },
        })
        ?.catch(() => undefined);
    }
    const log = verdict === 'dead' ? 'error' : verdict === 'undecided' ? 'warn' : 'info';
    this.#o.log[log](
      { event: 'canary-set', trigger, verdict, destinations: flights.length },
      destinations.length === 0
        ? `canary ${trigger}: no destination to fly to; undecided`
        : `canary ${trigger}: ${verdict}`,
    );
    return { verdict, flights };
  }

  /** One flight to one destination, through its canary namespace; then the sweep when alive. */
  async #flyTo(destination: string, store: ObjectStore, trigger: CanaryTrigger): Promise<CanaryFlight> {
    const started = this.#now();
    const id = newRunId(started);
    const scoped = canaryStore(store);
    const outcome = await flyOnce(scoped, {
      id,
      keys: this.#o.keys,
      engineVersion: this.engineVersion,
      timeoutMs: this.#o.flightTimeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(this.#o.workers !== undefined ? { workers: this.#o.workers } : {}),
    });
    const flight: CanaryFlight = {
      id,
      destination,
      trigger,
      startedAt: started.toISOString(),
      finishedAt: this.#now().toISOString(),
      verdict: outcome.verdict,
      code: outcome.code,
      message: outcome.message,
      bytes: outcome.bytes,
      engineVersion: this.engineVersion,
      instanceId: this.instanceId,
    };
    const fields = { event: 'canary-flight', flight: id, destination, trigger, verdict: flight.verdict };
    if (flight.verdict === 'alive') {
      this.#o.log.info({ ...fields, bytes: flight.bytes }, `canary flight to ${destination}: alive`);
      await this.#sweep(scoped, destination, id);
    } else {
      this.#o.log[flight.verdict === 'dead' ? 'error' : 'warn'](
        { ...fields, code: flight.code },
        `canary flight to ${destination}: ${flight.verdict}: ${flight.message}`,
      );
    }
    return flight;
  }

  /** Removes earlier flights' objects (never the one kept, never a young one); logs a failure. */
  async #sweep(store: ObjectStore, destination: string, keep: string): Promise<void> {
    const started = flightTime(keep) ?? this.#now().getTime();
    const before = started - (this.#o.sweepGraceMs ?? DEFAULT_SWEEP_GRACE_MS);
    try {
      const removed = await sweep(store, keep, before);
      if (removed > 0)
        this.#o.log.info(
          { event: 'canary-sweep', destination, removed },
          `canary: removed ${removed} objects of earlier flights`,
        );
    } catch (err) {
      this.#o.log.warn(
        { event: 'canary-sweep-failed', destination, code: (err as { code?: string }).code },
        `canary: earlier flights to ${destination} not removed`,
      );
    }
  }

  async #notify(result: CanaryResult): Promise<void> {
    for (const listener of this.#listeners) {
      try {
        await listener(result);
      } catch (err) {
        this.#o.log.error(
          { event: 'canary-listener-failed', code: (err as { code?: string }).code },
          'a canary verdict listener failed',
        );
      }
    }
  }
}
