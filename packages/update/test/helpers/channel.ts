// Real signed channel documents and a real https channel server on 127.0.0.1 under a test CA.
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { generateSigner } from '@coffer/crypto';
import { makeTestPki, type TestPki } from '@coffer/testkit';
import type { ChannelDocument, ChannelTrust } from '../../src/index.ts';
import { signChannel } from '../../src/index.ts';

export const signer = generateSigner();
export const otherSigner = generateSigner();
export const trust: ChannelTrust = { publicKey: signer.publicKey };

export const NOW = Date.parse('2026-05-01T12:00:00Z');

export function sha384(bytes: Uint8Array): string {
  return `sha384:${createHash('sha384').update(bytes).digest('hex')}`;
}

export function artefactBytes(label: string, size = 4096): Uint8Array {
  const out = new Uint8Array(size);
  const seed = createHash('sha256').update(label).digest();
  for (let i = 0; i < size; i++) out[i] = seed[i % seed.length]! ^ (i & 0xff);
  return out;
}

export function makeDoc(
  overrides: {
    sequence?: number;
    version?: string;
    engine?: Uint8Array;
    console?: Uint8Array | null;
    consoleVersion?: string;
    url?: string;
    recommended?: Partial<ChannelDocument['recommended']>;
    issuedAt?: string;
    expiresAt?: string;
  } = {},
): ChannelDocument {
  const version = overrides.version ?? '1.4.0';
  const engine = overrides.engine ?? artefactBytes(`engine-${version}`);
  const doc: ChannelDocument = {
    kind: 'coffer-update-channel',
    v: 1,
    channel: 'stable',
    sequence: overrides.sequence ?? 7,
    issuedAt: overrides.issuedAt ?? '2026-05-01T00:00:00Z',
    expiresAt: overrides.expiresAt ?? '2026-05-31T00:00:00Z',
    recommended: {
      version,
      risk: 'routine',
      requiredSteps: [],
      schemaEpoch: 1,
      migration: false,
      ...overrides.recommended,
    },
    components: {
      engine: {
        version,
        url: overrides.url ?? `engine-${version}.tgz`,
        sha384: sha384(engine),
        size: engine.length,
      },
    },
  };
  if (overrides.console !== null) {
    const c = overrides.console ?? artefactBytes(`console-${version}`, 2048);
    const cv = overrides.consoleVersion ?? version;
    doc.components.console = { version: cv, url: `console-${cv}.tgz`, sha384: sha384(c), size: c.length };
  }
  return doc;
}

export function signed(doc: ChannelDocument, secretKey = signer.secretKey): Uint8Array {
  return signChannel(doc, secretKey);
}

export type Route =
  | { body: Uint8Array; contentLength?: number | 'omit'; status?: number }
  | { redirect: string; status?: number };

export interface ChannelServer {
  url: string;
  origin: string;
  pki: TestPki;
  routes: Map<string, Route>;
  hits: string[];
  server: Server;
}

/** An https server on 127.0.0.1 serving `routes` (path -> route); counts the paths it was asked. */
export async function channelServer(
  t: { teardown(fn: () => unknown): void },
  dir: string,
): Promise<ChannelServer> {
  const pki = makeTestPki(dir);
  const routes = new Map<string, Route>();
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
  const origin = `https://127.0.0.1:${port}`;
  return { url: `${origin}/stable/channel.json`, origin, pki, routes, hits, server };
}
