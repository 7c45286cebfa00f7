// A real update channel for engine tests: an https server on 127.0.0.1 under a test CA
// (@coffer/testkit's startHttpsRouteServer), channel documents built by @coffer/update's
// buildChannelDocumentFromBytes and signed by a hybrid signer with its signChannel, and an engine
// started with ENGINE_UPDATE_* pointing at it.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeKeyFile, generateSigner } from '@coffer/crypto';
import { passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { type HttpsRouteServer, labelledBytes, startHttpsRouteServer, tempDir } from '@coffer/testkit';
import {
  buildChannelDocumentFromBytes,
  type ChannelDocument,
  type RecommendedRelease,
  signChannel,
} from '@coffer/update';
import { create as createTar } from 'tar';
import { bearer, http, type Reply, type Started, startEngine } from '../helpers/engine.ts';

export const CONSOLE = 'https://console.coffer.test';
export const signer = generateSigner();
export const otherSigner = generateSigner();
const HOUR = 3600_000;

/** Artefact bytes that depend only on `label` (@coffer/testkit's labelledBytes). */
export const artefact = labelledBytes;

/**
 * A release tarball as the engine's upload unpacks it (`engine/main.js`, src/updates/release-artefact.ts);
 * `label` makes its bytes distinct. Not runnable: restart.test.ts builds real ones.
 */
export function engineArtefact(label: string): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), 'coffer-artefact-'));
  try {
    mkdirSync(join(dir, 'src', 'engine'), { recursive: true });
    writeFileSync(join(dir, 'src', 'engine', 'main.js'), `// ${label}\n`);
    const file = join(dir, 'a.tgz');
    createTar({ gzip: true, file, cwd: join(dir, 'src'), sync: true, portable: true, noMtime: true }, [
      'engine',
    ]);
    return new Uint8Array(readFileSync(file));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface Release {
  doc: ChannelDocument;
  files: Map<string, Uint8Array>;
}

/** A release at `version` (engine, and a console bundle unless `console: null`), valid for a day. */
export function release(
  o: {
    sequence?: number;
    version?: string;
    console?: string | null;
    recommended?: Partial<Omit<RecommendedRelease, 'version'>>;
    issuedAt?: string;
    expiresAt?: string;
  } = {},
): Release {
  const version = o.version ?? '1.4.0';
  const engine = { bytes: engineArtefact(`engine-${version}`), version, url: `engine-${version}.tgz` };
  const cv = o.console === null ? null : (o.console ?? version);
  const consoleArtefact =
    cv === null
      ? undefined
      : { bytes: artefact(`console-${cv}`, 2048), version: cv, url: `console-${cv}.tgz` };
  const doc = buildChannelDocumentFromBytes({
    sequence: o.sequence ?? 7,
    issuedAt: o.issuedAt === undefined ? new Date(Date.now() - HOUR) : new Date(o.issuedAt),
    expiresAt: o.expiresAt === undefined ? new Date(Date.now() + 24 * HOUR) : new Date(o.expiresAt),
    schemaEpoch: 1,
    ...o.recommended,
    engine,
    ...(consoleArtefact === undefined ? {} : { console: consoleArtefact }),
  });
  const files = new Map<string, Uint8Array>();
  for (const a of [engine, consoleArtefact]) if (a !== undefined) files.set(a.url, a.bytes);
  return { doc, files };
}

export interface Site {
  srv: HttpsRouteServer;
  url: string;
  env: Record<string, string>;
  publish(rel: Release, secretKey?: Uint8Array): void;
}

/** The channel server, the pinned key file and the CA file; `env` configures an engine for it. */
export async function channelSite(t: { teardown(fn: () => unknown): void }): Promise<Site> {
  const dir = tempDir(t);
  const srv = await startHttpsRouteServer(t, dir);
  const keyFile = join(dir, 'channel-signer.pub');
  writeFileSync(keyFile, encodeKeyFile('signer-public', signer.publicKey));
  const url = `${srv.origin}/stable/channel.json`;
  return {
    srv,
    url,
    env: {
      ENGINE_UPDATE_CHANNEL: url,
      ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE: keyFile,
      ENGINE_UPDATE_CA_FILE: srv.pki.caFile,
    },
    publish(rel, secretKey = signer.secretKey) {
      srv.routes.set('/stable/channel.json', { body: signChannel(rel.doc, secretKey) });
      for (const [name, bytes] of rel.files) srv.routes.set(`/stable/${name}`, { body: bytes });
    },
  };
}

export interface UpdateEngine extends Started {
  get(path: string, headers?: Record<string, string>): Promise<Reply>;
  post(path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply>;
  /** Mints a deploy token as the admin token. */
  deployToken(): Promise<string>;
  /** Cookie headers of a fresh session for a person holding `role`. */
  session(role: string): Promise<Record<string, string>>;
}

/** An engine running `engineVersion` (default 1.3.0) with the update channel of `site` (if any). */
export async function updateEngine(
  t: { teardown(fn: () => unknown): void },
  site: Site | null,
  o: { databaseUrl?: string; dataDir?: string; engineVersion?: string; env?: Record<string, string> } = {},
): Promise<UpdateEngine> {
  const e = await startEngine(
    t,
    {
      CONSOLE_ORIGIN: CONSOLE,
      ...(site?.env ?? {}),
      ...(o.databaseUrl ? { ENGINE_DATABASE_URL: o.databaseUrl } : {}),
      ...(o.dataDir ? { ENGINE_DATA_DIR: o.dataDir } : {}),
      ...o.env,
    },
    { updates: { engineVersion: o.engineVersion ?? '1.3.0' } },
  );
  const get = (path: string, headers: Record<string, string> = bearer()) =>
    http(`${e.url}/admin${path}`, { headers });
  const post = (path: string, body: unknown = {}, headers: Record<string, string> = {}) =>
    http(`${e.url}/admin${path}`, { headers: { ...bearer(), ...headers }, body });
  return {
    ...e,
    get,
    post,
    async deployToken() {
      const r = await post('/update/deploy-token');
      if (r.status !== 200) throw new Error(`deploy token: ${r.status} ${r.text}`);
      return r.json().token as string;
    },
    async session(role: string) {
      const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.org`;
      await e.app.state.roles.assign({ subject: passkeySubject(email), email, role, grantedBy: 'test' });
      const s = await e.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return { cookie: `${SESSION_COOKIE}=${s.token}`, origin: CONSOLE };
    },
  };
}

export const BACKENDS = ['sqlite', 'postgres'] as const;
