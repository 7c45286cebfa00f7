/**
 * Every error body of the engine specification's Errors table, turned into one message a person
 * can act on. `ApiError` carries what the screens need (status, the engine's own reason, a retry
 * time, the request id, the capability required and the role held).
 */
export interface ErrorDetails {
  status: number;
  /** The engine's `error` (or `reason`) text, when the body had one. */
  reason?: string | undefined;
  /** The whole parsed body (JSON) or the text. */
  body?: unknown;
  /** 429: seconds to wait (Retry-After). */
  retryAfter?: number | undefined;
  /** 500: the engine's request id. */
  requestId?: string | undefined;
  /** 403 forbidden: the capability the route needs and the role the caller holds. */
  required?: string | undefined;
  have?: string | undefined;
}

export class ApiError extends Error implements ErrorDetails {
  readonly status: number;
  readonly reason: string | undefined;
  readonly body: unknown;
  readonly retryAfter: number | undefined;
  readonly requestId: string | undefined;
  readonly required: string | undefined;
  readonly have: string | undefined;
  constructor(details: ErrorDetails) {
    super(describe(details));
    this.name = 'ApiError';
    this.status = details.status;
    this.reason = details.reason;
    this.body = details.body;
    this.retryAfter = details.retryAfter;
    this.requestId = details.requestId;
    this.required = details.required;
    this.have = details.have;
  }
  /** True for a 401 that means "sign in" (not a step-up). */
  get signedOut(): boolean {
    return this.status === 401 && !isStepUp(this.body);
  }
}

export function isStepUp(body: unknown): body is { stepUpRequired: true; reauth?: string } {
  return (
    typeof body === 'object' &&
    body !== null &&
    (body as { stepUpRequired?: unknown }).stepUpRequired === true
  );
}

function sentence(text: string): string {
  const t = text.trim();
  if (t === '') return t;
  return t[0]!.toUpperCase() + t.slice(1) + (/[.!?]$/.test(t) ? '' : '.');
}

/** The message shown for an engine answer that was not a success. */
export function describe(e: ErrorDetails): string {
  const reason = e.reason;
  switch (e.status) {
    case 0:
      return 'The console cannot reach the engine. Check that it is running, then try again.';
    case 400:
      // Schema refusals name the field as `body/<path>` or `querystring/<path>`: name it plainly.
      return reason
        ? sentence(reason.replace(/^(body|querystring|params)\/?/, ''))
        : 'The engine refused this input.';
    case 401:
      if (isStepUp(e.body))
        return (e.body as { reauth?: string }).reauth === 'access'
          ? 'This action needs a fresh sign-in at your access provider.'
          : 'This action needs you to confirm it is you.';
      return 'You are signed out. Sign in again to continue.';
    case 403:
      if (reason === 'forbidden')
        return `Your role (${e.have ?? 'unknown'}) cannot do this: it needs ${
          e.required === 'owner' ? 'the owner role' : `the ${e.required ?? 'unknown'} capability`
        }.`;
      if (reason === 'csrf origin check failed')
        return 'The engine refused a request that did not come from this console (origin check). Reload the page.';
      if (reason === 'csrf token check failed')
        return 'The engine refused the request: the session check token is stale. Reload the page and try again.';
      if (reason === 'restore not approved')
        return 'This restore plan is not approved yet: request approval, or wait for an approver.';
      return reason ? sentence(reason) : 'The engine refused this action.';
    case 404:
      return reason ? sentence(reason) : 'Not found.';
    case 409:
      return reason ? `Conflict: ${reason}` : 'The engine state changed meanwhile; reload and try again.';
    case 429:
      return `Too many requests. Try again in ${e.retryAfter ?? 1} second${e.retryAfter === 1 ? '' : 's'}.`;
    case 500:
      return `The engine hit an internal error${e.requestId ? ` (request id ${e.requestId})` : ''}. Quote the request id when reporting it.`;
    case 501:
      return 'Passkeys are not configured on this engine (CONSOLE_ORIGIN is unset).';
    case 502:
      return 'The engine could not read its scheduler state. Try again shortly; if it persists, check the state store.';
    case 503:
      return reason ? `Unavailable: ${reason}` : 'The engine is unavailable right now. Try again shortly.';
    default:
      return reason ? sentence(reason) : `The engine answered ${e.status}.`;
  }
}

/** Builds an ApiError from a fetch Response whose status is not 2xx. */
export async function errorFromResponse(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // plain text bodies (401 `unauthorised`, 404 `not found`) stay text
  }
  const obj = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  const retry = Number(res.headers.get('retry-after'));
  return new ApiError({
    status: res.status,
    reason:
      str(obj.error) ?? str(obj.reason) ?? (typeof body === 'string' && body.length < 200 ? body : undefined),
    body,
    retryAfter: Number.isFinite(retry) && retry > 0 ? Math.ceil(retry) : undefined,
    requestId: str(obj.requestId),
    required: str(obj.required),
    have: str(obj.have),
  });
}

/** A message for anything a screen caught. */
export function messageOf(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof DOMException && err.name === 'NotAllowedError')
    return 'The passkey prompt was cancelled or timed out.';
  if (err instanceof TypeError) return describe({ status: 0 });
  return err instanceof Error ? err.message : String(err);
}
