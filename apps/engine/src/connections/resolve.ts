/**
 * From a job's `source` (which names a connection) to a @coffer/sources connector configuration,
 * and the checks that keep a job, a restore and a drill inside what the deployment configured:
 *
 * - `checkJobSource`: the upsert-time refusals (inline endpoints or credential names, an unknown
 *   connection, a connection of another type, a bucket outside the connection's list, a files or
 *   sqlite path inside the engine's data dir or holding its key files).
 * - `connectorConfig`: the connector configuration, secrets read from the environment at this
 *   moment and put into the configuration only.
 * - `restoreTargetRefusal`: a restore apply into a redis or s3 target needs `restore: true` on the
 *   connection (and, for s3, a bucket within its list).
 *
 * Security-relevant behaviour: a job that still has the old inline shape (url, endpoint, *Env
 * names) never gets a configuration (ConnectionError: the run fails with `source binding error` and
 * detail code ERR_RUN_CONNECTION_UNCONFIGURED),
 * so the engine never opens a connection a job described itself. Messages name fields and
 * connection ids, never a URL's credentials or a secret.
 */
import { realpathSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import type { Connection, ConnectionsConfig, S3Connection } from './config.ts';

/** Fields a job's source may no longer carry: they now belong to a connection. */
export const INLINE_FIELDS = [
  'url',
  'endpoint',
  'passwordEnv',
  'accessKeyIdEnv',
  'secretAccessKeyEnv',
  'region',
  'forcePathStyle',
] as const;

/** Stable codes of the job refusals (docs/errors.md, "Job and connection refusals"). */
export type JobRefusalCode =
  | 'ERR_JOB_INLINE_CONNECTION'
  | 'ERR_JOB_UNKNOWN_CONNECTION'
  | 'ERR_JOB_CONNECTION_TYPE'
  | 'ERR_JOB_BUCKET_NOT_ALLOWED'
  | 'ERR_JOB_PATH_NOT_ALLOWED';

export const JOB_REFUSAL_CODES: readonly JobRefusalCode[] = [
  'ERR_JOB_INLINE_CONNECTION',
  'ERR_JOB_UNKNOWN_CONNECTION',
  'ERR_JOB_CONNECTION_TYPE',
  'ERR_JOB_BUCKET_NOT_ALLOWED',
  'ERR_JOB_PATH_NOT_ALLOWED',
];

export interface JobRefusal {
  code: JobRefusalCode;
  error: string;
}

type Source = { type: string } & Record<string, unknown>;

/** The refusal of a source still carrying an inline connection field, or null. */
export function inlineFieldRefusal(source: unknown, at = 'source'): JobRefusal | null {
  if (source === null || typeof source !== 'object') return null;
  const s = source as Record<string, unknown>;
  if (s.type !== 'redis' && s.type !== 's3') return null;
  const field = INLINE_FIELDS.find((k) => k in s);
  if (field === undefined) return null;
  return {
    code: 'ERR_JOB_INLINE_CONNECTION',
    error: `${at}.${field} is no longer accepted in a job: name a connection configured in ENGINE_CONNECTIONS_FILE (${at}.connection)`,
  };
}

/** Resolves symlinks of the longest existing ancestor, so a link cannot hide where a path leads. */
function real(path: string): string {
  const abs = resolve(path);
  let head = abs;
  let tail = '';
  for (;;) {
    try {
      return join(realpathSync(head), tail);
    } catch {
      const up = dirname(head);
      if (up === head) return abs;
      tail = join(head.slice(up.length + (up.endsWith(sep) ? 0 : 1)), tail);
      head = up;
    }
  }
}

const within = (child: string, parent: string) =>
  child === parent || child.startsWith(parent.endsWith(sep) ? parent : parent + sep);

/**
 * The upsert-time check of a job's source (schema already validated). `protectedPaths`: the
 * engine's data dir and key files; a files or sqlite source may neither lie inside one nor contain
 * one (its archive would then hold the engine's secret keys).
 */
export function checkJobSource(
  source: Source,
  connections: ConnectionsConfig,
  protectedPaths: string[],
): JobRefusal | null {
  const inline = inlineFieldRefusal(source);
  if (inline) return inline;
  if (source.type === 'files' || source.type === 'sqlite') {
    const path = real(String(source.path));
    for (const p of protectedPaths) {
      const guarded = real(p);
      if (within(path, guarded) || (source.type === 'files' && within(guarded, path)))
        return {
          code: 'ERR_JOB_PATH_NOT_ALLOWED',
          error:
            'source.path lies inside (or contains) the engine’s data dir or key files, which hold its secrets',
        };
    }
    return null;
  }
  if (source.type !== 'redis' && source.type !== 's3') return null;
  const id = String(source.connection);
  const c = connections.connections.get(id);
  if (c === undefined)
    return {
      code: 'ERR_JOB_UNKNOWN_CONNECTION',
      error: `source.connection "${id}" is not configured (connections come from ENGINE_CONNECTIONS_FILE)`,
    };
  if (c.type !== source.type)
    return {
      code: 'ERR_JOB_CONNECTION_TYPE',
      error: `source.connection "${id}" is a ${c.type} connection, not ${source.type}`,
    };
  if (c.type === 's3' && c.buckets && !c.buckets.includes(String(source.bucket)))
    return {
      code: 'ERR_JOB_BUCKET_NOT_ALLOWED',
      error: `source.bucket is not one of the buckets of connection "${id}"`,
    };
  return null;
}

/** A connection that cannot be used now (a job not migrated, a connection gone, a secret unset). */
export class ConnectionError extends Error {
  /** A run error code (runs/reasons.ts): the run fails with `source binding error`. */
  readonly code = 'ERR_RUN_CONNECTION_UNCONFIGURED';
  constructor(message: string) {
    super(message);
    this.name = 'ConnectionError';
  }
}

function secret(connections: ConnectionsConfig, c: Connection, name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  // Checked again at use time: the environment may have changed since start.
  const why = connections.refusedReference(name);
  if (why !== null) throw new ConnectionError(`connection ${c.id}: a credential reference ${why}`);
  return process.env[name];
}

/** The connection a job source names, of the right type, or a ConnectionError. */
export function connectionFor(source: Source, connections: ConnectionsConfig): Connection {
  if (inlineFieldRefusal(source) !== null || typeof source.connection !== 'string')
    throw new ConnectionError(
      'the job still describes its own connection (not migrated): configure a matching connection in ENGINE_CONNECTIONS_FILE and save the job with source.connection',
    );
  const c = connections.connections.get(source.connection);
  if (c === undefined || c.type !== source.type)
    throw new ConnectionError(
      `connection ${source.connection} is not configured as a ${source.type} connection`,
    );
  return c;
}

/** Connector settings of a redis connection: its URL with credentials from the environment. */
export function redisConnectorUrl(c: Connection & { type: 'redis' }, connections: ConnectionsConfig): string {
  const u = new URL(c.url);
  const password = secret(connections, c, c.passwordEnv);
  const username = secret(connections, c, c.usernameEnv);
  if (username !== undefined) u.username = username;
  if (password !== undefined) u.password = password;
  return u.toString();
}

/** Connector settings of an s3 connection (no bucket), credentials from the environment. */
export function s3ConnectorSettings(
  c: S3Connection,
  connections: ConnectionsConfig,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (c.endpoint !== undefined) out.endpoint = c.endpoint;
  if (c.region !== undefined) out.region = c.region;
  if (c.forcePathStyle !== undefined) out.forcePathStyle = c.forcePathStyle;
  const accessKeyId = secret(connections, c, c.accessKeyIdEnv);
  const secretAccessKey = secret(connections, c, c.secretAccessKeyEnv);
  if (accessKeyId !== undefined && secretAccessKey !== undefined)
    out.credentials = { accessKeyId, secretAccessKey };
  return out;
}

/**
 * The connector configuration of a job's source (`binding` = the job id); null for a source type
 * no connector handles. Throws ConnectionError for a redis/s3 source that names no usable
 * connection (never falls back to fields the job carries itself).
 */
export function connectorConfig(
  source: Source,
  binding: string,
  connections: ConnectionsConfig,
): Record<string, unknown> | null {
  switch (source.type) {
    case 'files':
      return { type: 'files', root: source.path, binding };
    case 'sqlite':
      return { type: 'sqlite', path: source.path, binding };
    case 'redis': {
      const c = connectionFor(source, connections) as Connection & { type: 'redis' };
      const config: Record<string, unknown> = {
        type: 'redis',
        url: redisConnectorUrl(c, connections),
        binding,
      };
      if (source.db !== undefined) config.db = source.db;
      if (source.keyPrefix !== undefined) config.prefix = source.keyPrefix;
      return config;
    }
    case 's3': {
      const c = connectionFor(source, connections) as S3Connection;
      if (c.buckets && !c.buckets.includes(String(source.bucket)))
        throw new ConnectionError(`the job's bucket is not one of the buckets of connection ${c.id}`);
      const config: Record<string, unknown> = {
        type: 's3',
        bucket: source.bucket,
        binding,
        ...s3ConnectorSettings(c, connections),
      };
      if (source.prefix !== undefined) config.prefix = source.prefix;
      return config;
    }
    default:
      return null;
  }
}

/**
 * Why a restore apply into the job source `source` (with the request's bucket override) is refused,
 * or null when it is allowed. Redis and s3 targets need `restore: true` on their connection, and an
 * s3 target bucket within the connection's `buckets` when that list is set; files and sqlite
 * targets are confined by ENGINE_RESTORE_ROOTS elsewhere (null here).
 */
export function restoreTargetRefusal(
  source: Source | undefined,
  bucketOverride: string | undefined,
  connections: ConnectionsConfig,
): string | null {
  if (source === undefined || (source.type !== 'redis' && source.type !== 's3')) return null;
  let c: Connection;
  try {
    c = connectionFor(source, connections);
  } catch {
    return 'the target job names no configured connection (not migrated)';
  }
  if (!c.restore)
    return `restores into connection "${c.id}" are not allowed (the connection has no "restore": true in ENGINE_CONNECTIONS_FILE)`;
  if (c.type === 's3' && c.buckets) {
    const bucket = bucketOverride ?? String(source.bucket);
    if (!c.buckets.includes(bucket))
      return `restores into that bucket are not allowed (not one of the buckets of connection "${c.id}")`;
  }
  return null;
}
