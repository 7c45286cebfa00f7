/**
 * The canary's durable record in the state store's settings (SQLite or PostgreSQL alike): one
 * setting per flight, `canary.flight:<destination>:<flight id>` (the last 24 per destination are
 * kept), and the latest flight set, `canary.set.last`. One key per flight, so replicas sharing a
 * database never overwrite each other's flights. `:` cannot occur in a destination id, so one
 * destination's prefix never matches another's.
 *
 * Reads check every stored value against the schema and skip what does not match (a row written
 * by a newer engine, or damaged), so the route never fails on one bad row.
 */
import type { SettingsRepository } from '@coffer/state';
import { Value } from 'typebox/value';
import { type CanaryFlight, CanaryFlightSchema, type CanarySet, CanarySetSchema } from './types.ts';

export const FLIGHT_PREFIX = 'canary.flight:';
export const LAST_SET_SETTING = 'canary.set.last';
/** Flights kept per destination. */
export const FLIGHTS_KEPT = 24;

const prefixOf = (destination: string) => `${FLIGHT_PREFIX}${destination}:`;

export class CanaryHistory {
  readonly #settings: SettingsRepository;
  readonly #keep: number;

  constructor(settings: SettingsRepository, keep = FLIGHTS_KEPT) {
    this.#settings = settings;
    this.#keep = keep;
  }

  /** Stores the set's flights and the set, then drops each destination's flights beyond the last 24. */
  async record(set: CanarySet, flights: readonly CanaryFlight[]): Promise<void> {
    for (const f of flights) await this.#settings.set(`${prefixOf(f.destination)}${f.id}`, f);
    await this.#settings.set(LAST_SET_SETTING, set);
    for (const destination of new Set(flights.map((f) => f.destination))) {
      const rows = await this.#settings.list(prefixOf(destination));
      const old = rows
        .map((r) => r.key)
        .sort()
        .reverse()
        .slice(this.#keep);
      for (const key of old) await this.#settings.delete(key);
    }
  }

  /** The destination's stored flights, newest first (at most 24). */
  async flights(destination: string): Promise<CanaryFlight[]> {
    const rows = await this.#settings.list(prefixOf(destination));
    return rows
      .filter((r) => Value.Check(CanaryFlightSchema, r.value))
      .map((r) => r.value as CanaryFlight)
      .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
      .slice(0, this.#keep);
  }

  /** The latest flight set, or null. */
  async lastSet(): Promise<CanarySet | null> {
    const v = await this.#settings.get(LAST_SET_SETTING);
    return Value.Check(CanarySetSchema, v) ? (v as CanarySet) : null;
  }
}
