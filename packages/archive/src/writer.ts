/**
 * Archive writer (format 0.1). See docs/archive-format.md "Write algorithm".
 */
import { ArchiveError } from './errors.ts';
import type {
  ArchiveWriter,
  ArchiveWriterOptions,
  ResumeArchiveWriterOptions,
  ResumePoint,
} from './types.ts';

/**
 * Starts a run. Returns a writer; throws ERR_ARCHIVE_INVALID_ARGUMENT for a bad job / run id,
 * key or option, ERR_ARCHIVE_DESTINATION when the store cannot be read.
 */
export async function createArchiveWriter(_options: ArchiveWriterOptions): Promise<ArchiveWriter> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}

/**
 * Resumes a run from a checkpoint exported by `exportCheckpoint()`. Throws
 * ERR_ARCHIVE_CHECKPOINT_UNREADABLE when the checkpoint cannot be opened with these keys.
 */
export async function resumeArchiveWriter(
  _checkpoint: Uint8Array,
  _options: ResumeArchiveWriterOptions,
): Promise<{ writer: ArchiveWriter; resume: ResumePoint }> {
  throw new ArchiveError('ERR_ARCHIVE_INTERNAL', { detail: 'not implemented yet' });
}
