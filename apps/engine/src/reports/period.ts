/**
 * The reporting period of `GET /admin/reports/<kind>` (docs/reports.md "Period"): `?from=` and
 * `?to=`, each an RFC 3339 date-time or a calendar date (`YYYY-MM-DD`, midnight UTC). Defaults:
 * `to` = now, `from` = `to` minus 30 days. `from` must be before `to`, the span at most 366 days,
 * and `to` not later than now (a report never speaks about the future). A bad value is a
 * ReportPeriodError whose message names the parameter (the route answers 400 with it).
 */

export const DEFAULT_PERIOD_DAYS = 30;
export const MAX_PERIOD_DAYS = 366;
const DAY_MS = 86_400_000;
/** Clock skew allowed between a caller's `to` and the engine's now. */
const FUTURE_SLACK_MS = 5 * 60_000;

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

export interface ReportPeriod {
  /** RFC 3339 UTC, inclusive. */
  from: string;
  /** RFC 3339 UTC, exclusive; also the instant verdicts are evaluated at. */
  to: string;
}

/**
 * A `from` / `to` value the route refuses: 400 `{ error }` with this message, which names the
 * parameter and never echoes its value. It never leaves the route, so it has no engine error code.
 */
export class ReportPeriodError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReportPeriodError';
  }
}

function parseInstant(name: string, value: string): number {
  if (value.length > 64) throw new ReportPeriodError(`${name} is too long`);
  const date = DATE.exec(value);
  if (date) {
    const ms = Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]));
    // Date.UTC rolls 2026-02-31 over to March: refuse a date that does not exist.
    if (new Date(ms).toISOString().slice(0, 10) !== value)
      throw new ReportPeriodError(`${name} is not a real calendar date`);
    return ms;
  }
  if (!RFC3339.test(value))
    throw new ReportPeriodError(`${name} must be an RFC 3339 date-time or YYYY-MM-DD`);
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) throw new ReportPeriodError(`${name} is not a valid date-time`);
  return ms;
}

/** Parses the query's `from` / `to` (absent: the defaults). Throws ReportPeriodError. */
export function parsePeriod(
  query: { from?: string | undefined; to?: string | undefined },
  now: Date,
): ReportPeriod {
  const nowMs = now.getTime();
  const to = query.to === undefined ? nowMs : parseInstant('to', query.to);
  const from =
    query.from === undefined ? to - DEFAULT_PERIOD_DAYS * DAY_MS : parseInstant('from', query.from);
  if (to > nowMs + FUTURE_SLACK_MS) throw new ReportPeriodError('to must not be in the future');
  if (from >= to) throw new ReportPeriodError('from must be before to');
  if (to - from > MAX_PERIOD_DAYS * DAY_MS)
    throw new ReportPeriodError(`the period must be at most ${MAX_PERIOD_DAYS} days`);
  return { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
}

/** True when `at` (RFC 3339) lies in [from, to). */
export function inPeriod(period: ReportPeriod, at: string): boolean {
  const ms = Date.parse(at);
  return ms >= Date.parse(period.from) && ms < Date.parse(period.to);
}
