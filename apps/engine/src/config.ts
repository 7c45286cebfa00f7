/**
 * Engine configuration from environment variables, with the specification's names verbatim
 * (ADMIN_TOKEN, ADMIN_TOKEN_DISABLED, CONSOLE_ORIGIN, PERIMETER_ACCESS_TEAM_DOMAIN,
 * PERIMETER_ACCESS_AUD, SCIM_BEARER_TOKEN, HARNESS_TEST_FAULTS) plus the engine's own ENGINE_*
 * variables, HOST and PORT. Every variable is documented in docs/configuration.md.
 *
 * Security-relevant behaviour: a bad value throws ConfigError naming the variable (never echoing
 * its value, which may be a secret); secrets are kept only in this object and never logged.
 * Key material is read here as text only; decoding and checking its kind happens in keys.ts.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { type ConnectionsConfig, loadConnections } from './connections/config.ts';
import { ConfigError } from './errors.ts';

export type DatabaseConfig = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string };

/** A public key given as armoured text directly or as a path to a file holding it. */
export interface KeyTextSource {
  variable: string;
  text: string;
  /** Absolute path when the variable named a file. */
  path?: string;
}

export interface EngineConfig {
  host: string;
  port: number;
  dataDir: string;
  database: DatabaseConfig;
  /** The bare admin token (secret). Undefined when unset or empty. */
  adminToken: string | undefined;
  adminTokenDisabled: boolean;
  consoleOrigin: string | undefined;
  /**
   * ENGINE_TRUST_PROXY: addresses or CIDR ranges (comma-separated) of proxies in front of the
   * engine, such as the console, whose `X-Forwarded-For` names the client; empty = trust none, so
   * per-address limits use the connecting address.
   */
  trustProxy: string[];
  perimeter: { teamDomain: string; audience: string } | undefined;
  scimBearerToken: string | undefined;
  harnessTestFaults: boolean;
  /** ENGINE_DEMO: enables `POST /admin/demo/reset` (demo installations only). */
  demo: boolean;
  restoreRoots: string[];
  tls: { certFile: string; keyFile: string } | undefined;
  signerKeyFile: string | undefined;
  operationalKeyFile: string | undefined;
  breakGlassPublicKey: KeyTextSource | undefined;
  supportPublicKey: KeyTextSource | undefined;
  logLevel: string;
  /** ENGINE_TICK_SECONDS: the reconciliation tick (default 900). */
  tickSeconds: number;
  /** ENGINE_RUN_LEASE_SECONDS: run-lock lease time to live (default 60). */
  runLeaseSeconds: number;
  /** ENGINE_CANARY_INTERVAL_SECONDS: how often the integrity canary flies (default 3600, at least 60). */
  canaryIntervalSeconds: number;
  /** ENGINE_DESTINATIONS: extra destinations (`default` is always the local store in the data dir). */
  destinations: { id: string; url: string }[];
  /** ENGINE_CONNECTIONS_FILE: named redis/s3 connections and drill scratch targets (src/connections). */
  connections: ConnectionsConfig;
  /**
   * ENGINE_RESTORE_READS_PER_ENGINE / ENGINE_RESTORE_READS_PER_CALLER: restore dry runs and
   * verifies (they read and hash every record) and pack reclaim dry runs (they read every index of
   * a job), which every role may call, in flight at once in this process, and per caller (defaults
   * 2 and 1).
   */
  restoreReads: { perEngine: number; perCaller: number };
  /**
   * ENGINE_INCREMENTAL_BASE_CACHE_MIB: MiB of incremental bases kept from one run to the job's
   * next (runs/base-cache.ts; default 100, 0 keeps none).
   */
  incrementalBaseCacheMiB: number;
  /**
   * ENGINE_SESSION_TTL_SECONDS / ENGINE_TOKEN_SESSION_TTL_SECONDS: cookie session lifetimes for
   * people (default 8 hours) and for token sessions (default 1 hour), docs/identity.md.
   */
  sessionTtl: { person: number; token: number };
  /**
   * Outgoing mail (ENGINE_SMTP_URL `smtp://host:port` or `smtps://host:port`, ENGINE_SMTP_USERNAME,
   * ENGINE_SMTP_PASSWORD, ENGINE_MAIL_FROM): undefined when ENGINE_SMTP_URL is unset.
   */
  mail: { url: string; username: string | undefined; password: string | undefined; from: string } | undefined;
  /** ENGINE_FIRST_OWNER_EMAIL: the deploy-pinned address the first-owner set-up link goes to. */
  firstOwnerEmail: string | undefined;
  /**
   * Notifications (docs/notifications.md): ENGINE_NOTIFY_CA_FILE, PEM certificates trusted for
   * notification receivers besides the system's (a private CA in front of an internal chat or
   * ticketing server); ENGINE_NOTIFY_INCIDENT_URL, the incident service's events endpoint
   * (default PagerDuty's), an https URL.
   */
  notify: { ca: string | undefined; incidentUrl: string | undefined };
  /**
   * The update channel (docs/updates.md): undefined when ENGINE_UPDATE_CHANNEL is unset.
   * `channel` is an https URL without credentials or an absolute local path (a channel file or a
   * directory holding `channel.json`, for air-gapped sites); `signerPublicKey` the pinned hybrid
   * signer's public key file text (ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE, required with a channel);
   * `ca` PEM certificates trusted instead of the system roots (ENGINE_UPDATE_CA_FILE); `deployer`
   * (ENGINE_UPDATE_DEPLOYER) `directory` (default: releases under `<data dir>/releases/`) or
   * `container` (the orchestrator swaps the image ENGINE_UPDATE_IMAGE names); `settleDelaySeconds`
   * (ENGINE_UPDATE_SETTLE_DELAY_SECONDS, default 30) how long a freshly promoted engine runs before
   * its settling canary flies, unless a canary flight comes first.
   */
  update:
    | {
        channel: string;
        signerPublicKey: { path: string; text: string };
        ca: string | undefined;
        deployer: 'directory' | 'container';
        image: string | undefined;
        settleDelaySeconds: number;
      }
    | undefined;
  /**
   * The licence (docs/posture.md "Licence"): ENGINE_LICENCE_FILE, the signed licence file, read at
   * each `GET /admin/licence` and never at start (a missing or broken file cannot stop the engine:
   * a licence never gates a backup or a restore); ENGINE_LICENCE_VENDOR_PUBLIC_KEY, a signer public
   * key (armoured text, or a file path read when a licence is checked) trusted instead of the
   * built-in vendor pin.
   */
  licence: { file: string | undefined; vendorPublicKey: { text: string } | { path: string } | undefined };
}

type Env = Record<string, string | undefined>;

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off', '']);
const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
// A DNS host name: labels of letters, digits and hyphens, at least two labels.
const HOST_NAME =
  /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;
/** Shortest admin token accepted: guessing must stay out of reach even without rate limits. */
export const ADMIN_TOKEN_MIN_LENGTH = 16;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  if (v === undefined) return undefined;
  const t = v.trim();
  return t === '' ? undefined : t;
}

function flag(env: Env, name: string): boolean {
  const v = (env[name] ?? '').trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new ConfigError(name, 'must be one of 1, true, yes, on, 0, false, no, off');
}

function port(env: Env): number {
  const v = str(env, 'PORT');
  if (v === undefined) return 8787;
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535)
    throw new ConfigError('PORT', 'must be an integer from 0 to 65535');
  return Number(v);
}

function trustProxy(env: Env): string[] {
  const v = str(env, 'ENGINE_TRUST_PROXY');
  if (v === undefined) return [];
  const entries = v
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  for (const e of entries) {
    const [addr, bits, extra] = e.split('/');
    const family = isIP(addr ?? '');
    const max = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      extra !== undefined ||
      (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= max))
    )
      throw new ConfigError('ENGINE_TRUST_PROXY', 'must list IP addresses or CIDR ranges, comma-separated');
  }
  return entries;
}

function origin(env: Env): string | undefined {
  const v = str(env, 'CONSOLE_ORIGIN');
  if (v === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new ConfigError('CONSOLE_ORIGIN', 'must be an origin such as https://console.example.com');
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== v) {
    throw new ConfigError(
      'CONSOLE_ORIGIN',
      'must be a bare http(s) origin (scheme, host and optional port; no path, no trailing slash)',
    );
  }
  return v;
}

function perimeter(env: Env): EngineConfig['perimeter'] {
  const domain = str(env, 'PERIMETER_ACCESS_TEAM_DOMAIN');
  const aud = str(env, 'PERIMETER_ACCESS_AUD');
  if (domain === undefined && aud === undefined) return undefined;
  if (domain === undefined)
    throw new ConfigError('PERIMETER_ACCESS_TEAM_DOMAIN', 'must be set with PERIMETER_ACCESS_AUD');
  if (aud === undefined)
    throw new ConfigError('PERIMETER_ACCESS_AUD', 'must be set with PERIMETER_ACCESS_TEAM_DOMAIN');
  if (!HOST_NAME.test(domain)) {
    throw new ConfigError(
      'PERIMETER_ACCESS_TEAM_DOMAIN',
      'must be a host name such as team.example.com (no scheme, port or path)',
    );
  }
  return { teamDomain: domain.toLowerCase(), audience: aud };
}

function database(env: Env, dataDir: string): DatabaseConfig {
  const v = str(env, 'ENGINE_DATABASE_URL');
  if (v === undefined) return { kind: 'sqlite', file: join(dataDir, 'state.sqlite') };
  if (/^postgres(ql)?:\/\//i.test(v)) {
    try {
      new URL(v);
    } catch {
      throw new ConfigError('ENGINE_DATABASE_URL', 'is not a valid postgres:// URL');
    }
    return { kind: 'postgres', url: v };
  }
  throw new ConfigError(
    'ENGINE_DATABASE_URL',
    'must be a postgres:// or postgresql:// URL (leave unset for SQLite)',
  );
}

function readable(name: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw new ConfigError(name, 'names a file that cannot be read');
  }
}

function keyText(env: Env, name: string, cwd: string): KeyTextSource | undefined {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  // Armoured key text spans lines or carries a BEGIN marker; anything else is a file path.
  if (raw.includes('\n') || /BEGIN /.test(raw)) return { variable: name, text: raw };
  const path = resolve(cwd, raw.trim());
  return { variable: name, text: readable(name, path), path };
}

function optionalFile(env: Env, name: string, cwd: string): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  const path = resolve(cwd, v);
  readable(name, path);
  return path;
}

function tls(env: Env, cwd: string): EngineConfig['tls'] {
  const cert = optionalFile(env, 'ENGINE_TLS_CERT_FILE', cwd);
  const key = optionalFile(env, 'ENGINE_TLS_KEY_FILE', cwd);
  if (cert === undefined && key === undefined) return undefined;
  if (cert === undefined)
    throw new ConfigError('ENGINE_TLS_CERT_FILE', 'must be set with ENGINE_TLS_KEY_FILE');
  if (key === undefined)
    throw new ConfigError('ENGINE_TLS_KEY_FILE', 'must be set with ENGINE_TLS_CERT_FILE');
  return { certFile: cert, keyFile: key };
}

function restoreRoots(env: Env, cwd: string): string[] {
  const v = str(env, 'ENGINE_RESTORE_ROOTS');
  if (v === undefined) return [];
  const roots = v.split(delimiter).filter((p) => p.trim() !== '');
  for (const r of roots) {
    if (!isAbsolute(r.trim()))
      throw new ConfigError('ENGINE_RESTORE_ROOTS', 'every entry must be an absolute path');
  }
  return roots.map((r) => resolve(cwd, r.trim()));
}

function count(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (!/^\d{1,6}$/.test(v) || Number(v) < min || Number(v) > max)
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}`);
  return Number(v);
}

const ADDRESS = /^[^\s@"<>()[\]\\,;:]+@[^\s@"<>()[\]\\,;:]+\.[^\s@"<>()[\]\\,;:]+$/;

function mail(env: Env): EngineConfig['mail'] {
  const url = str(env, 'ENGINE_SMTP_URL');
  if (url === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError('ENGINE_SMTP_URL', 'must be smtp://host:port or smtps://host:port');
  }
  if (
    (u.protocol !== 'smtp:' && u.protocol !== 'smtps:') ||
    u.hostname === '' ||
    u.username !== '' ||
    u.password !== ''
  )
    throw new ConfigError(
      'ENGINE_SMTP_URL',
      'must be smtp://host:port or smtps://host:port, credentials in ENGINE_SMTP_USERNAME and ENGINE_SMTP_PASSWORD',
    );
  const from = str(env, 'ENGINE_MAIL_FROM') ?? `coffer@${u.hostname}`;
  if (!ADDRESS.test(from)) throw new ConfigError('ENGINE_MAIL_FROM', 'must be an email address');
  return {
    url: `${u.protocol}//${u.host}`,
    username: str(env, 'ENGINE_SMTP_USERNAME'),
    password: str(env, 'ENGINE_SMTP_PASSWORD'),
    from,
  };
}

function notifyConfig(env: Env, cwd: string): EngineConfig['notify'] {
  const caFile = str(env, 'ENGINE_NOTIFY_CA_FILE');
  let ca: string | undefined;
  if (caFile !== undefined) {
    try {
      ca = readFileSync(resolve(cwd, caFile), 'utf8');
    } catch {
      throw new ConfigError('ENGINE_NOTIFY_CA_FILE', 'names a file that cannot be read');
    }
    if (!ca.includes('-----BEGIN CERTIFICATE-----'))
      throw new ConfigError('ENGINE_NOTIFY_CA_FILE', 'must hold PEM certificates');
  }
  const incidentUrl = str(env, 'ENGINE_NOTIFY_INCIDENT_URL');
  if (incidentUrl !== undefined) {
    let u: URL;
    try {
      u = new URL(incidentUrl);
    } catch {
      throw new ConfigError('ENGINE_NOTIFY_INCIDENT_URL', 'must be an https URL');
    }
    if (u.protocol !== 'https:' || u.username || u.password)
      throw new ConfigError('ENGINE_NOTIFY_INCIDENT_URL', 'must be an https URL without credentials');
  }
  return { ca, incidentUrl };
}

const IMAGE = /^[a-z0-9][a-z0-9._/:-]{0,254}$/;

function pemFile(env: Env, name: string, cwd: string): string | undefined {
  const file = str(env, name);
  if (file === undefined) return undefined;
  const text = readable(name, resolve(cwd, file));
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new ConfigError(name, 'must hold PEM certificates');
  return text;
}

function updateConfig(env: Env, cwd: string): EngineConfig['update'] {
  const channel = str(env, 'ENGINE_UPDATE_CHANNEL');
  const keyFile = str(env, 'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE');
  const ca = pemFile(env, 'ENGINE_UPDATE_CA_FILE', cwd);
  const deployer = (str(env, 'ENGINE_UPDATE_DEPLOYER') ?? 'directory').toLowerCase();
  if (deployer !== 'directory' && deployer !== 'container')
    throw new ConfigError('ENGINE_UPDATE_DEPLOYER', 'must be directory or container');
  const image = str(env, 'ENGINE_UPDATE_IMAGE');
  if (image !== undefined && (!IMAGE.test(image) || image.includes('@')))
    throw new ConfigError(
      'ENGINE_UPDATE_IMAGE',
      'must be an image repository such as ghcr.io/acme/coffer-engine',
    );
  if (channel === undefined) {
    if (keyFile !== undefined)
      throw new ConfigError('ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'is set without ENGINE_UPDATE_CHANNEL');
    return undefined;
  }
  let location: string;
  if (/^[a-z][a-z0-9+.-]*:/i.test(channel) && !/^[a-z]:[\\/]/i.test(channel)) {
    let u: URL;
    try {
      u = new URL(channel);
    } catch {
      throw new ConfigError('ENGINE_UPDATE_CHANNEL', 'must be an https URL or an absolute path');
    }
    if (u.protocol !== 'https:' || u.username !== '' || u.password !== '')
      throw new ConfigError(
        'ENGINE_UPDATE_CHANNEL',
        'must be an https URL without credentials, or an absolute local path',
      );
    location = u.href;
  } else {
    if (!isAbsolute(channel))
      throw new ConfigError('ENGINE_UPDATE_CHANNEL', 'a local channel must be an absolute path');
    location = resolve(channel);
  }
  if (keyFile === undefined)
    throw new ConfigError('ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'must be set with ENGINE_UPDATE_CHANNEL');
  const path = resolve(cwd, keyFile);
  const text = readable('ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', path);
  if (!/BEGIN /.test(text) || /SECRET|PRIVATE/i.test(text))
    throw new ConfigError('ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE', 'must hold a signer PUBLIC key file');
  const settleDelaySeconds = seconds(env, 'ENGINE_UPDATE_SETTLE_DELAY_SECONDS', 30, 0, 86_400);
  return { channel: location, signerPublicKey: { path, text }, ca, deployer, image, settleDelaySeconds };
}

function licence(env: Env, cwd: string): EngineConfig['licence'] {
  const file = str(env, 'ENGINE_LICENCE_FILE');
  const key = env.ENGINE_LICENCE_VENDOR_PUBLIC_KEY;
  let vendorPublicKey: EngineConfig['licence']['vendorPublicKey'];
  if (key === undefined || key.trim() === '') vendorPublicKey = undefined;
  // Armoured key text spans lines or carries a BEGIN marker; anything else is a file path.
  else if (key.includes('\n') || /BEGIN /.test(key)) vendorPublicKey = { text: key };
  else vendorPublicKey = { path: resolve(cwd, key.trim()) };
  return { file: file === undefined ? undefined : resolve(cwd, file), vendorPublicKey };
}

function firstOwnerEmail(env: Env): string | undefined {
  const v = str(env, 'ENGINE_FIRST_OWNER_EMAIL');
  if (v === undefined) return undefined;
  const email = v.trim().toLowerCase();
  if (!ADDRESS.test(email)) throw new ConfigError('ENGINE_FIRST_OWNER_EMAIL', 'must be an email address');
  return email;
}

function seconds(env: Env, name: string, fallback: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  if (!/^\d{1,6}$/.test(v) || Number(v) < min || Number(v) > max)
    throw new ConfigError(name, `must be a whole number of seconds from ${min} to ${max}`);
  return Number(v);
}

const DESTINATION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** `id=url` entries separated by whitespace or commas; url `file:///dir`, `/dir` or `s3://bucket/prefix?...`. */
function destinations(env: Env, cwd: string): { id: string; url: string }[] {
  const v = str(env, 'ENGINE_DESTINATIONS');
  if (v === undefined) return [];
  const out: { id: string; url: string }[] = [];
  for (const entry of v.split(/[\s,]+/).filter((e) => e !== '')) {
    const eq = entry.indexOf('=');
    const id = eq > 0 ? entry.slice(0, eq) : '';
    const url = eq > 0 ? entry.slice(eq + 1) : '';
    if (!DESTINATION_ID.test(id) || id === 'default' || url === '')
      throw new ConfigError(
        'ENGINE_DESTINATIONS',
        'entries must be id=url with a job-id-like id other than default',
      );
    if (out.some((d) => d.id === id))
      throw new ConfigError('ENGINE_DESTINATIONS', 'a destination id is repeated');
    if (!/^(file|s3):/i.test(url) && !isAbsolute(url))
      throw new ConfigError('ENGINE_DESTINATIONS', 'a url must be file://, s3:// or an absolute path');
    out.push({ id, url: isAbsolute(url) ? resolve(cwd, url) : url });
  }
  return out;
}

/**
 * Reads the configuration from `env` (default: process.env). Relative paths resolve against
 * `cwd` (default: process.cwd()). Returns the parsed configuration; throws ConfigError naming
 * the first bad variable.
 */
export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): EngineConfig {
  const dataDir = resolve(cwd, str(env, 'ENGINE_DATA_DIR') ?? './.coffer');
  const adminToken = str(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < ADMIN_TOKEN_MIN_LENGTH) {
    throw new ConfigError('ADMIN_TOKEN', `must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters long`);
  }
  const logLevel = (str(env, 'ENGINE_LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.has(logLevel)) {
    throw new ConfigError(
      'ENGINE_LOG_LEVEL',
      'must be one of fatal, error, warn, info, debug, trace, silent',
    );
  }
  return {
    host: str(env, 'HOST') ?? '127.0.0.1',
    port: port(env),
    dataDir,
    database: database(env, dataDir),
    adminToken,
    adminTokenDisabled: flag(env, 'ADMIN_TOKEN_DISABLED'),
    consoleOrigin: origin(env),
    trustProxy: trustProxy(env),
    perimeter: perimeter(env),
    scimBearerToken: str(env, 'SCIM_BEARER_TOKEN'),
    harnessTestFaults: flag(env, 'HARNESS_TEST_FAULTS'),
    demo: flag(env, 'ENGINE_DEMO'),
    restoreRoots: restoreRoots(env, cwd),
    tls: tls(env, cwd),
    signerKeyFile: optionalFile(env, 'ENGINE_SIGNER_KEY_FILE', cwd),
    operationalKeyFile: optionalFile(env, 'ENGINE_OPERATIONAL_KEY_FILE', cwd),
    breakGlassPublicKey: keyText(env, 'ENGINE_BREAK_GLASS_PUBLIC_KEY', cwd),
    supportPublicKey: keyText(env, 'ENGINE_SUPPORT_PUBLIC_KEY', cwd),
    logLevel,
    tickSeconds: seconds(env, 'ENGINE_TICK_SECONDS', 900, 5, 86_400),
    runLeaseSeconds: seconds(env, 'ENGINE_RUN_LEASE_SECONDS', 60, 5, 3600),
    canaryIntervalSeconds: seconds(env, 'ENGINE_CANARY_INTERVAL_SECONDS', 3600, 60, 86_400),
    destinations: destinations(env, cwd),
    connections: loadConnections(env, cwd, dataDir),
    restoreReads: {
      perEngine: count(env, 'ENGINE_RESTORE_READS_PER_ENGINE', 2, 1, 64),
      perCaller: count(env, 'ENGINE_RESTORE_READS_PER_CALLER', 1, 1, 64),
    },
    incrementalBaseCacheMiB: count(env, 'ENGINE_INCREMENTAL_BASE_CACHE_MIB', 100, 0, 65_536),
    mail: mail(env),
    firstOwnerEmail: firstOwnerEmail(env),
    notify: notifyConfig(env, cwd),
    update: updateConfig(env, cwd),
    licence: licence(env, cwd),
    sessionTtl: {
      person: seconds(env, 'ENGINE_SESSION_TTL_SECONDS', 8 * 3600, 60, 7 * 86_400),
      token: seconds(env, 'ENGINE_TOKEN_SESSION_TTL_SECONDS', 3600, 60, 7 * 86_400),
    },
  };
}

/** The variables loadConfig reads, in documentation order (docs/configuration.md lists each). */
export const CONFIG_VARIABLES = [
  'HOST',
  'PORT',
  'ENGINE_DATA_DIR',
  'ENGINE_DATABASE_URL',
  'ADMIN_TOKEN',
  'ADMIN_TOKEN_DISABLED',
  'CONSOLE_ORIGIN',
  'ENGINE_TRUST_PROXY',
  'PERIMETER_ACCESS_TEAM_DOMAIN',
  'PERIMETER_ACCESS_AUD',
  'SCIM_BEARER_TOKEN',
  'HARNESS_TEST_FAULTS',
  'ENGINE_DEMO',
  'ENGINE_RESTORE_ROOTS',
  'ENGINE_TLS_CERT_FILE',
  'ENGINE_TLS_KEY_FILE',
  'ENGINE_SIGNER_KEY_FILE',
  'ENGINE_OPERATIONAL_KEY_FILE',
  'ENGINE_BREAK_GLASS_PUBLIC_KEY',
  'ENGINE_SUPPORT_PUBLIC_KEY',
  'ENGINE_LOG_LEVEL',
  'ENGINE_TICK_SECONDS',
  'ENGINE_RUN_LEASE_SECONDS',
  'ENGINE_CANARY_INTERVAL_SECONDS',
  'ENGINE_DESTINATIONS',
  'ENGINE_CONNECTIONS_FILE',
  'ENGINE_RESTORE_READS_PER_ENGINE',
  'ENGINE_RESTORE_READS_PER_CALLER',
  'ENGINE_INCREMENTAL_BASE_CACHE_MIB',
  'ENGINE_SESSION_TTL_SECONDS',
  'ENGINE_TOKEN_SESSION_TTL_SECONDS',
  'ENGINE_SMTP_URL',
  'ENGINE_SMTP_USERNAME',
  'ENGINE_SMTP_PASSWORD',
  'ENGINE_MAIL_FROM',
  'ENGINE_FIRST_OWNER_EMAIL',
  'ENGINE_NOTIFY_CA_FILE',
  'ENGINE_NOTIFY_INCIDENT_URL',
  'ENGINE_UPDATE_CHANNEL',
  'ENGINE_UPDATE_SIGNER_PUBLIC_KEY_FILE',
  'ENGINE_UPDATE_CA_FILE',
  'ENGINE_UPDATE_DEPLOYER',
  'ENGINE_UPDATE_IMAGE',
  'ENGINE_UPDATE_SETTLE_DELAY_SECONDS',
  'ENGINE_LICENCE_FILE',
  'ENGINE_LICENCE_VENDOR_PUBLIC_KEY',
] as const;
