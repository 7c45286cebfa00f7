/**
 * Typed errors of @coffer/notify. Callers switch on `code`, never on messages. Messages never carry
 * a URL (a chat webhook's path is its credential), a key, a routing key, a signing secret, an
 * address or a request body: only what kind of thing failed and why.
 *
 * Two families share the prefix: the codes `normaliseChannel`, `normaliseRule` and
 * `checkChannelUrl` throw (`NotifyError`), and the codes a delivery record carries in its `error`
 * (never thrown: `deliver` never throws).
 */

export const NOTIFY_ERROR_CODES = [
  // Thrown on save.
  'ERR_NOTIFY_INVALID_CHANNEL',
  'ERR_NOTIFY_INVALID_RULE',
  'ERR_NOTIFY_URL_REFUSED',
  'ERR_NOTIFY_UNKNOWN_EVENT',
  // Carried by delivery records.
  'ERR_NOTIFY_TIMEOUT',
  'ERR_NOTIFY_HTTP_STATUS',
  'ERR_NOTIFY_REDIRECT',
  'ERR_NOTIFY_CONNECT',
  'ERR_NOTIFY_DNS',
  'ERR_NOTIFY_TLS',
  'ERR_NOTIFY_EMAIL',
  'ERR_NOTIFY_SECRET',
  'ERR_NOTIFY_NOT_CONFIGURED',
] as const;

export type NotifyErrorCode = (typeof NOTIFY_ERROR_CODES)[number];

/** Why `checkChannelUrl` (or the same check at send time) refused a URL. */
export type UrlRefusal =
  | 'malformed'
  | 'scheme'
  | 'credentials'
  | 'preview-domain'
  | 'local-name'
  | 'private-address'
  | 'no-address';

export class NotifyError extends Error {
  readonly code: NotifyErrorCode;
  /** For ERR_NOTIFY_INVALID_CHANNEL and ERR_NOTIFY_INVALID_RULE: the input field at fault. */
  readonly field: string | undefined;
  /** For ERR_NOTIFY_URL_REFUSED: which check refused. */
  readonly refusal: UrlRefusal | undefined;

  constructor(
    code: NotifyErrorCode,
    message: string,
    options: { field?: string; refusal?: UrlRefusal } = {},
  ) {
    super(message);
    this.name = 'NotifyError';
    this.code = code;
    this.field = options.field;
    this.refusal = options.refusal;
  }
}

/** True when `e` is a NotifyError (by shape, so it survives bundling), optionally of `code`. */
export function isNotifyError(e: unknown, code?: NotifyErrorCode): e is NotifyError {
  const c = (e as { code?: unknown } | null)?.code;
  return (
    typeof c === 'string' &&
    (NOTIFY_ERROR_CODES as readonly string[]).includes(c) &&
    (code === undefined || c === code)
  );
}
