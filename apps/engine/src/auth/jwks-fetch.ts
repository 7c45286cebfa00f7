/**
 * The fetch used for the perimeter access service's key set (specification "Authentication",
 * rule 3: "Access key fetch is pinned to an https host under the access provider's domain and
 * never follows a redirect").
 *
 * Hand-written on node:https rather than the global fetch because it must (a) trust an extra CA
 * in tests without touching process-wide TLS settings, (b) refuse any redirect outright, and
 * (c) bound the body size; the global fetch gives none of these three without a dispatcher
 * library. Any status other than 200 (a 3xx included) is an error; the host is checked against
 * the pinned host before a socket is opened.
 */
import { request } from 'node:https';
import { EngineError } from '../errors.ts';

/** Largest key-set document accepted (real ones are a few KiB). */
const MAX_BODY = 256 * 1024;

export interface PinnedFetchOptions {
  /** The only host name (and optional port) the fetcher may contact. */
  pinnedHost: string;
  /** Extra trusted CA certificates (PEM). Test-only: production uses the system store. */
  ca?: string | undefined;
}

type FetchInit = { headers: Headers; method: 'GET'; redirect: 'manual'; signal: AbortSignal };

/** Returns a fetch-compatible function for jose's `customFetch` option. */
export function pinnedFetch(
  options: PinnedFetchOptions,
): (url: string, init: FetchInit) => Promise<Response> {
  return (url, init) =>
    new Promise<Response>((resolve, reject) => {
      const target = new URL(url);
      if (target.protocol !== 'https:' || target.host !== options.pinnedHost) {
        reject(
          new EngineError(
            'ERR_ENGINE_PERIMETER_KEYS',
            'perimeter key fetch refused: not the pinned https host',
          ),
        );
        return;
      }
      const headers: Record<string, string> = {};
      init.headers.forEach((v, k) => {
        headers[k] = v;
      });
      const req = request(
        target,
        { method: 'GET', headers, signal: init.signal, ...(options.ca ? { ca: options.ca } : {}) },
        (res) => {
          const status = res.statusCode ?? 0;
          if (status !== 200) {
            res.resume();
            // A 3xx lands here too: redirects are never followed.
            reject(
              new EngineError('ERR_ENGINE_PERIMETER_KEYS', `perimeter key fetch answered HTTP ${status}`),
            );
            return;
          }
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_BODY) {
              res.destroy();
              reject(new EngineError('ERR_ENGINE_PERIMETER_KEYS', 'perimeter key set too large'));
              return;
            }
            chunks.push(chunk);
          });
          res.on('end', () => {
            resolve(
              new Response(Buffer.concat(chunks), {
                status: 200,
                headers: { 'content-type': 'application/json' },
              }),
            );
          });
          res.on('error', (err) =>
            reject(
              new EngineError('ERR_ENGINE_PERIMETER_KEYS', 'perimeter key fetch failed', { cause: err }),
            ),
          );
        },
      );
      req.on('error', (err) => {
        if (err.name === 'AbortError' || err.name === 'TimeoutError') reject(err);
        else
          reject(new EngineError('ERR_ENGINE_PERIMETER_KEYS', 'perimeter key fetch failed', { cause: err }));
      });
      req.end();
    });
}
