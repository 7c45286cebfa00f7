/**
 * The integrity canary room: `CanaryService` (service.ts) flies a tiny signed and sealed archive
 * into every destination's `_canary/` namespace and reads it back (flight.ts), keeps the flights
 * in the settings store (history.ts), and offers the in-memory self-check. See docs/canary.md.
 */
export {
  CANARY_ERROR_CODES,
  CANARY_JOB,
  CANARY_RUNS_PREFIX,
  type CanaryKeys,
  flightTime,
  flyOnce,
  outcomeOf,
  sweep,
} from './flight.ts';
export { CanaryHistory, FLIGHT_PREFIX, FLIGHTS_KEPT, LAST_SET_SETTING } from './history.ts';
export {
  type CanaryListener,
  type CanaryLogger,
  CanaryService,
  type CanaryServiceOptions,
} from './service.ts';
export { CANARY_PREFIX, canaryStore, memoryStore, watchedStore } from './store.ts';
export {
  CANARY_TRIGGERS,
  CANARY_VERDICTS,
  type CanaryFlight,
  CanaryFlightSchema,
  type CanaryResult,
  type CanarySet,
  type CanaryTrigger,
  type CanaryVerdict,
  type CanaryView,
  CanaryViewSchema,
  overallVerdict,
} from './types.ts';
