/**
 * The canary's shapes, one TypeBox schema each: the route's response schema, the stored shape in
 * the settings store and the service's types come from here.
 *
 * A flight carries ids, times, a verdict, a closed-form error code and a fixed message (with that
 * code), a byte count, the engine version and the instance id: never a key, credential, endpoint
 * URL, object key or raw error text.
 */
import { type Static, Type } from 'typebox';

export const CANARY_VERDICTS = ['alive', 'dead', 'undecided'] as const;
export const CANARY_TRIGGERS = ['schedule', 'tick', 'settle', 'boot'] as const;

const Verdict = Type.Union([Type.Literal('alive'), Type.Literal('dead'), Type.Literal('undecided')]);
const Trigger = Type.Union([
  Type.Literal('schedule'),
  Type.Literal('tick'),
  Type.Literal('settle'),
  Type.Literal('boot'),
]);
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

/** One flight to one destination. */
export const CanaryFlightSchema = Type.Object(
  {
    /** Sortable flight id (UTC start to the millisecond, then 8 hex digits); the archive's run id. */
    id: Type.String(),
    destination: Type.String(),
    trigger: Trigger,
    startedAt: Type.String(),
    finishedAt: Type.String(),
    verdict: Verdict,
    /** Null when alive; otherwise the most specific error code (ERR_OBJECTSTORE_*, ERR_ARCHIVE_*, ERR_CANARY_*). */
    code: Nullable(Type.String()),
    /** Null when alive; otherwise a fixed sentence naming what failed and the code. */
    message: Nullable(Type.String()),
    /** Bytes the sealed archive took in the destination (0 when it was not written). */
    bytes: Type.Integer({ minimum: 0 }),
    engineVersion: Type.String(),
    instanceId: Type.String(),
  },
  { additionalProperties: false },
);
export type CanaryFlight = Static<typeof CanaryFlightSchema>;
export type CanaryVerdict = (typeof CANARY_VERDICTS)[number];
export type CanaryTrigger = (typeof CANARY_TRIGGERS)[number];

/** What `fly` returns: the set's verdict and its flights (one per destination). */
export interface CanaryResult {
  verdict: CanaryVerdict;
  flights: CanaryFlight[];
}

/** The latest flight set, as stored (the route's `verdict` and `lastFlightAt`). */
export const CanarySetSchema = Type.Object(
  {
    verdict: Verdict,
    trigger: Trigger,
    startedAt: Type.String(),
    finishedAt: Type.String(),
    destinations: Type.Array(Type.String()),
    engineVersion: Type.String(),
    instanceId: Type.String(),
  },
  { additionalProperties: false },
);
export type CanarySet = Static<typeof CanarySetSchema>;

/** `GET /admin/canary`. */
export const CanaryViewSchema = Type.Object(
  {
    intervalSeconds: Type.Integer({ minimum: 1 }),
    /** The verdict of the latest flight set (any replica), or null before the first. */
    verdict: Nullable(Verdict),
    lastFlightAt: Nullable(Type.String()),
    destinations: Type.Array(
      Type.Object(
        {
          destination: Type.String(),
          last: Nullable(CanaryFlightSchema),
          /** Newest first, at most 24. */
          flights: Type.Array(CanaryFlightSchema),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type CanaryView = Static<typeof CanaryViewSchema>;

/** The verdict of a set: dead if any flight is dead, alive if all are alive, else undecided. */
export function overallVerdict(flights: readonly { verdict: CanaryVerdict }[]): CanaryVerdict {
  if (flights.some((f) => f.verdict === 'dead')) return 'dead';
  if (flights.length > 0 && flights.every((f) => f.verdict === 'alive')) return 'alive';
  return 'undecided';
}
