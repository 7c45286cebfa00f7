// Real signed channel documents and a real https channel server on 127.0.0.1 under a test CA.
import { createHash } from 'node:crypto';
import { generateSigner } from '@coffer/crypto';
import { type HttpsRoute, type HttpsRouteServer, startHttpsRouteServer } from '@coffer/testkit';
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

export type Route = HttpsRoute;

export interface ChannelServer extends HttpsRouteServer {
  /** The channel document's URL: `<origin>/stable/channel.json`. */
  url: string;
}

/** An https server on 127.0.0.1 serving `routes` (path -> route); counts the paths it was asked. */
export async function channelServer(
  t: { teardown(fn: () => unknown): void },
  dir: string,
): Promise<ChannelServer> {
  const srv = await startHttpsRouteServer(t, dir);
  return { ...srv, url: `${srv.origin}/stable/channel.json` };
}
