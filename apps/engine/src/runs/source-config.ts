/**
 * A job's `source` object as a @coffer/sources connector configuration: the one mapping shared by
 * the run executor (openJobSource, to back up) and the restore routes (to write back into the
 * job's source).
 *
 * Security-relevant behaviour: a job never carries an endpoint or a credential reference; a redis
 * or s3 source names a connection of ENGINE_CONNECTIONS_FILE (src/connections), whose secrets are
 * read from the environment here, when a connector is about to be opened, and put into the
 * configuration only (never into a reply, a log or the state store).
 */
import type { ConnectionsConfig } from '../connections/config.ts';
import { connectorConfig } from '../connections/resolve.ts';

/** A job's `source` object as the jobs routes validated it. */
import type { JobSource } from '../jobs/index.ts';

export type { JobSource };

/**
 * The connector configuration of a job's source (`binding` = the job id), secrets resolved from
 * the environment; null for a source type no connector handles. Throws ConnectionError
 * (ERR_RUN_CONNECTION_UNCONFIGURED) for a redis/s3 source without a usable connection.
 */
export function jobSourceConfig(
  source: JobSource,
  binding: string,
  connections: ConnectionsConfig,
): Record<string, unknown> | null {
  return connectorConfig(source, binding, connections);
}
