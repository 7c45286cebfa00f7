/**
 * Opening a job's source connector (@coffer/sources) from the job's `source` object, and the
 * narrow connector surface the run executor uses.
 *
 * Security-relevant behaviour: connection secrets never live in a job; a redis or s3 job names a
 * connection of ENGINE_CONNECTIONS_FILE, whose credential variables are read at open time and
 * handed to the connector only.
 */
import { type ConnectionsConfig, NO_CONNECTIONS } from '../connections/config.ts';
import { type JobSource, jobSourceConfig } from './source-config.ts';

/** One record as the connector's listing saw it. */
export interface RunSourceRecord {
  name: string;
  size: number;
  sourceType: string;
  binding: string;
  namespace: string;
  metadata: Record<string, unknown>;
  /** The connector's change token (files, s3): equal tokens mean unchanged bytes. */
  change?: string;
}

export interface RunSourceSkipped {
  skipped: true;
  name: string;
  reason: string;
}

/** The subset of @coffer/sources' SourceConnector the executor needs. */
export interface RunSource {
  readonly type: string;
  readonly binding: string;
  readonly namespace: string;
  readonly description: string;
  enumerate(options?: {
    pageSize?: number;
    maxPages?: number;
    maxEntries?: number;
  }): AsyncIterable<RunSourceRecord | RunSourceSkipped>;
  /** `buffer`: scratch memory the connector may read into (pieces valid until the next is asked for). */
  read(name: string, options?: { buffer?: Uint8Array }): Promise<AsyncIterable<Uint8Array>>;
  /** Optional: a small record whole, read into `buffer` when it fits (files connector). */
  readInto?(name: string, buffer: Uint8Array): Promise<Uint8Array>;
  close(): Promise<void>;
}

export function isSkippedEntry(entry: RunSourceRecord | RunSourceSkipped): entry is RunSourceSkipped {
  return (entry as RunSourceSkipped).skipped === true;
}

export type { JobSource };

interface SourcesModule {
  createFilesSource?: (config: Record<string, unknown>) => RunSource;
  createSqliteSource?: (config: Record<string, unknown>) => RunSource;
  createRedisSource?: (config: Record<string, unknown>) => RunSource;
  createS3Source?: (config: Record<string, unknown>) => RunSource;
  openSource?: (config: Record<string, unknown>) => RunSource | Promise<RunSource>;
  SourceError: new (code: string, message: string, options?: Record<string, unknown>) => Error;
}

let loaded: Promise<SourcesModule> | null = null;

/** @coffer/sources, loaded once (resolved from this package's dependencies). */
export function sourcesModule(): Promise<SourcesModule> {
  if (!loaded) {
    // Loaded lazily (a sources-free engine start stays light) and by its static name, so a
    // bundled release carries it.
    loaded = import('@coffer/sources').then((m) => m as unknown as SourcesModule);
  }
  return loaded;
}

/** A SourceError with `code` (for configuration faults found here and for injected faults). */
export async function sourceError(code: string, message: string): Promise<Error> {
  const mod = await sourcesModule();
  return new mod.SourceError(code, message);
}

/**
 * Opens the connector for a job's source. `binding` is the job id (the configured connection
 * name recorded on each record). Throws SourceError (ERR_SOURCE_UNSUPPORTED_TYPE, BINDING, ...).
 */
export async function openJobSource(
  source: JobSource,
  binding: string,
  // No connections by default: a redis or s3 source then fails to open (app.ts passes the engine's).
  connections: ConnectionsConfig = NO_CONNECTIONS,
): Promise<RunSource> {
  const mod = await sourcesModule();
  const config = jobSourceConfig(source, binding, connections);
  if (config === null) throw new mod.SourceError('ERR_SOURCE_UNSUPPORTED_TYPE', 'unsupported source type');
  if (mod.openSource) return mod.openSource(config);
  const factory = {
    files: mod.createFilesSource,
    sqlite: mod.createSqliteSource,
    redis: mod.createRedisSource,
    s3: mod.createS3Source,
  }[source.type as 'files'];
  if (!factory) throw new mod.SourceError('ERR_SOURCE_UNSUPPORTED_TYPE', 'unsupported source type');
  return factory(config);
}

/** Include/exclude prefix selectors of a files source (exclude wins; empty include = all). */
export function selectorOf(source: JobSource): (name: string) => boolean {
  const include = Array.isArray(source.include) ? (source.include as string[]) : [];
  const exclude = Array.isArray(source.exclude) ? (source.exclude as string[]) : [];
  if (include.length === 0 && exclude.length === 0) return () => true;
  return (name) =>
    (include.length === 0 || include.some((p) => name.startsWith(p))) &&
    !exclude.some((p) => name.startsWith(p));
}
