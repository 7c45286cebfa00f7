/**
 * `openSource`: one entry point from a stored source configuration to its connector. The
 * configuration's `type` picks the connector; anything else is ERR_SOURCE_UNSUPPORTED_TYPE (the
 * specification's `unsupported source type`).
 */
import { quoteName, SourceError } from './errors.ts';
import { createFilesSource, type FilesSourceConfig } from './files-source.ts';
import { createRedisSource, type RedisSourceConfig } from './redis-source.ts';
import { createS3Source, type S3SourceConfig } from './s3-source.ts';
import { createSqliteSource, type SqliteSourceConfig } from './sqlite-source.ts';
import type { SourceConnector } from './types.ts';

export type SourceConfig = FilesSourceConfig | SqliteSourceConfig | RedisSourceConfig | S3SourceConfig;

/**
 * Opens the connector for `config` (no I/O until its first call). Throws SourceError
 * ERR_SOURCE_UNSUPPORTED_TYPE for an unknown type and ERR_SOURCE_INVALID_CONFIG for a malformed
 * configuration; messages never repeat credentials.
 */
export function openSource(config: SourceConfig | { type: string; [key: string]: unknown }): SourceConnector {
  const type = (config as { type?: unknown } | null)?.type;
  switch (type) {
    case 'files':
      return createFilesSource(config as FilesSourceConfig);
    case 'sqlite':
      return createSqliteSource(config as SqliteSourceConfig);
    case 'redis':
      return createRedisSource(config as RedisSourceConfig);
    case 's3':
      return createS3Source(config as S3SourceConfig);
    default:
      throw new SourceError(
        'ERR_SOURCE_UNSUPPORTED_TYPE',
        `unsupported source type ${typeof type === 'string' ? quoteName(type.slice(0, 40)) : `(${typeof type})`}`,
      );
  }
}
