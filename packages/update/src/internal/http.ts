/**
 * One bounded https GET for the channel and its artefacts, over undici with an optional private CA.
 *
 * Rules (docs/updates.md, "Fetching"): https only, no credentials in the URL; at most
 * MAX_REDIRECTS redirects, each to the same origin (scheme, host and port) as the first URL, so a
 * compromised or misconfigured mirror cannot send the client to another host; the size is refused
 * on Content-Length before the body is read and counted again while it streams; one deadline
 * covers the whole exchange.
 */
import { UpdateError } from '../errors.ts';

/** Same-origin redirects followed at most; a redirect to another origin is always refused. */
export const MAX_REDIRECTS = 3;

export interface GetOptions {
  ca?: string | string[] | undefined;
  timeoutMs: number;
  /** Refuse when more bytes than this arrive (or are announced). */
  maxBytes: number;
}

export interface OpenResponse {
  url: URL;
  contentLength: number | undefined;
  body: AsyncIterable<Uint8Array>;
  close(): void;
}

/** Drops a response body without reading it (an abort must not surface as an unhandled error). */
function discard(body: { on(event: 'error', fn: () => void): unknown; destroy(): unknown }): void {
  body.on('error', () => {});
  body.destroy();
}

/** Checks that `text` is an https URL without credentials; returns it parsed. */
export function httpsUrl(text: string | URL): URL {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UpdateError('ERR_UPDATE_INSECURE_URL', 'not a URL');
  }
  if (u.protocol !== 'https:')
    throw new UpdateError('ERR_UPDATE_INSECURE_URL', `only https is allowed, not ${u.protocol}`);
  if (u.username || u.password)
    throw new UpdateError('ERR_UPDATE_INSECURE_URL', 'the URL carries credentials');
  return u;
}

function mapError(e: unknown, signal: AbortSignal): UpdateError {
  if (e instanceof UpdateError) return e;
  if (signal.aborted)
    return new UpdateError('ERR_UPDATE_TIMEOUT', 'no complete answer within the time limit');
  const code =
    (e as { code?: unknown; cause?: { code?: unknown } } | null)?.cause?.code ??
    (e as { code?: unknown })?.code;
  return new UpdateError(
    'ERR_UPDATE_FETCH',
    `request failed (${typeof code === 'string' ? code : 'network error'})`,
  );
}

/**
 * Opens a GET, following same-origin redirects, and checks Content-Length against `maxBytes`.
 * The caller reads `body` with {@link readBounded} and calls `close()` in every case.
 */
export async function openGet(start: URL, options: GetOptions): Promise<OpenResponse> {
  const origin = start.origin;
  const signal = AbortSignal.timeout(options.timeoutMs);
  // undici is loaded with the first update check: about 5.6 MiB of heap an engine that never
  // checks (or checks once a day) need not hold from start.
  const { Agent, request } = await import('undici');
  const agent = new Agent({
    connect: options.ca === undefined ? {} : { ca: options.ca },
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });
  let url = start;
  try {
    for (let hop = 0; ; hop++) {
      const res = await request(url, {
        method: 'GET',
        dispatcher: agent,
        signal,
        headers: { accept: 'application/json, application/octet-stream;q=0.9' },
      });
      if (res.statusCode >= 300 && res.statusCode < 400) {
        discard(res.body);
        const location = res.headers.location;
        if (typeof location !== 'string')
          throw new UpdateError('ERR_UPDATE_FETCH', `redirect ${res.statusCode} without a location`, {
            status: res.statusCode,
          });
        const next = httpsUrl(new URL(location, url));
        if (next.origin !== origin)
          throw new UpdateError('ERR_UPDATE_REDIRECT', `refused a redirect to another origin (${next.host})`);
        if (hop >= MAX_REDIRECTS)
          throw new UpdateError('ERR_UPDATE_REDIRECT', `more than ${MAX_REDIRECTS} redirects`);
        url = next;
        continue;
      }
      if (res.statusCode !== 200) {
        discard(res.body);
        throw new UpdateError('ERR_UPDATE_FETCH', `the server answered ${res.statusCode}`, {
          status: res.statusCode,
        });
      }
      const header = res.headers['content-length'];
      const contentLength = typeof header === 'string' && /^\d+$/.test(header) ? Number(header) : undefined;
      if (contentLength !== undefined && contentLength > options.maxBytes) {
        discard(res.body);
        throw new UpdateError(
          'ERR_UPDATE_TOO_LARGE',
          `announced ${contentLength} bytes, more than the bound of ${options.maxBytes}`,
        );
      }
      const body = res.body;
      const iterate = async function* () {
        try {
          for await (const chunk of body) yield chunk as Uint8Array;
        } catch (e) {
          throw mapError(e, signal);
        }
      };
      return {
        url,
        contentLength,
        body: iterate(),
        close: () => {
          discard(body);
          void agent.close().catch(() => {});
        },
      };
    }
  } catch (e) {
    void agent.destroy().catch(() => {});
    throw mapError(e, signal);
  }
}

/**
 * Reads an iterable of chunks, refusing with ERR_UPDATE_TOO_LARGE as soon as more than `maxBytes`
 * have arrived, and hands each chunk to `onChunk` (which may write it out).
 */
export async function readBounded(
  body: AsyncIterable<Uint8Array>,
  maxBytes: number,
  onChunk: (chunk: Uint8Array) => void | Promise<void>,
): Promise<number> {
  let total = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (total > maxBytes)
      throw new UpdateError('ERR_UPDATE_TOO_LARGE', `more than the bound of ${maxBytes} bytes arrived`);
    await onChunk(chunk);
  }
  return total;
}
