/**
 * @coffer/sources: the source connectors of Coffer. Each enumerates the records of one resource
 * page by page, reads a record whole (streaming) or by byte range, and, for restore, checks
 * existence and writes records back:
 * - `files`: the regular files of a directory tree (links and special files skipped, never followed);
 * - `sqlite`: a database file captured consistently while it is written to, one record per table;
 * - `redis`: the keys of a database or key prefix, as DUMP payloads with their expirations;
 * - `s3`: the objects of a bucket or prefix on any S3-compatible store.
 * Every failure is a SourceError with a stable `code`, the specification's failure `reason` and a
 * `disposition` (fail, park, warn); messages never carry credentials or record bytes. A connector
 * never reads or writes outside the resource it was opened on.
 */

export {
  dispositionFor,
  failureReasonFor,
  isSourceError,
  SOURCE_ERROR_CODES,
  SOURCE_FAILURE_REASONS,
  SourceError,
  type SourceErrorCode,
  type SourceErrorDisposition,
  type SourceErrorOptions,
  type SourceFailureReason,
} from './errors.ts';
export { createFilesSource, type FilesSourceConfig } from './files-source.ts';
export {
  type FileNameProblem,
  type FilesWriteOptions,
  FilesWriter,
  fileNameProblem,
  fileNameProblemText,
  type ParentProblem,
  type RemoveCutWritesOptions,
  removeCutWrites,
  type TargetEntry,
} from './files-writer.ts';
export {
  SCHEMA_FORMAT as SQLITE_SCHEMA_FORMAT,
  SCHEMA_RECORD as SQLITE_SCHEMA_RECORD,
  type SqliteSchema,
  TABLE_FORMAT as SQLITE_TABLE_FORMAT,
  type TableHeader as SqliteTableHeader,
  tableOfRecord as sqliteTableOfRecord,
  tableRecordName as sqliteTableRecordName,
} from './internal/sqlite-codec.ts';
export { openSource, type SourceConfig } from './open-source.ts';
export { createRedisSource, type RedisSourceConfig, redisKeyToName, redisNameToKey } from './redis-source.ts';
export { createS3Source, type S3SourceConfig } from './s3-source.ts';
export { createSqliteSource, type SqliteSourceConfig } from './sqlite-source.ts';
export {
  type EnumerateOptions,
  isSkipped,
  type ListOptions,
  type ReadOptions,
  type RecordBody,
  type SkippedRecord,
  SOURCE_TYPES,
  type SourceConnector,
  type SourcePage,
  type SourceRecordInfo,
  type SourceType,
  type WriteResult,
} from './types.ts';
