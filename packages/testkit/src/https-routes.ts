/**
 * A real https server on 127.0.0.1 under a fresh test CA (makeTestPki) that serves a mutable
 * table of routes (path -> bytes or redirect) and records every path it was asked. Used for
 * update channels and artefacts (@coffer/update's fetch tests, the engine's update routes): a
 * route may lie about its Content-Length (sent, then the connection is cut), omit it (chunked),
 * or redirect.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { makeTestPki, type TestPki } from './pki.ts';

export type HttpsRoute =
  | { body: Uint8Array; contentLength?: number | 'omit'; status?: number }
  | { redirect: string; status?: number };

export interface HttpsRouteServer {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  /** The test CA (`pki.caCert`) the client must trust, and the server's own certificate. */
  pki: TestPki;
  /** Path (no query) -> route; change it at any time. Unknown paths answer 404. */
  routes: Map<string, HttpsRoute>;
  /** Every path asked, in order. */
  hits: string[];
  server: Server;
}

/** Starts the server (certificates written into `dir`); closed at the test's teardown. */
export async function startHttpsRouteServer(
  t: { teardown(fn: () => unknown): void },
  dir: string,
): Promise<HttpsRouteServer> {
  const pki = makeTestPki(dir);
  const routes = new Map<string, HttpsRoute>();
  const hits: string[] = [];
  const server = createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    hits.push(path);
    const r = routes.get(path);
    if (!r) {
      res.writeHead(404).end();
      return;
    }
    if ('redirect' in r) {
      res.writeHead(r.status ?? 302, { location: r.redirect }).end();
      return;
    }
    const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream' };
    if (r.contentLength !== 'omit') headers['content-length'] = r.contentLength ?? r.body.length;
    else headers['transfer-encoding'] = 'chunked';
    res.writeHead(r.status ?? 200, headers);
    if (typeof r.contentLength === 'number' && r.contentLength !== r.body.length) {
      // A lying Content-Length: send what we have and cut the connection.
      res.write(r.body.subarray(0, Math.min(r.body.length, r.contentLength)));
      res.destroy();
      return;
    }
    res.end(r.body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const port = (server.address() as AddressInfo).port;
  return { origin: `https://127.0.0.1:${port}`, pki, routes, hits, server };
}
