/**
 * Named connections and drill scratch targets, read once at start from the JSON file that
 * ENGINE_CONNECTIONS_FILE names (docs/configuration.md "Connections file" is normative).
 *
 * Why a file and not the HTTP interface: a connection pairs an endpoint with the credentials meant
 * for it. Only whoever controls the deployment decides that pairing; a job (which `job.write`
 * holders edit) can only name a connection, so no caller below owner can make the engine send a
 * credential to a host it was not configured for.
 *
 * Security-relevant behaviour: the file holds no secret, only the NAMES of the environment
 * variables that hold them. A name of the engine's own configuration (ADMIN_TOKEN,
 * SCIM_BEARER_TOKEN, PERIMETER_*, HARNESS_*, ENGINE_*, ...) is refused, and so is a variable whose
 * value equals one of those variables' values (the same secret under another name), or that is
 * unset. Errors name the field, never a value.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { ConfigError } from '../errors.ts';

export const CONNECTIONS_VARIABLE = 'ENGINE_CONNECTIONS_FILE';
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const BUCKET = /^[a-z0-9][a-z0-9.-]+[a-z0-9]$/;
/** Exact variable names the engine itself reads for secrets or settings. */
const ENGINE_NAMES = new Set(['ADMIN_TOKEN', 'ADMIN_TOKEN_DISABLED', 'SCIM_BEARER_TOKEN', 'HOST', 'PORT']);
const ENGINE_PREFIXES = ['ENGINE_', 'PERIMETER_', 'HARNESS_', 'ADMIN_TOKEN', 'SCIM_'];
/**
 * Values shorter than this are not compared (flags such as `1` or `true` are not secrets, and
 * refusing every password equal to `true` would only confuse).
 */
const MIN_COMPARED_VALUE = 8;

export interface RedisConnection {
  id: string;
  type: 'redis';
  /** redis:// or rediss:// with host, optional port and optional /db; never credentials. */
  url: string;
  passwordEnv?: string;
  usernameEnv?: string;
  restore: boolean;
}

export interface S3Connection {
  id: string;
  type: 's3';
  /** An http(s) origin; absent: AWS. */
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  accessKeyIdEnv?: string;
  secretAccessKeyEnv?: string;
  /** When set, the only buckets a job, a restore or a drill may use through this connection. */
  buckets?: string[];
  restore: boolean;
}

export type Connection = RedisConnection | S3Connection;

export interface ScratchConfig {
  /** Directory under which each files/sqlite drill gets its own fresh directory. */
  files: string;
  redis?: { connection: string; db: number };
  s3?: { connection: string; bucket: string; prefix: string };
}

export interface ConnectionsConfig {
  /** Absolute path of the file, or undefined when ENGINE_CONNECTIONS_FILE is unset. */
  file: string | undefined;
  connections: ReadonlyMap<string, Connection>;
  scratch: ScratchConfig;
  /**
   * True when `name` may not be referenced (an engine variable) or its current value is the value
   * of one (a closure, so the compared values never sit in a serialisable object).
   */
  refusedReference(name: string): string | null;
}

/** Why `name` is one of the engine's own variables (refused as a credential reference), or null. */
export function engineVariableName(name: string): boolean {
  const upper = name.toUpperCase();
  return ENGINE_NAMES.has(upper) || ENGINE_PREFIXES.some((p) => upper.startsWith(p));
}

type Env = Record<string, string | undefined>;

/**
 * The reference check: the name is not an engine variable, the variable is set (in `secrets`, the
 * environment credentials are read from at use time) and its value is not the value of an engine
 * variable in `engineEnv` or `secrets`.
 */
function referenceChecker(engineEnv: Env, secrets: Env): (name: string) => string | null {
  return (name) => {
    if (engineVariableName(name))
      return 'names one of the engine’s own variables (never a credential source)';
    const value = secrets[name];
    if (value === undefined || value === '') return 'names an environment variable that is not set';
    for (const env of [engineEnv, secrets]) {
      for (const [k, v] of Object.entries(env)) {
        if (v === undefined || v.trim().length < MIN_COMPARED_VALUE || !engineVariableName(k)) continue;
        if (v === value || v.trim() === value.trim())
          return 'names a variable holding the value of one of the engine’s own variables';
      }
    }
    return null;
  };
}

class Fields {
  private readonly at: string;
  private readonly o: Record<string, unknown>;
  constructor(at: string, o: Record<string, unknown>) {
    this.at = at;
    this.o = o;
  }
  fail(field: string | null, reason: string): never {
    throw new ConfigError(
      CONNECTIONS_VARIABLE,
      `${field === null ? this.at : `${this.at}.${field}`} ${reason}`,
    );
  }
  only(allowed: string[]): void {
    for (const k of Object.keys(this.o)) if (!allowed.includes(k)) this.fail(k, 'is not a known field');
  }
  str(k: string, re: RegExp | null, required: boolean): string | undefined {
    const v = this.o[k];
    if (v === undefined) {
      if (required) this.fail(k, 'is required');
      return undefined;
    }
    if (typeof v !== 'string' || v === '' || v.length > 2048 || (re !== null && !re.test(v)))
      this.fail(k, re === ENV_NAME ? 'must be an environment variable name' : 'is malformed');
    return v;
  }
  bool(k: string): boolean | undefined {
    const v = this.o[k];
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') this.fail(k, 'must be true or false');
    return v;
  }
  int(k: string, min: number, max: number): number | undefined {
    const v = this.o[k];
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || (v as number) < min || (v as number) > max)
      this.fail(k, `must be an integer from ${min} to ${max}`);
    return v as number;
  }
  envRef(k: string, check: (name: string) => string | null): string | undefined {
    const name = this.str(k, ENV_NAME, false);
    if (name === undefined) return undefined;
    const why = check(name);
    if (why !== null) this.fail(k, why);
    return name;
  }
}

function object(v: unknown, at: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new ConfigError(CONNECTIONS_VARIABLE, `${at} must be a JSON object`);
  return v as Record<string, unknown>;
}

function redisUrl(f: Fields, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return f.fail('url', 'is not a URL');
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    f.fail('url', 'must be a redis:// or rediss:// URL');
  if (u.username !== '' || u.password !== '')
    f.fail('url', 'must not carry credentials (name them with passwordEnv / usernameEnv)');
  if (u.hostname === '') f.fail('url', 'must name a host');
  if (!/^\/?(\d{1,4})?$/.test(u.pathname) || u.search !== '' || u.hash !== '')
    f.fail('url', 'may carry only a database number as its path');
  return raw;
}

function s3Endpoint(f: Fields, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return f.fail('endpoint', 'is not a URL');
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.username !== '' || u.password !== '')
    f.fail('endpoint', 'must be an http(s) URL without credentials');
  return raw;
}

function connectionOf(id: string, v: unknown, check: (name: string) => string | null): Connection {
  const at = `connections.${id}`;
  const o = object(v, at);
  const f = new Fields(at, o);
  if (!ID.test(id))
    f.fail(null, 'is not a valid connection id (letters, digits, dot, underscore, hyphen; 1-64)');
  const restore = f.bool('restore') ?? false;
  if (o.type === 'redis') {
    f.only(['type', 'url', 'passwordEnv', 'usernameEnv', 'restore', 'description']);
    f.str('description', null, false);
    const url = redisUrl(f, f.str('url', null, true)!);
    const c: RedisConnection = { id, type: 'redis', url, restore };
    const passwordEnv = f.envRef('passwordEnv', check);
    const usernameEnv = f.envRef('usernameEnv', check);
    if (passwordEnv !== undefined) c.passwordEnv = passwordEnv;
    if (usernameEnv !== undefined) c.usernameEnv = usernameEnv;
    return c;
  }
  if (o.type === 's3') {
    f.only([
      'type',
      'endpoint',
      'region',
      'forcePathStyle',
      'accessKeyIdEnv',
      'secretAccessKeyEnv',
      'buckets',
      'restore',
      'description',
    ]);
    f.str('description', null, false);
    const c: S3Connection = { id, type: 's3', restore };
    const endpoint = f.str('endpoint', null, false);
    if (endpoint !== undefined) c.endpoint = s3Endpoint(f, endpoint);
    const region = f.str('region', /^[A-Za-z0-9-]{1,64}$/, false);
    if (region !== undefined) c.region = region;
    const fps = f.bool('forcePathStyle');
    if (fps !== undefined) c.forcePathStyle = fps;
    const keyId = f.envRef('accessKeyIdEnv', check);
    const secret = f.envRef('secretAccessKeyEnv', check);
    if ((keyId === undefined) !== (secret === undefined))
      f.fail('secretAccessKeyEnv', 'and accessKeyIdEnv must be given together');
    if (keyId !== undefined) c.accessKeyIdEnv = keyId;
    if (secret !== undefined) c.secretAccessKeyEnv = secret;
    if (o.buckets !== undefined) {
      const b = o.buckets;
      if (!Array.isArray(b) || b.length === 0 || b.length > 1000)
        f.fail('buckets', 'must be a non-empty list of bucket names');
      for (const name of b as unknown[])
        if (typeof name !== 'string' || name.length > 63 || !BUCKET.test(name))
          f.fail('buckets', 'holds a malformed bucket name');
      c.buckets = [...new Set(b as string[])];
    }
    return c;
  }
  return f.fail('type', 'must be "redis" or "s3"');
}

function scratchOf(
  v: unknown,
  connections: ReadonlyMap<string, Connection>,
  dataDir: string,
  cwd: string,
): ScratchConfig {
  const scratch: ScratchConfig = { files: join(dataDir, 'drills') };
  if (v === undefined) return scratch;
  const o = object(v, 'scratch');
  const f = new Fields('scratch', o);
  f.only(['files', 'redis', 's3']);
  const files = f.str('files', null, false);
  if (files !== undefined) {
    if (!isAbsolute(files)) f.fail('files', 'must be an absolute path');
    scratch.files = resolve(cwd, files);
  }
  const named = (g: Fields, id: string | undefined, type: Connection['type']): Connection => {
    const c = id === undefined ? undefined : connections.get(id);
    if (c === undefined) return g.fail('connection', 'names no configured connection');
    if (c.type !== type) g.fail('connection', `names a ${c.type} connection, not ${type}`);
    return c;
  };
  if (o.redis !== undefined) {
    const r = object(o.redis, 'scratch.redis');
    const g = new Fields('scratch.redis', r);
    g.only(['connection', 'db']);
    const connection = named(g, g.str('connection', ID, true), 'redis').id;
    scratch.redis = { connection, db: g.int('db', 0, 1023) ?? 0 };
  }
  if (o.s3 !== undefined) {
    const s = object(o.s3, 'scratch.s3');
    const g = new Fields('scratch.s3', s);
    g.only(['connection', 'bucket', 'prefix']);
    const c = named(g, g.str('connection', ID, true), 's3') as S3Connection;
    const bucket = g.str('bucket', BUCKET, true)!;
    if (c.buckets && !c.buckets.includes(bucket)) g.fail('bucket', 'is not in the connection’s buckets');
    const prefix = g.str('prefix', /^[^\s]{0,512}$/, false) ?? '';
    if (
      prefix.startsWith('/') ||
      prefix.split('/').some((seg, i, all) => seg === '..' || (seg === '' && i < all.length - 1))
    )
      g.fail('prefix', 'must be a relative key prefix without empty or .. segments');
    scratch.s3 = {
      connection: c.id,
      bucket,
      prefix: prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`,
    };
  }
  return scratch;
}

/**
 * Reads ENGINE_CONNECTIONS_FILE from `env` (unset: no connections, scratch files under
 * `<dataDir>/drills`). `secrets` is the environment credentials are read from at use time
 * (process.env in the engine). Throws ConfigError naming the field.
 */
export function loadConnections(
  env: Env,
  cwd: string,
  dataDir: string,
  secrets: Env = process.env,
): ConnectionsConfig {
  const check = referenceChecker(env, secrets);
  const raw = env[CONNECTIONS_VARIABLE]?.trim();
  const empty = new Map<string, Connection>();
  if (raw === undefined || raw === '')
    return {
      file: undefined,
      connections: empty,
      scratch: scratchOf(undefined, empty, dataDir, cwd),
      refusedReference: check,
    };
  const file = resolve(cwd, raw);
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError(
      CONNECTIONS_VARIABLE,
      (e as { code?: string }).code === undefined
        ? 'the file is not valid JSON'
        : 'names a file that cannot be read',
    );
  }
  const top = object(doc, 'the file');
  const f = new Fields('the file', top);
  f.only(['connections', 'scratch', '$comment']);
  const connections = new Map<string, Connection>();
  if (top.connections !== undefined) {
    for (const [id, v] of Object.entries(object(top.connections, 'connections')))
      connections.set(id, connectionOf(id, v, check));
  }
  return {
    file,
    connections,
    scratch: scratchOf(top.scratch, connections, dataDir, cwd),
    refusedReference: check,
  };
}

/** No connections at all (a redis or s3 source cannot be opened); scratch files under /nonexistent. */
export const NO_CONNECTIONS: ConnectionsConfig = {
  file: undefined,
  connections: new Map(),
  scratch: { files: '/nonexistent/coffer-drills' },
  refusedReference: () => 'cannot be resolved (no connections are configured)',
};
