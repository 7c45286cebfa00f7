// Real signed channel documents and a real https channel server on 127.0.0.1 under a test CA.
import { createHash } from 'node:crypto';
import { generateSigner } from '@coffer/crypto';
import {
  type HttpsRoute,
  type HttpsRouteServer,
  labelledBytes,
  startHttpsRouteServer,
} from '@coffer/testkit';
import type { ChannelDocument, ChannelTrust, RecommendedRelease } from '../../src/index.ts';
import { buildChannelDocumentFromBytes, signChannel } from '../../src/index.ts';

export const signer = generateSigner();
export const otherSigner = generateSigner();
export const trust: ChannelTrust = { publicKey: signer.publicKey };

export const NOW = Date.parse('2026-05-01T12:00:00Z');

export function sha384(bytes: Uint8Array): string {
  return `sha384:${createHash('sha384').update(bytes).digest('hex')}`;
}

/** Artefact bytes that depend only on `label` (@coffer/testkit's labelledBytes). */
export const artefactBytes = labelledBytes;

/** A checked channel document (buildChannelDocumentFromBytes) for a release at `version`. */
export function makeDoc(
  overrides: {
    sequence?: number;
    version?: string;
    engine?: Uint8Array;
    console?: Uint8Array | null;
    consoleVersion?: string;
    url?: string;
    recommended?: Partial<Omit<RecommendedRelease, 'version'>>;
    issuedAt?: string;
    expiresAt?: string;
  } = {},
): ChannelDocument {
  const version = overrides.version ?? '1.4.0';
  const cv = overrides.consoleVersion ?? version;
  const consoleBytes =
    overrides.console === null ? null : (overrides.console ?? artefactBytes(`console-${version}`, 2048));
  return buildChannelDocumentFromBytes({
    sequence: overrides.sequence ?? 7,
    issuedAt: new Date(overrides.issuedAt ?? '2026-05-01T00:00:00Z'),
    expiresAt: new Date(overrides.expiresAt ?? '2026-05-31T00:00:00Z'),
    schemaEpoch: 1,
    ...overrides.recommended,
    engine: {
      bytes: overrides.engine ?? artefactBytes(`engine-${version}`),
      version,
      url: overrides.url ?? `engine-${version}.tgz`,
    },
    ...(consoleBytes === null
      ? {}
      : { console: { bytes: consoleBytes, version: cv, url: `console-${cv}.tgz` } }),
  });
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
