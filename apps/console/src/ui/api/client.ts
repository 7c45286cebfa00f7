/**
 * The one way the UI talks to the engine (through the console's same-origin proxy): JSON in and
 * out, cookies sent by the browser, the CSRF double-submit header on writes once `whoami` gave a
 * token, and step-up handled in place: a 401 `stepUpRequired` asks the registered handler (the
 * step-up dialog) for fresh proof, then retries the same request once. Never a jump to sign-in.
 */
import { ApiError, errorFromResponse, isStepUp } from './errors.ts';

let csrfToken: string | undefined;
/** Set from `GET /admin/whoami` (cookie sessions only). */
export function setCsrfToken(token: string | undefined): void {
  csrfToken = token;
}

/** Returns extra headers proving presence (`x-engine-stepup`), or throws when the person cancels. */
export type StepUpHandler = (reauth: string | undefined) => Promise<Record<string, string>>;
let stepUpHandler: StepUpHandler | undefined;
export function setStepUpHandler(handler: StepUpHandler | undefined): void {
  stepUpHandler = handler;
}

/** Called on a 401 that is not a step-up: the session is gone. */
let signedOutHandler: (() => void) | undefined;
export function setSignedOutHandler(handler: (() => void) | undefined): void {
  signedOutHandler = handler;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Do not report a plain 401 as "signed out" (sign-in screens). */
  quiet401?: boolean;
}

async function send(method: string, path: string, body: unknown, options: RequestOptions): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-engine-csrf'] = csrfToken;
  return fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
}

export async function request(
  method: string,
  path: string,
  body?: unknown,
  options: RequestOptions = {},
): Promise<Response> {
  let res = await send(method, path, body, options);
  if (res.status === 401) {
    const err = await errorFromResponse(res.clone());
    if (isStepUp(err.body) && stepUpHandler) {
      const proof = await stepUpHandler((err.body as { reauth?: string }).reauth);
      res = await send(method, path, body, { ...options, headers: { ...options.headers, ...proof } });
    } else if (!options.quiet401) signedOutHandler?.();
  }
  return res;
}

async function json<T>(res: Response): Promise<T> {
  if (!res.ok) throw await errorFromResponse(res);
  const text = await res.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

export const api = {
  async get<T>(path: string, options?: RequestOptions): Promise<T> {
    return json<T>(await request('GET', path, undefined, options));
  },
  async post<T>(path: string, body: unknown = {}, options?: RequestOptions): Promise<T> {
    return json<T>(await request('POST', path, body, options));
  },
  /** A write that may be queued for a second owner: 202 `{ ownerActionQueued: true, id }`. */
  async postMaybeQueued<T>(
    path: string,
    body: unknown = {},
    options?: RequestOptions,
  ): Promise<T | OwnerActionQueued> {
    return json<T | OwnerActionQueued>(await request('POST', path, body, options));
  },
  /** Downloads a GET answer as a file (support bundle, audit export). */
  async download(path: string, fallbackName: string): Promise<void> {
    const res = await request('GET', path);
    if (!res.ok) throw await errorFromResponse(res);
    const disposition = res.headers.get('content-disposition') ?? '';
    const name = /filename="?([^";]+)"?/.exec(disposition)?.[1] ?? fallbackName;
    saveBlob(await res.blob(), name);
  },
};

export interface OwnerActionQueued {
  ownerActionQueued: true;
  id: string;
  status: 'pending';
}
export function isQueued(x: unknown): x is OwnerActionQueued {
  return typeof x === 'object' && x !== null && (x as OwnerActionQueued).ownerActionQueued === true;
}

export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export { ApiError };
