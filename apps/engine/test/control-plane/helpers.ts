/**
 * Control-plane test helpers: a world (break-glass key pair on disk, a source tree, a shared
 * `offsite` destination, kept copies of the first engine's key files), engines started in it,
 * the real `coffer-recover open-export`, and an export re-signed with a given signer (to plant a
 * plaintext secret under a valid signature, or to sign with another key).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  canonicalJson,
  decodeKeyFile,
  encodeKeyFile,
  fingerprint,
  generateRecipient,
  sign,
  signerPublicKeyFromSecret,
  toBase64Url,
} from '@coffer/crypto';
import { CSRF_COOKIE, passkeySubject, SESSION_COOKIE } from '@coffer/identity';
import { repoRoot, tempDir } from '@coffer/testkit';
import type { BuildAppOptions } from '../../src/app.ts';
import { bearer, http, type Started, startEngine } from '../helpers/engine.ts';
import { writeTree } from '../runs/helpers/world.ts';

export const CONSOLE = 'https://console.coffer.test';
export const RECOVER_CLI = join(repoRoot(), 'apps/recover/src/cli.ts');
type T = { teardown(fn: () => void | Promise<void>): void };

export interface World {
  root: string;
  source: string;
  offsite: string;
  bgSecret: string;
  bgPublic: string;
}

export function makeWorld(t: T): World {
  const root = tempDir(t, 'coffer-cp-');
  const bg = generateRecipient();
  const bgSecret = join(root, 'break-glass.key');
  const bgPublic = join(root, 'break-glass.key.pub');
  writeFileSync(bgSecret, encodeKeyFile('recipient-secret', bg.secretKey), { mode: 0o600 });
  writeFileSync(bgPublic, encodeKeyFile('recipient-public', bg.publicKey));
  const source = join(root, 'source');
  writeTree(source, { 'a.txt': 'alpha', 'b/c.txt': 'charlie' });
  return { root, source, offsite: join(root, 'offsite'), bgSecret, bgPublic };
}

export interface Engine extends Started {
  get(path: string, headers?: Record<string, string>): ReturnType<typeof http>;
  post(path: string, body?: unknown, headers?: Record<string, string>): ReturnType<typeof http>;
  /** Headers of a signed-in person (a passkey session) with this email. */
  person(email: string): Promise<Record<string, string>>;
}

export async function engineIn(
  t: T,
  world: World,
  env: Record<string, string> = {},
  options: Omit<BuildAppOptions, 'config'> = {},
): Promise<Engine> {
  const started = await startEngine(
    t,
    {
      ENGINE_BREAK_GLASS_PUBLIC_KEY: world.bgPublic,
      ENGINE_DESTINATIONS: `offsite=${world.offsite}`,
      HARNESS_TEST_FAULTS: '1',
      CONSOLE_ORIGIN: CONSOLE,
      ...env,
    },
    options,
  );
  return {
    ...started,
    get: (path, headers = bearer()) => http(`${started.url}/admin${path}`, { headers }),
    post: (path, body = {}, headers = bearer()) => http(`${started.url}/admin${path}`, { headers, body }),
    async person(email) {
      const m = await started.app.sessions.mint({ subject: passkeySubject(email), email, method: 'passkey' });
      return {
        cookie: `${SESSION_COOKIE}=${m.token}; ${CSRF_COOKIE}=${m.csrfToken}`,
        origin: CONSOLE,
        'x-engine-csrf': m.csrfToken,
      };
    },
  };
}

/** Copies an engine's signer and operational key files out of its data dir (mode 0600). */
export function keepKeys(engine: Started, dir: string): Record<string, string> {
  const signer = join(dir, 'signer.key');
  const operational = join(dir, 'operational.key');
  copyFileSync(engine.app.keys.signer.file, signer);
  copyFileSync(engine.app.keys.operational.file, operational);
  chmodSync(signer, 0o600);
  chmodSync(operational, 0o600);
  return { ENGINE_SIGNER_KEY_FILE: signer, ENGINE_OPERATIONAL_KEY_FILE: operational };
}

/** Runs the real `coffer-recover` (from source) and returns its exit status and output. */
export function recover(args: string[]) {
  const r = spawnSync(process.execPath, [RECOVER_CLI, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Re-signs `doc` with the signer secret key in `keyFile` (armoured) as a signed envelope, so a
 * test can plant something under a VALID signature.
 */
export function resign(doc: unknown, keyFile: string) {
  const secret = decodeKeyFile(readFileSync(keyFile, 'utf8'), 'signer-secret').key;
  const text = canonicalJson(doc);
  return {
    v: 1,
    kind: 'coffer-control-plane-signed-export',
    signerFingerprint: fingerprint(signerPublicKeyFromSecret(secret)),
    export: text,
    signature: toBase64Url(sign(secret, new TextEncoder().encode(text), 'coffer/control-plane-export/v1')),
  };
}
