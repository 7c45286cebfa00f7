/**
 * One HTTPS POST to a channel, with the URL guard held at connect time: the host is resolved once
 * (`resolveTarget`), every answer is checked, and the socket connects to exactly the checked address
 * through a `lookup` that answers with it (no second lookup). SNI and the Host header stay the
 * host name, so the certificate is checked against the name the operator typed. Redirects are not
 * followed (a 3xx is a failure). The whole attempt (resolve, connect, TLS, request, response) is
 * bounded by `timeoutMs`.
 */
import { request } from 'node:https';
import { isIP } from 'node:net';
import * as tls from 'node:tls';
import { isNotifyError, type NotifyErrorCode } from '../errors.ts';
import type { HttpRequest } from '../payloads.ts';
import { type Resolver, resolveTarget } from '../url-guard.ts';

/** A failed attempt: a code, a fixed redaction-safe message, whether a retry may help. */
export class AttemptFailure extends Error {
  readonly code: NotifyErrorCode;
  readonly transient: boolean;
  readonly status: number | undefined;
  constructor(code: NotifyErrorCode, message: string, transient: boolean, status?: number) {
    super(message);
    this.code = code;
    this.transient = transient;
    this.status = status;
  }
}

export interface PostOptions {
  allowPrivateTarget: boolean;
  timeoutMs: number;
  resolver?: Resolver;
  /** Extra trusted CA certificates (PEM), added to Node's default trust. */
  ca?: string | string[];
}

const TRANSIENT_SOCKET = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

let defaultRoots: string[] | undefined;
function trust(extra: string | string[] | undefined): string[] | undefined {
  if (extra === undefined) return undefined;
  // The default store with NODE_EXTRA_CA_CERTS (and the system store when enabled), where Node has it.
  const get = (tls as { getCACertificates?: (type?: string) => string[] }).getCACertificates;
  defaultRoots ??= get ? get('default') : [...tls.rootCertificates];
  return [...defaultRoots, ...(Array.isArray(extra) ? extra : [extra])];
}

function socketFailure(err: unknown): AttemptFailure {
  const code = typeof (err as { code?: unknown })?.code === 'string' ? (err as { code: string }).code : '';
  const safe = /^[A-Z0-9_]{1,64}$/.test(code) ? code : 'unknown';
  if (TRANSIENT_SOCKET.has(code))
    return new AttemptFailure('ERR_NOTIFY_CONNECT', `connection failed (${safe})`, true);
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO|HOSTNAME|ALTNAME/.test(code))
    return new AttemptFailure('ERR_NOTIFY_TLS', `TLS handshake refused (${safe})`, false);
  return new AttemptFailure('ERR_NOTIFY_CONNECT', `connection failed (${safe})`, true);
}

/** POSTs `req`; resolves with the 2xx status, rejects with an `AttemptFailure`. */
export function postOnce(req: HttpRequest, options: PostOptions): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let destroy: (() => void) | undefined;
    const finish = (err: AttemptFailure | undefined, status?: number) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        destroy?.();
        reject(err);
      } else resolve({ status: status! });
    };
    const timer = setTimeout(
      () =>
        finish(new AttemptFailure('ERR_NOTIFY_TIMEOUT', `no answer within ${options.timeoutMs} ms`, true)),
      options.timeoutMs,
    );
    resolveTarget(req.url, {
      allowPrivateTarget: options.allowPrivateTarget,
      resolver: options.resolver,
    }).then(
      (target) => {
        if (settled) return;
        const host = target.url.hostname.replace(/^\[|\]$/g, '');
        const pinned = target.address;
        const family = target.family;
        const r = request({
          method: req.method,
          host,
          port: target.url.port === '' ? 443 : Number(target.url.port),
          path: `${target.url.pathname}${target.url.search}`,
          headers: { ...req.headers, host: target.url.host, 'content-length': Buffer.byteLength(req.body) },
          servername: isIP(host) === 0 ? host : undefined,
          ca: trust(options.ca),
          agent: false,
          // The one address checked above; the socket never asks DNS again.
          lookup: (_hostname, opts, cb) => {
            if (opts.all) cb(null, [{ address: pinned, family }]);
            else cb(null, pinned, family);
          },
        });
        destroy = () => r.destroy();
        r.on('error', (err) => finish(socketFailure(err)));
        r.on('response', (res) => {
          const status = res.statusCode ?? 0;
          let seen = 0;
          res.on('data', (chunk: Buffer) => {
            seen += chunk.length;
            if (seen > 65536) res.destroy(); // the answer is not needed; do not hold a large one
          });
          res.on('error', () => {});
          res.on('close', () => {
            if (status >= 200 && status < 300) finish(undefined, status);
            else if (status >= 300 && status < 400)
              finish(
                new AttemptFailure(
                  'ERR_NOTIFY_REDIRECT',
                  `receiver answered ${status}; redirects are not followed`,
                  false,
                  status,
                ),
              );
            else
              finish(
                new AttemptFailure(
                  'ERR_NOTIFY_HTTP_STATUS',
                  `receiver answered ${status}`,
                  status >= 500 || status === 408 || status === 429,
                  status,
                ),
              );
          });
          res.resume();
        });
        r.end(req.body);
      },
      (err) => {
        if (isNotifyError(err))
          finish(new AttemptFailure(err.code, err.message, err.code === 'ERR_NOTIFY_DNS'));
        else finish(new AttemptFailure('ERR_NOTIFY_DNS', 'the channel host could not be resolved', true));
      },
    );
  });
}
