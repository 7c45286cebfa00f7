/**
 * The console server: serves the built UI under a strict Content-Security-Policy and proxies the
 * engine's `/admin/*`, `/support/*` and `GET /metrics` families verbatim (method, path, query,
 * headers, body; the engine's answer and its headers come back unchanged). The console holds no
 * credential and makes no decision: engine authentication is the only authority. The one header it
 * adds is `X-Forwarded-For`, so the engine (with ENGINE_TRUST_PROXY naming this console) applies
 * its per-address limits to the browser's address rather than the console's.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import helmet from '@fastify/helmet';
import proxy from '@fastify/http-proxy';
import fastifyStatic from '@fastify/static';
import Fastify, { type FastifyInstance } from 'fastify';
import type { ConsoleConfig } from './config.ts';

/** The families the specification says the console proxies. */
export const PROXIED_PREFIXES = ['/admin', '/support', '/metrics'] as const;

/** The UI's Content-Security-Policy: no inline script or style, nothing from another origin. */
export const CONSOLE_CSP = {
  defaultSrc: ["'self'"],
  scriptSrc: ["'self'"],
  styleSrc: ["'self'"],
  imgSrc: ["'self'", 'data:'],
  connectSrc: ["'self'"],
  fontSrc: ["'self'"],
  objectSrc: ["'none'"],
  baseUri: ["'none'"],
  formAction: ["'self'"],
  frameAncestors: ["'none'"],
};

/** The console is the first hop the engine trusts: a browser's own X-Forwarded-For is replaced. */
function forwardedFor(request: { socket: { remoteAddress?: string | undefined }; ip: string }): string {
  return request.socket.remoteAddress ?? request.ip;
}

export async function buildConsole(config: ConsoleConfig): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: config.logLevel,
      // Never the Cookie or Authorization header: request lines only.
      serializers: {
        req: (req) => ({ method: req.method, url: req.url.split('?')[0] }),
      },
    },
    ...(config.tls ? { https: { cert: config.tls.cert, key: config.tls.key } } : {}),
    exposeHeadRoutes: false,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  });

  const upstream = config.engineUrl.origin;
  for (const prefix of PROXIED_PREFIXES) {
    await app.register(proxy, {
      upstream,
      prefix,
      rewritePrefix: prefix,
      // Verbatim: the engine sees the browser's Origin, Cookie, Authorization and body untouched.
      replyOptions: {
        rewriteRequestHeaders: (request, headers) => ({
          ...headers,
          'x-forwarded-for': forwardedFor(request),
        }),
      },
      ...(config.engineCa ? { undici: { connect: { ca: config.engineCa } } as never } : {}),
    });
  }

  const indexFile = join(config.uiDir, 'index.html');
  await app.register(async (ui) => {
    await ui.register(helmet, {
      contentSecurityPolicy: { useDefaults: false, directives: CONSOLE_CSP },
      crossOriginEmbedderPolicy: false,
      strictTransportSecurity: config.tls ? { maxAge: 31536000 } : false,
    });
    if (!existsSync(indexFile)) {
      ui.get('/*', async (_request, reply) =>
        reply
          .code(503)
          .type('text/plain; charset=utf-8')
          .send('the console UI is not built: run `pnpm build`'),
      );
      return;
    }
    await ui.register(fastifyStatic, {
      root: config.uiDir,
      index: false,
      wildcard: false,
      // Hashed asset names never change: cache them; index.html always revalidates.
      setHeaders: (res, path) => {
        res.header(
          'cache-control',
          path.includes('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache',
        );
      },
    });
    // Every other GET is a screen of the single-page UI.
    ui.get('/*', async (_request, reply) => reply.header('cache-control', 'no-cache').sendFile('index.html'));
  });
  return app;
}
