/**
 * Start-up migration of stored jobs from the old inline redis/s3 shape (`url`, `endpoint`,
 * `passwordEnv`, `accessKeyIdEnv`, `secretAccessKeyEnv`, `region`, `forcePathStyle` in the job) to
 * a reference to a named connection (docs/jobs.md "Connections").
 *
 * Rule: a stored inline source is rewritten to `{ type, connection, ... }` when EXACTLY ONE
 * configured connection matches it: same type; for redis the same scheme, host and port and the
 * same `passwordEnv`; for s3 the same endpoint origin (or both AWS), the same credential variable
 * names, the same region when both name one, and the job's bucket within the connection's
 * `buckets`. Otherwise the job stays stored as it is (unmigrated): its runs fail with
 * `source binding error` (code ERR_RUN_CONNECTION_UNCONFIGURED) and it never opens a connection
 * from its own fields; one log line per such job says what to configure.
 *
 * Security-relevant behaviour: the inline shape could not carry credentials (the old schema refused
 * userinfo in URLs), so the log line's host, port and variable NAMES hold no secret.
 */
import { isStateError, type State } from '@coffer/state';
import type { Connection, ConnectionsConfig } from './config.ts';
import { INLINE_FIELDS, inlineFieldRefusal } from './resolve.ts';

type Source = { type: string } & Record<string, unknown>;

export interface MigrationLog {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
}

function redisEndpoint(
  raw: unknown,
): { proto: string; host: string; port: string; db: number | null } | null {
  try {
    const u = new URL(String(raw));
    const m = /^\/(\d{1,4})$/.exec(u.pathname);
    return {
      proto: u.protocol,
      host: u.hostname.toLowerCase(),
      port: u.port || '6379',
      db: m ? Number(m[1]) : null,
    };
  } catch {
    return null;
  }
}

function origin(raw: unknown): string | null {
  if (raw === undefined) return null;
  try {
    const u = new URL(String(raw));
    return `${u.protocol}//${u.host.toLowerCase()}`;
  } catch {
    return 'unparseable';
  }
}

function matches(source: Source, c: Connection): boolean {
  if (c.type !== source.type) return false;
  if (c.type === 'redis') {
    const a = redisEndpoint(source.url);
    const b = redisEndpoint(c.url);
    if (a === null || b === null) return false;
    return (
      a.proto === b.proto &&
      a.host === b.host &&
      a.port === b.port &&
      source.passwordEnv === c.passwordEnv &&
      c.usernameEnv === undefined
    );
  }
  if (origin(source.endpoint) !== origin(c.endpoint)) return false;
  if (source.accessKeyIdEnv !== c.accessKeyIdEnv || source.secretAccessKeyEnv !== c.secretAccessKeyEnv)
    return false;
  if (source.region !== undefined && c.region !== undefined && source.region !== c.region) return false;
  return c.buckets === undefined || c.buckets.includes(String(source.bucket));
}

/** The source rewritten to reference `c`, keeping the job's own namespace fields. */
function rewritten(source: Source, c: Connection): Source {
  const out: Source = { type: source.type, connection: c.id };
  for (const [k, v] of Object.entries(source))
    if (k !== 'type' && !(INLINE_FIELDS as readonly string[]).includes(k)) out[k] = v;
  if (c.type === 'redis' && out.db === undefined) {
    const db = redisEndpoint(source.url)?.db;
    if (db !== null && db !== undefined) out.db = db;
  }
  return out;
}

/** What an unmigrated job needs, in words (no secret: names and host:port only). */
function needed(source: Source, candidates: number): string {
  const what =
    source.type === 'redis'
      ? (() => {
          const e = redisEndpoint(source.url);
          const at = e ? `${e.proto}//${e.host}:${e.port}` : 'its url';
          return `a redis connection with url ${at}${source.passwordEnv ? ` and passwordEnv ${String(source.passwordEnv)}` : ' and no passwordEnv'}`;
        })()
      : `an s3 connection with endpoint ${origin(source.endpoint) ?? '(AWS)'}${source.accessKeyIdEnv ? `, accessKeyIdEnv ${String(source.accessKeyIdEnv)} and secretAccessKeyEnv ${String(source.secretAccessKeyEnv)}` : ' and no credential variables'} whose buckets include the job's bucket`;
  const found =
    candidates === 0 ? 'no configured connection matches' : `${candidates} configured connections match`;
  return `${found}: configure exactly one, ${what}, in ENGINE_CONNECTIONS_FILE (or save the job with source.connection)`;
}

export interface MigrationResult {
  migrated: string[];
  unmigrated: string[];
}

/** Migrates every stored job still carrying an inline redis/s3 source. Never throws for one job. */
export async function migrateJobs(
  state: State,
  connections: ConnectionsConfig,
  log: MigrationLog,
): Promise<MigrationResult> {
  const result: MigrationResult = { migrated: [], unmigrated: [] };
  for (const rec of await state.jobs.list()) {
    const source = rec.config.source as Source | undefined;
    if (!source || inlineFieldRefusal(source) === null) continue;
    const candidates = [...connections.connections.values()].filter((c) => matches(source, c));
    if (candidates.length === 1) {
      const c = candidates[0]!;
      try {
        await state.jobs.upsert(
          { ...rec.config, id: rec.id, source: rewritten(source, c) },
          { ifMatchRev: rec.configRev },
        );
        result.migrated.push(rec.id);
        log.info(
          { event: 'job-migrated', job: rec.id, connection: c.id },
          `job ${rec.id}: inline ${source.type} source now references connection ${c.id}`,
        );
        continue;
      } catch (err) {
        // Another engine migrated (or someone saved) it meanwhile: its stored shape is what counts.
        if (isStateError(err, 'ERR_STATE_PRECONDITION')) continue;
        throw err;
      }
    }
    result.unmigrated.push(rec.id);
    log.warn(
      { event: 'job-unmigrated', job: rec.id, sourceType: source.type, candidates: candidates.length },
      `job ${rec.id} is not migrated and its runs fail until fixed: ${needed(source, candidates.length)}`,
    );
  }
  return result;
}
