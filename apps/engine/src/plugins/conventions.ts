/**
 * Global conventions of the engine's HTTP interface (specification "Path families" and "Global
 * conventions"), as one named plugin whose hooks run first on every request:
 *
 * 1. TLS version floor: a request that arrived over TLS 1.1 or older gets a plaintext 426 before
 *    any route runs (the server accepts those handshakes on purpose so that it can say why), with
 *    its path family's header set like every other response.
 * 2. Hardening headers by path family: the full set on `/admin/*`, `/support/*` and `GET /metrics`,
 *    the base set everywhere else (`/`, `/ready`, `/scim/v2/*`, unknown paths). The four
 *    browser-facing headers come from @fastify/helmet with every other helmet header turned off
 *    (the specification lists the headers exhaustively); cache-control and pragma are not helmet's
 *    business and are set here.
 * 3. The inbound `x-engine-caller` header is dropped; only authentication sets it.
 */
import helmet from '@fastify/helmet';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';

export const FULL_HARDENING: Readonly<Record<string, string>> = {
  'strict-transport-security': 'max-age=63072000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
  pragma: 'no-cache',
};

export const BASE_HARDENING: Readonly<Record<string, string>> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
};

// Every helmet middleware off, then the four shared headers on with the specification's values.
const HELMET_OFF = {
  contentSecurityPolicy: false,
  crossOriginEmbedderPolicy: false,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
  xPoweredBy: false,
} as const;
const HELMET_BASE = {
  ...HELMET_OFF,
  strictTransportSecurity: false,
  xContentTypeOptions: true,
  referrerPolicy: { policy: 'no-referrer' },
  xFrameOptions: { action: 'deny' },
  crossOriginResourcePolicy: { policy: 'same-origin' },
} as const;
const HELMET_FULL = {
  ...HELMET_BASE,
  strictTransportSecurity: { maxAge: 63072000, includeSubDomains: true, preload: false },
} as const;

export type Hardening = 'full' | 'base';

/** Which header set a request gets, by the specification's path-family table. */
export function hardeningFor(method: string, url: string): Hardening {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  if (path === '/admin' || path.startsWith('/admin/')) return 'full';
  if (path === '/support' || path.startsWith('/support/')) return 'full';
  if (path === '/metrics' && (method === 'GET' || method === 'HEAD')) return 'full';
  return 'base';
}

const OLD_TLS = new Set(['TLSv1', 'TLSv1.1', 'SSLv3']);

function tlsTooOld(request: FastifyRequest): boolean {
  const socket = request.raw.socket as { getProtocol?: () => string | null };
  if (typeof socket.getProtocol !== 'function') return false;
  const protocol = socket.getProtocol();
  return protocol !== null && OLD_TLS.has(protocol);
}

async function conventions(app: FastifyInstance): Promise<void> {
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (tlsTooOld(request)) {
      // Plain text and the connection closed: a client this old gets no route and no JSON. Sent
      // from this first hook, so the hardening hook below never runs for it: the family's header
      // set is written here (the specification's "every response" includes the 426).
      const set = hardeningFor(request.method, request.url) === 'full' ? FULL_HARDENING : BASE_HARDENING;
      reply.headers({ ...set });
      reply
        .code(426)
        .header('upgrade', 'TLS/1.2, HTTP/1.1')
        .header('connection', 'close')
        .type('text/plain; charset=utf-8');
      return reply.send('upgrade required: TLS 1.2 or newer\n');
    }
    delete request.headers['x-engine-caller'];
  });

  await app.register(helmet, { global: false, ...HELMET_OFF });

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const set = hardeningFor(request.method, request.url);
    await reply.helmet(set === 'full' ? HELMET_FULL : HELMET_BASE);
    if (set === 'full') reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
  });
}

export default fp(conventions, { name: 'coffer-conventions', fastify: '5.x' });
